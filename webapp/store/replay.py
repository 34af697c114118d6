"""The replay check: does a stored trajectory re-create its episode? Its task (as the episode ran it)
and seed in a fresh environment, its stored actions in screen pixels, the task's evaluator — the
reward must equal the stored final reward (workers.envs.replay)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from webapp.store.export.archive import screen_actions
from webapp.store.models import Trajectory, TrajectoryStatus
from webapp.store.taskspec import task_spec_wire
from workers.envs.base import EnvError
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


def replay_inputs(trajectory: Trajectory) -> tuple[dict[str, Any], int, list[list[dict[str, Any]]]] | str:
    """(task on the wire, seed, per-step screen actions) of a trajectory, or why it has none."""
    meta = trajectory.metadata or {}
    seed = meta.get("seed")
    if seed is None:
        return "no seed recorded"
    task = (meta.get("episode") or {}).get("task") or task_spec_wire(trajectory.task)
    return task, int(seed), replay_steps(trajectory)


def replay_steps(trajectory: Trajectory) -> list[list[dict[str, Any]]]:
    """A trajectory's stored actions, per step, in screen pixels (Action JSON)."""
    return [
        screen_actions(s.action or [], s.coord_convention, s.screen_width, s.screen_height,
                       s.model_image_width, s.model_image_height)
        for s in trajectory.steps.order_by("index")
    ]  # fmt: skip


def trajectory_replay_check(*, trajectory: Trajectory) -> ReplayResult:
    """Replay one completed trajectory and compare rewards (the environment's, before any judge)."""
    if trajectory.status != TrajectoryStatus.COMPLETED or trajectory.final_reward is None:
        return ReplayResult(trajectory.pk, "skipped", reason=f"not completed ({trajectory.status})")
    engine = (trajectory.metadata or {}).get("engine") or {}
    if engine.get("judge"):
        return ReplayResult(trajectory.pk, "skipped", reason="its reward is a judge's verdict")
    inputs = replay_inputs(trajectory)
    if isinstance(inputs, str):
        return ReplayResult(trajectory.pk, "skipped", stored=trajectory.final_reward, reason=inputs)
    task, seed, steps = inputs
    try:
        replayed = replay_episode(task, seed, steps)
    except EnvError as exc:  # a stored action the fresh environment refuses: the episode is not re-created
        return ReplayResult(
            trajectory.pk, "differs", trajectory.final_reward, None, f"replay refused: {exc}"[:300]
        )
    same = abs(replayed - float(trajectory.final_reward)) < 1e-6
    return ReplayResult(trajectory.pk, "same" if same else "differs", trajectory.final_reward, replayed)
