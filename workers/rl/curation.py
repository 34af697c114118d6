"""Data curation state for RL runs, in plain Python (seed 002 §4, seed 003 §4, seed 004 §2.3.3, seed 001 §3.3).

Every class keeps per-task state keyed by a task id string and round-trips through JSON-safe
`to_dict()` / `from_dict()` so a run can checkpoint and resume it. Trajectories are referred to by
id; loading them is the caller's job. Random picks use a seeded `random.Random` whose state is part
of the checkpoint, so a resumed run makes the same picks.
"""

from __future__ import annotations

import math
import random
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Self


def _rng_state(rng: random.Random) -> list[Any]:
    version, internal, gauss = rng.getstate()
    return [version, list(internal), gauss]


def _rng_from(state: list[Any] | None, seed: int) -> random.Random:
    rng = random.Random(seed)
    if state is not None:
        rng.setstate((state[0], tuple(state[1]), state[2]))
    return rng


def _task(task_id: str) -> str:
    if not isinstance(task_id, str) or not task_id:
        raise ValueError(f"task id must be a non-empty string, got {task_id!r}")
    return task_id


def rollouts_for_success_rate(
    rate: float | None, n_max: int = 8, n_min: int = 2, threshold: float = 0.6
) -> int:
    """Rollouts N for a task with recent success rate `rate` (seed 002 §4.1, Fig. 5).

    The paper says N drops from 8 "to lower values" once success exceeds 0.6 but gives no formula;
    we interpolate linearly: N = n_max for rate ≤ threshold (and for unseen tasks, rate None), then
    N = n_max − ceil((rate − threshold) / (1 − threshold) · (n_max − n_min)), so any rate above the
    threshold removes at least one rollout and a task that always succeeds gets n_min
    (e.g. 8 → 7 at 0.61, 5 at 0.8, 2 at 1.0). n_min ≥ 2 keeps a baseline in every group.
    """
    if not 2 <= n_min <= n_max:
        raise ValueError(f"need 2 ≤ n_min ≤ n_max, got {n_min}, {n_max}")
    if not 0.0 <= threshold < 1.0:
        raise ValueError(f"threshold must be in [0, 1), got {threshold}")
    if rate is None or rate <= threshold:
        if rate is not None and not 0.0 <= rate:
            raise ValueError(f"success rate must be in [0, 1], got {rate}")
        return n_max
    if rate > 1.0 or math.isnan(rate):
        raise ValueError(f"success rate must be in [0, 1], got {rate}")
    # round() first: (0.8 − 0.6) / 0.4 · 6 is 3.0000000000000004 in floats and must not ceil to 4
    cut = math.ceil(round((rate - threshold) / (1.0 - threshold) * (n_max - n_min), 9))
    return n_max - cut


class DynamicRolloutCount:
    """Per-task N from the success rate over the last `window` outcomes (seed 002 §4.1)."""

    def __init__(self, n_max: int = 8, n_min: int = 2, threshold: float = 0.6, window: int = 16) -> None:
        rollouts_for_success_rate(None, n_max, n_min, threshold)  # validates the parameters
        if window < 1:
            raise ValueError("window must be ≥ 1")
        self.n_max, self.n_min, self.threshold, self.window = n_max, n_min, threshold, window
        self._outcomes: dict[str, deque[bool]] = {}

    def record(self, task_id: str, successes: Iterable[bool]) -> None:
        """Append the outcomes of finished rollouts of `task_id`."""
        queue = self._outcomes.setdefault(_task(task_id), deque(maxlen=self.window))
        queue.extend(bool(s) for s in successes)

    def success_rate(self, task_id: str) -> float | None:
        """Recent success rate in [0, 1], None before the first outcome."""
        queue = self._outcomes.get(task_id)
        return sum(queue) / len(queue) if queue else None

    def n_for(self, task_id: str) -> int:
        return rollouts_for_success_rate(self.success_rate(task_id), self.n_max, self.n_min, self.threshold)

    def to_dict(self) -> dict[str, Any]:
        params = {
            "n_max": self.n_max,
            "n_min": self.n_min,
            "threshold": self.threshold,
            "window": self.window,
        }
        return {**params, "outcomes": {k: list(v) for k, v in self._outcomes.items()}}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        obj = cls(data["n_max"], data["n_min"], data["threshold"], data["window"])
        for task_id, outcomes in data["outcomes"].items():
            obj.record(task_id, outcomes)
        return obj


class StepLimit:
    """Per-task step limit = longest success so far, at most `cap`; `cap` before any success (seed 002 §4.1)."""

    def __init__(self, cap: int = 30) -> None:
        if cap < 1:
            raise ValueError("cap must be ≥ 1")
        self.cap = cap
        self._longest: dict[str, int] = {}

    def record_success(self, task_id: str, n_steps: int) -> None:
        if n_steps < 1:
            raise ValueError(f"a success takes at least one step, got {n_steps}")
        key = _task(task_id)
        self._longest[key] = max(self._longest.get(key, 0), min(n_steps, self.cap))

    def limit_for(self, task_id: str) -> int:
        return self._longest.get(task_id, self.cap)

    def to_dict(self) -> dict[str, Any]:
        return {"cap": self.cap, "longest": dict(self._longest)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        obj = cls(data["cap"])
        obj._longest = {str(k): int(v) for k, v in data["longest"].items()}
        return obj


@dataclass(frozen=True)
class Injection:
    """A stored success put into a group in which every rollout failed; log one per use.

    replace_index: position of the failed rollout it replaces (BEPA: the first), None = appended.
    recompute_logprobs: the stored log-probs come from an older policy; recompute them before training.
    """

    source: str  # "experience_pool" | "bepa_cache" | "replay"
    task_id: str
    trajectory_id: str
    replace_index: int | None
    recompute_logprobs: bool
    use_count: int  # times this trajectory has been injected, this use included

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _all_failed(successes: Sequence[bool]) -> bool:
    if len(successes) == 0:
        raise ValueError("a rollout group needs at least one outcome")
    return not any(successes)


class _TaskSuccesses:
    """Trajectory ids of successes kept per task (a bounded queue each), with a use count per id and a
    seeded RNG; the state the experience pool and the replay buffer share, and its checkpoint form."""

    source = ""

    def __init__(self, per_task: int, seed: int = 0) -> None:
        if per_task < 1:
            raise ValueError("per_task must be ≥ 1")
        self.per_task, self.seed = per_task, seed
        self._items: dict[str, deque[str]] = {}
        self._uses: dict[str, int] = {}
        self._rng = random.Random(seed)

    def add(self, task_id: str, trajectory_id: str) -> None:
        raise NotImplementedError

    def __len__(self) -> int:
        return sum(len(q) for q in self._items.values())

    def uses(self, trajectory_id: str) -> int:
        return self._uses.get(trajectory_id, 0)

    @property
    def total_uses(self) -> int:
        return sum(self._uses.values())

    def _use(self, task_id: str, trajectory_id: str) -> Injection:
        self._uses[trajectory_id] = self._uses.get(trajectory_id, 0) + 1
        return Injection(self.source, task_id, trajectory_id, None, True, self._uses[trajectory_id])

    def to_dict(self) -> dict[str, Any]:
        return {
            "per_task": self.per_task,
            "seed": self.seed,
            "items": {k: list(v) for k, v in self._items.items()},
            "uses": dict(self._uses),
            "rng": _rng_state(self._rng),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        obj = cls(data["per_task"], data["seed"])
        for task_id, ids in data["items"].items():
            for trajectory_id in ids:
                obj.add(task_id, trajectory_id)
        obj._uses = {str(k): int(v) for k, v in data["uses"].items()}
        obj._rng = _rng_from(data.get("rng"), obj.seed)
        return obj


class ExperiencePool(_TaskSuccesses):
    """Successful trajectories per task; one is drawn at random when a whole group fails (seed 002 §4.2).

    Keeps the `per_task` newest successes of each task and counts every use per trajectory.
    Injected trajectories are appended to the group; the trainer corrects their older log-probs with
    the truncated IS weight, so they are flagged for recomputation of π_train_old only.
    """

    source = "experience_pool"

    def __init__(self, per_task: int = 16, seed: int = 0) -> None:
        super().__init__(per_task, seed)

    def add(self, task_id: str, trajectory_id: str) -> None:
        """Store a success (pre-populated or from training); a repeated id is ignored."""
        queue = self._items.setdefault(_task(task_id), deque(maxlen=self.per_task))
        if trajectory_id not in queue:
            queue.append(trajectory_id)

    def draw_if_all_failed(self, task_id: str, successes: Sequence[bool]) -> Injection | None:
        """A stored success when every outcome in `successes` is False and the task has one, else None."""
        stored = self._items.get(task_id)
        if not _all_failed(successes) or not stored:
            return None
        return self._use(task_id, self._rng.choice(list(stored)))


class BepaCache:
    """BEPA LEVEL-2 self-aligned cache: one success per task (seed 003 §4.2–4.3).

    Any group with successes overwrites the task's entry with one of them picked at random (the
    paper's default update rule U). When a whole group fails and the task has an entry, it replaces
    the first failed rollout (rollout #1). The cached trajectory was sampled by an older policy, so
    its log-probs must be recomputed under the current one before training.
    """

    source = "bepa_cache"

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self._cache: dict[str, str] = {}
        self._uses: dict[str, int] = {}
        self.updates = 0
        self._rng = random.Random(seed)

    def seed_entry(self, task_id: str, trajectory_id: str) -> None:
        """LEVEL-1: initialise a task's entry with a self-rolled, policy-reachable success."""
        self._cache[_task(task_id)] = trajectory_id

    def update(self, task_id: str, success_ids: Sequence[str]) -> None:
        """Overwrite the entry with a random one of this group's successes; no-op when there are none."""
        if success_ids:
            self._cache[_task(task_id)] = self._rng.choice(list(success_ids))
            self.updates += 1

    def get(self, task_id: str) -> str | None:
        return self._cache.get(task_id)

    def inject_if_all_failed(self, task_id: str, successes: Sequence[bool]) -> Injection | None:
        cached = self._cache.get(task_id)
        if not _all_failed(successes) or cached is None:
            return None
        self._uses[cached] = self._uses.get(cached, 0) + 1
        return Injection(self.source, task_id, cached, 0, True, self._uses[cached])

    @property
    def total_uses(self) -> int:
        return sum(self._uses.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "cache": dict(self._cache),
            "uses": dict(self._uses),
            "updates": self.updates,
            "rng": _rng_state(self._rng),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        obj = cls(data["seed"])
        obj._cache = {str(k): str(v) for k, v in data["cache"].items()}
        obj._uses = {str(k): int(v) for k, v in data["uses"].items()}
        obj.updates = int(data["updates"])
        obj._rng = _rng_from(data.get("rng"), obj.seed)
        return obj


class ReplayBuffer(_TaskSuccesses):
    """MAI-UI replay (seed 004 §2.3.3): the `per_task` most recent successes of each task."""

    source = "replay"

    def __init__(self, per_task: int = 8, seed: int = 0) -> None:
        super().__init__(per_task, seed)

    def add(self, task_id: str, trajectory_id: str) -> None:
        """Record a new success; the oldest of the task's entries falls out beyond `per_task`."""
        queue = self._items.setdefault(_task(task_id), deque(maxlen=self.per_task))
        if trajectory_id in queue:  # a re-added id counts as recent again
            queue.remove(trajectory_id)
        queue.append(trajectory_id)

    def recent(self, task_id: str) -> list[str]:
        """The task's stored successes, oldest first."""
        return list(self._items.get(task_id, ()))

    def sample_if_all_failed(self, task_id: str, successes: Sequence[bool], k: int = 1) -> list[Injection]:
        """Up to k distinct stored successes, sampled at random, when the whole group failed."""
        if k < 1:
            raise ValueError("k must be ≥ 1")
        stored = self.recent(task_id)
        if not _all_failed(successes) or not stored:
            return []
        return [self._use(task_id, t) for t in self._rng.sample(stored, min(k, len(stored)))]


CURRICULUM_BUCKETS = ("0-25", "25-50", "50-75", "75-100")


def curriculum_bucket(success_rate: float) -> str:
    """MAI-UI difficulty level from pass@K success (seed 004 §2.3.3): frontier '0-25', exploration
    '25-50', near-mastery '50-75', exploitation '75-100'. Lower bounds inclusive; 1.0 is '75-100'."""
    if not isinstance(success_rate, int | float) or not 0.0 <= success_rate <= 1.0:
        raise ValueError(f"success rate must be in [0, 1], got {success_rate!r}")
    return CURRICULUM_BUCKETS[min(int(success_rate * 4), 3)]


class PlateauDetector:
    """Entropulse trigger (seed 001 §3.3): reward stagnates while entropy does not recover.

    Feed one (mean reward, mean entropy) per update. Once 2·window points are in, compare the last
    window with the one before: a plateau is reward gain < `reward_min_gain` AND relative entropy
    change ≤ `entropy_max_rel_change` (flat or falling). Call `reset()` when Entropulse starts.
    """

    def __init__(
        self, window: int = 20, reward_min_gain: float = 0.01, entropy_max_rel_change: float = 0.0
    ) -> None:
        if window < 2:
            raise ValueError("window must be ≥ 2")
        self.window = window
        self.reward_min_gain = reward_min_gain
        self.entropy_max_rel_change = entropy_max_rel_change
        self._rewards: deque[float] = deque(maxlen=2 * window)
        self._entropies: deque[float] = deque(maxlen=2 * window)

    def record(self, reward: float, entropy: float) -> bool:
        """Add one update's figures; returns `plateaued` after the addition."""
        if not (math.isfinite(reward) and math.isfinite(entropy)):
            raise ValueError(f"reward and entropy must be finite, got {reward}, {entropy}")
        self._rewards.append(float(reward))
        self._entropies.append(float(entropy))
        return self.plateaued

    @staticmethod
    def _halves(values: deque[float]) -> tuple[float, float]:
        items = list(values)
        half = len(items) // 2
        return sum(items[:half]) / half, sum(items[half:]) / half

    @property
    def plateaued(self) -> bool:
        if len(self._rewards) < 2 * self.window:
            return False
        old_r, new_r = self._halves(self._rewards)
        old_h, new_h = self._halves(self._entropies)
        rel_entropy = (new_h - old_h) / max(abs(old_h), 1e-12)
        return new_r - old_r < self.reward_min_gain and rel_entropy <= self.entropy_max_rel_change

    def reset(self) -> None:
        self._rewards.clear()
        self._entropies.clear()

    def to_dict(self) -> dict[str, Any]:
        return {
            "window": self.window,
            "reward_min_gain": self.reward_min_gain,
            "entropy_max_rel_change": self.entropy_max_rel_change,
            "rewards": list(self._rewards),
            "entropies": list(self._entropies),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        obj = cls(data["window"], data["reward_min_gain"], data["entropy_max_rel_change"])
        for r, h in zip(data["rewards"], data["entropies"], strict=True):
            obj.record(r, h)
        return obj
