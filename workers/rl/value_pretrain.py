"""When to stop value pretraining (seed 000 §2.5.4: train the critic on a fixed policy with λ = 1
until value loss and explained variance converge, then start PPO from that critic)."""

from __future__ import annotations

import math
from typing import Any, Literal, Self

from workers.rl.config import PPOConfig

StopReason = Literal["converged", "max_updates"]


class ValuePretrainMonitor:
    """Feed (value loss, explained variance) after every critic update; `done` says when to stop.

    Converged = explained variance ≥ `target_ev` AND the best value loss has not improved by more
    than `min_rel_improvement` for `patience` updates. `max_updates` stops regardless (0 = skip).
    """

    def __init__(
        self,
        target_ev: float = 0.8,
        patience: int = 20,
        max_updates: int = 20,
        min_rel_improvement: float = 1e-3,
    ) -> None:
        if patience < 1 or max_updates < 0 or min_rel_improvement < 0:
            raise ValueError("need patience ≥ 1, max_updates ≥ 0, min_rel_improvement ≥ 0")
        self.target_ev, self.patience, self.max_updates = target_ev, patience, max_updates
        self.min_rel_improvement = min_rel_improvement
        self.updates = 0
        self.best_loss = math.inf
        self.since_best = 0
        self.last_ev = math.nan

    @classmethod
    def from_config(cls, config: PPOConfig) -> Self:
        return cls(
            config.value_pretrain_target_ev, config.value_pretrain_patience, config.value_pretrain_max_updates
        )

    def record(self, value_loss: float, explained_variance: float) -> StopReason | None:
        """Register one update; returns why to stop, or None to continue. A NaN EV never converges."""
        if not math.isfinite(value_loss) or value_loss < 0:
            raise ValueError(f"value loss must be finite and ≥ 0, got {value_loss}")
        self.updates += 1
        self.last_ev = explained_variance
        if value_loss < self.best_loss * (1.0 - self.min_rel_improvement):
            self.best_loss, self.since_best = value_loss, 0
        else:
            self.since_best += 1
        return self.done

    @property
    def done(self) -> StopReason | None:
        if self.max_updates == 0 or self.updates >= self.max_updates:
            return "max_updates"
        ev_ok = not math.isnan(self.last_ev) and self.last_ev >= self.target_ev
        return "converged" if ev_ok and self.since_best >= self.patience else None

    def to_dict(self) -> dict[str, Any]:
        # inf / NaN become null: PostgreSQL's jsonb, where checkpoints live, refuses them
        data = dict(vars(self))
        data["best_loss"] = None if math.isinf(self.best_loss) else self.best_loss
        data["last_ev"] = None if math.isnan(self.last_ev) else self.last_ev
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        obj = cls(data["target_ev"], data["patience"], data["max_updates"], data["min_rel_improvement"])
        obj.updates, obj.since_best = int(data["updates"]), int(data["since_best"])
        obj.best_loss = math.inf if data["best_loss"] is None else float(data["best_loss"])
        obj.last_ev = math.nan if data["last_ev"] is None else float(data["last_ev"])
        return obj
