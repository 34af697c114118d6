"""The replay check: does a stored or exported trajectory re-create its episode? Its task (as the
episode ran it) and seed in a fresh environment started as the episode's was (its recorded screen
size), its stored actions in screen pixels, the task's evaluator — the reward must equal the stored
final reward (workers.envs.replay). Components whose version or start state changed since are named.

It reads trajectories in the shape the exports write them (webapp.store.export.records: the native
JSONL's lines), so a stored trajectory and an exported line are checked by the same code."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from webapp.store.export.records import iter_trajectory_records
from webapp.store.models import Task, Trajectory, TrajectoryStatus
from webapp.store.taskspec import task_spec_wire
from workers.actions.coords import screen_actions
from workers.envs.base import EnvError
from workers.envs.episode import env_differences
from workers.envs.replay import replay_episode


@dataclass
class ReplayResult:
    trajectory: int
    verdict: str  # "same", "differs", "skipped"
    stored: float | None = None
    replayed: float | None = None
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ReplayInputs:
    task: dict[str, Any]  # on the wire, as the episode was reset
    seed: int
    steps: list[list[dict[str, Any]]]  # per step, its actions in screen pixels
    env: dict[str, Any] | None  # the recorded {kind, version, start} (None: recorded before it was kept)


TaskLookup = Callable[[Any], dict[str, Any] | None]


def stored_task(task_id: Any) -> dict[str, Any] | None:
    """The task on the wire as it is stored now (for trajectories recorded before the episode's own
    task was kept), or None when there is no such task."""
    task = (
        Task.objects.select_related("pool").filter(pk=task_id).first() if isinstance(task_id, int) else None
    )
    return task_spec_wire(task) if task is not None else None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def replay_inputs(record: dict[str, Any], task_lookup: TaskLookup = stored_task) -> ReplayInputs | str:
    """What re-creates a trajectory record's episode, or why it has not got it."""
    meta = _dict(record.get("metadata"))
    seed = meta.get("seed")
    if isinstance(seed, bool) or not isinstance(seed, int):
        return "no seed recorded"
    episode = _dict(meta.get("episode"))
    task = _dict(episode.get("task")) or task_lookup(record.get("task_id"))
    if not task or not task.get("kind"):
        return "no task recorded"
    try:
        steps = [
            screen_actions(s.get("action") or [], s.get("coord_convention"), s.get("screen_width"),
                           s.get("screen_height"), s.get("model_image_width"), s.get("model_image_height"))
            for s in sorted(record.get("steps") or [], key=lambda s: s.get("index", 0))
        ]  # fmt: skip
    except (KeyError, TypeError, ValueError) as exc:
        return f"unreadable step actions: {exc}"[:300]
    env = episode.get("env")
    return ReplayInputs(task, seed, steps, env if isinstance(env, dict) else None)


def record_replay_check(record: dict[str, Any], task_lookup: TaskLookup = stored_task) -> ReplayResult:
    """Replay one trajectory record (a native JSONL line) and compare rewards (the environment's,
    before any judge)."""
    pk, stored = record.get("id"), record.get("final_reward")
    pk = pk if isinstance(pk, int) else -1
    if record.get("status") != TrajectoryStatus.COMPLETED or not isinstance(stored, (int, float)):
        return ReplayResult(pk, "skipped", reason=f"not completed ({record.get('status')})")
    if _dict(_dict(record.get("metadata")).get("engine")).get("judge"):
        return ReplayResult(pk, "skipped", reason="its reward is a judge's verdict")
    inputs = replay_inputs(record, task_lookup)
    if isinstance(inputs, str):
        return ReplayResult(pk, "skipped", stored=float(stored), reason=inputs)
    start = _dict((inputs.env or {}).get("start")) or None
    try:
        replayed = replay_episode(inputs.task, inputs.seed, inputs.steps, start)
    except (EnvError, KeyError, TypeError, ValueError) as exc:  # an action the fresh env refuses
        return ReplayResult(pk, "differs", float(stored), None, f"replay refused: {exc}"[:300])
    # Said with every verdict: a differing reward with a changed component points at the component.
    changed = env_differences(inputs.env, replayed.env)
    reason = f"environment changed since the episode: {'; '.join(changed)}"[:300] if changed else ""
    same = abs(replayed.reward - float(stored)) < 1e-6
    return ReplayResult(pk, "same" if same else "differs", float(stored), replayed.reward, reason)


def replay_steps(trajectory: Trajectory) -> list[list[dict[str, Any]]]:
    """A trajectory's stored actions, per step, in screen pixels (Action JSON)."""
    return [
        screen_actions(s.action or [], s.coord_convention, s.screen_width, s.screen_height,
                       s.model_image_width, s.model_image_height)
        for s in trajectory.steps.order_by("index")
    ]  # fmt: skip


def trajectory_replay_check(*, trajectory: Trajectory) -> ReplayResult:
    """Replay one stored trajectory, read as the exports read it."""
    records = iter_trajectory_records(
        Trajectory.objects.filter(pk=trajectory.pk), media_ref=lambda name: name
    )
    return record_replay_check(next(records))
