"""One call per finished rollout group: the curation rules of SPEC §8 applied in the papers' order.

`GroupCurator.process_group` drops rollouts beyond the staleness bound, records outcomes (dynamic N,
step limit), fills an all-failed group from the configured store (experience pool, BEPA cache or
replay buffer), stores new successes, and says whether the group carries any learning signal.
State round-trips through `to_dict()` / `from_dict()` for checkpoints.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Self

from workers.rl.config import CurationConfig
from workers.rl.curation import (
    BepaCache,
    DynamicRolloutCount,
    ExperiencePool,
    Injection,
    ReplayBuffer,
    StepLimit,
    curriculum_bucket,
)


def staleness(policy_version: int, current_version: int) -> int:
    """How many policy updates behind the current policy a rollout is (0 = on-policy)."""
    if policy_version > current_version:
        raise ValueError(f"rollout version {policy_version} is newer than the current {current_version}")
    return current_version - policy_version


def within_staleness_bound(policy_version: int, current_version: int, bound: int) -> bool:
    """True when a rollout made by `policy_version` may still be trained on (SPEC §8, default bound 1)."""
    return staleness(policy_version, current_version) <= bound


@dataclass(frozen=True)
class RolloutOutcome:
    """A finished rollout as the curator sees it.

    policy_version: the NEWEST policy version among its steps (weights may change mid-episode): a
    rollout is trained on while its last step is within the staleness bound; the trainer gives no
    loss to its steps that are beyond it (workers.rl.trainer, step-level staleness).
    """

    trajectory_id: str
    reward: float
    n_steps: int
    policy_version: int


@dataclass(frozen=True)
class GroupPlan:
    """What to train on for one group, and what to tell the dashboards."""

    task_id: str
    train_ids: list[str]  # fresh rollouts to train on, in input order
    stale_ids: list[str]  # rollouts beyond the staleness bound: not trained on
    successes: list[bool]  # per fresh rollout
    injections: list[Injection]  # stored successes added to / replacing rollouts of this group
    no_signal: bool  # every reward equal and nothing injected: GRPO advantages would all be 0, skip it
    next_rollouts: int  # N for this task's next group (dynamic rollout count)
    step_limit: int  # per-task step limit for the next rollouts
    curriculum: str | None  # difficulty bucket from the recent success rate; None before any outcome

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["injections"] = [i.to_dict() for i in self.injections]
        return out


class GroupCurator:
    """Curation state for a whole run, configured by a `CurationConfig`."""

    def __init__(self, config: CurationConfig) -> None:
        self.config = config
        self.rollouts = DynamicRolloutCount(
            config.rollouts_max, config.rollouts_min, config.success_threshold, config.success_window
        )
        self.step_limit = StepLimit(config.step_cap)
        self.pool = ExperiencePool(config.experience_pool_per_task, config.seed)
        self.bepa = BepaCache(config.seed)
        self.replay = ReplayBuffer(config.replay_per_task, config.seed)
        self.counters: Counter[str] = Counter()

    def is_success(self, reward: float) -> bool:
        return reward >= self.config.success_min_reward

    def process_group(
        self,
        task_id: str,
        outcomes: Sequence[RolloutOutcome],
        current_version: int,
        step_credit: bool = False,
    ) -> GroupPlan:
        """Apply staleness, dynamic N, step limit, injection and success storage to one group.

        `step_credit` (GRPO with `grpo.anchor_weight` > 0): a group whose fresh rollouts all scored
        the same non-zero reward in different numbers of steps still carries signal — the step
        credit (workers.rl.advantages.anchor_step_advantages) ranks the shorter way over the detour."""
        if not outcomes:
            raise ValueError("a rollout group needs at least one outcome")
        for o in outcomes:
            if not math.isfinite(o.reward) or o.n_steps < 0:
                raise ValueError(f"bad outcome {o}")
        bound = self.config.staleness_bound
        is_fresh = [within_staleness_bound(o.policy_version, current_version, bound) for o in outcomes]
        fresh = [o for o, ok in zip(outcomes, is_fresh, strict=True) if ok]
        stale = [o.trajectory_id for o, ok in zip(outcomes, is_fresh, strict=True) if not ok]

        # Every finished rollout says how hard the task is, fresh or not.
        all_successes = [self.is_success(o.reward) for o in outcomes]
        self.rollouts.record(task_id, all_successes)
        for o, ok in zip(outcomes, all_successes, strict=True):
            if ok and o.n_steps > 0:
                self.step_limit.record_success(task_id, o.n_steps)

        successes = [self.is_success(o.reward) for o in fresh]
        injections = self._inject(task_id, successes) if fresh else []
        success_ids = [o.trajectory_id for o, ok in zip(fresh, successes, strict=True) if ok]
        self._store(task_id, success_ids)

        rewards = {o.reward for o in fresh}
        detours = step_credit and rewards != {0.0} and len({o.n_steps for o in fresh}) > 1
        no_signal = not fresh or (len(rewards) == 1 and not injections and not detours)
        self.counters.update(
            groups=1,
            no_signal_groups=int(no_signal),
            stale_rollouts=len(stale),
            **{f"injections/{i.source}": 1 for i in injections},
        )
        rate = self.rollouts.success_rate(task_id)
        return GroupPlan(
            task_id=task_id,
            train_ids=[o.trajectory_id for o in fresh],
            stale_ids=stale,
            successes=successes,
            injections=injections,
            no_signal=no_signal,
            next_rollouts=self.rollouts.n_for(task_id),
            step_limit=self.step_limit.limit_for(task_id),
            curriculum=None if rate is None else curriculum_bucket(rate),
        )

    def _inject(self, task_id: str, successes: list[bool]) -> list[Injection]:
        mode = self.config.injection
        if mode == "experience_pool":
            use = self.pool.draw_if_all_failed(task_id, successes)
            return [use] if use else []
        if mode == "bepa_cache":
            use = self.bepa.inject_if_all_failed(task_id, successes)
            return [use] if use else []
        if mode == "replay":
            return self.replay.sample_if_all_failed(task_id, successes, k=1)
        return []

    def _store(self, task_id: str, success_ids: list[str]) -> None:
        mode = self.config.injection
        if mode == "bepa_cache":
            self.bepa.update(task_id, success_ids)
        for trajectory_id in success_ids:
            if mode == "experience_pool":
                self.pool.add(task_id, trajectory_id)
            elif mode == "replay":
                self.replay.add(task_id, trajectory_id)

    def to_dict(self) -> dict[str, Any]:
        return {
            "config": self.config.model_dump(),
            "rollouts": self.rollouts.to_dict(),
            "step_limit": self.step_limit.to_dict(),
            "pool": self.pool.to_dict(),
            "bepa": self.bepa.to_dict(),
            "replay": self.replay.to_dict(),
            "counters": dict(self.counters),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        obj = cls(CurationConfig.model_validate(data["config"]))
        obj.rollouts = DynamicRolloutCount.from_dict(data["rollouts"])
        obj.step_limit = StepLimit.from_dict(data["step_limit"])
        obj.pool = ExperiencePool.from_dict(data["pool"])
        obj.bepa = BepaCache.from_dict(data["bepa"])
        obj.replay = ReplayBuffer.from_dict(data["replay"])
        obj.counters = Counter({str(k): int(v) for k, v in data["counters"].items()})
        return obj
