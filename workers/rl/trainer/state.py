"""The RL trainer's state file, `trainer_state.pt`: what `PolicyTrainer.save` writes beside the
weights (optimizers, RNG, counters, reference weights, plateau / value-pretraining monitors, the
caller's curation state, the averaged weights) and `resume` reads back, so that the next update is
bit-identical to the one an uninterrupted trainer would have made."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from workers.policy.base import PolicyError
from workers.rl.config import RLConfig
from workers.rl.curation import PlateauDetector
from workers.rl.value_pretrain import ValuePretrainMonitor

if TYPE_CHECKING:
    from workers.rl.trainer.core import PolicyTrainer

STATE_FILE = "trainer_state.pt"
EMA_DIR = "ema"  # the averaged weights' checkpoint directory inside a trainer checkpoint (weight_ema > 0)
STATE_KIND = "flywheel-rl-trainer"


def write(out: Path, state: dict[str, Any]) -> None:
    """`state` as out/trainer_state.pt, atomically: a crash never leaves a half-written state."""
    tmp = out / (STATE_FILE + ".tmp")
    torch.save(state, tmp)
    tmp.replace(out / STATE_FILE)


def load(out: Path) -> dict[str, Any]:
    """The trainer state saved in checkpoint directory `out`; PolicyError when there is none, or it
    is not an RL trainer's."""
    path = out / STATE_FILE
    if not path.is_file():
        raise PolicyError(f"no trainer state at {path}")
    state: dict[str, Any] = torch.load(path, weights_only=False)
    if state.get("kind") != STATE_KIND:
        raise PolicyError(f"{path} is not an RL trainer state (an SFT checkpoint?)")
    return state


def state_of(trainer: PolicyTrainer) -> dict[str, Any]:
    """Everything `restore` needs besides the weights."""
    return {
        "kind": STATE_KIND,
        "config": trainer.config.model_dump(),
        "seed": trainer.seed,
        "version": trainer.version,
        "steps_done": trainer.steps_done,
        "entropulse_count": trainer.entropulse_count,
        "optimizer": trainer.optimizer.state_dict(),
        "value_optimizer": trainer.value_optimizer.state_dict() if trainer.value_optimizer else None,
        "generator": trainer.generator.get_state(),
        "torch_rng": torch.get_rng_state(),
        "reference": trainer.reference.state_dict() if trainer.reference is not None else None,
        "plateau": trainer.plateau.to_dict(),
        "value_monitor": trainer.value_monitor.to_dict(),
        "curation_state": trainer.curation_state,
        "last_step_stats": trainer.last_step_stats,
        "ema": trainer.ema,
    }


def restore(trainer: PolicyTrainer, state: dict[str, Any], config: RLConfig) -> None:
    """Counters, optimizers, RNG, reference, monitors and curation state from a saved state."""
    trainer.version = int(state["version"])
    trainer.steps_done = int(state["steps_done"])
    trainer.entropulse_count = int(state.get("entropulse_count", 0))
    base_lrs = [g["base_lr"] for g in trainer.optimizer.param_groups]
    trainer.optimizer.load_state_dict(state["optimizer"])
    for group, base in zip(trainer.optimizer.param_groups, base_lrs, strict=True):
        group["base_lr"] = base  # the config's learning rate wins over the saved one
    if state["value_optimizer"] is not None:
        trainer.value_optimizer = torch.optim.Adam(trainer.value_params(), lr=config.ppo.lr_value)
        trainer.value_optimizer.load_state_dict(state["value_optimizer"])
    trainer.generator.set_state(state["generator"])
    torch.set_rng_state(state["torch_rng"])
    if state["reference"] is not None and trainer.uses_reference:
        assert trainer.reference is not None
        trainer.reference.load_state_dict(state["reference"])
    trainer.plateau = PlateauDetector.from_dict(state["plateau"])
    trainer.value_monitor = ValuePretrainMonitor.from_dict(state["value_monitor"])
    trainer.curation_state = state["curation_state"]
    trainer.last_step_stats = state["last_step_stats"]
    if trainer.ema is not None and state.get("ema") is not None:
        trainer.ema = state["ema"]  # else averaging starts from the resumed weights
