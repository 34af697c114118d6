"""Executability check: replay a trajectory's executed actions in a fresh environment of its task's
kind, leased from the fleet, and re-run the verifier. The actions are played as every replay plays
them (workers.envs.replay.play_steps): up to the episode's end or its terminal action, which is sent
as annotation sent it.

The environment is reset with the same task; MiniWoB++ episodes also with the same seed when the
trajectory recorded one (metadata["seed"]). Without a recorded seed the replay runs anyway on a new
episode and the result says so (`seed_recorded: false`): for tasks whose layout depends on the seed
a failed replay then proves little.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

from django.db import transaction

from annotation.review.selectors import step_screen_actions
from webapp.fleet import services as fleet
from webapp.store.models import Step, Trajectory
from webapp.store.taskspec import task_spec_wire
from webapp.timestamps import now_utc
from workers.actions.types import Action
from workers.envs.replay import play_steps

log = logging.getLogger(__name__)

ACQUIRE_WAIT_S = 30.0


def _acquire(kind: str, owner: str, task: str) -> Any:
    """A lease on an idle env of `kind`, waiting up to ACQUIRE_WAIT_S for one to free up."""
    deadline = time.monotonic() + ACQUIRE_WAIT_S
    while True:
        try:
            return fleet.lease_acquire(kind=kind, owner=owner, task=task)
        except fleet.NoEnvironmentAvailable:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.5)


def executability_record(*, trajectory_id: int, result: dict[str, Any]) -> dict[str, Any]:
    """Store a replay's state or result under metadata["executability"] (row locked, so the other
    metadata keys are kept)."""
    with transaction.atomic():
        locked = Trajectory.objects.select_for_update().get(pk=trajectory_id)
        state = {**result, "at": now_utc()}
        locked.metadata = {**locked.metadata, "executability": state}
        locked.save(update_fields=["metadata"])
    return state


def _recorded(steps: list[Step], result: dict[str, Any]) -> Iterator[list[dict[str, Any]]]:
    """Each step's actions in screen pixels, for `play_steps`; `result["replayed_steps"]` counts the
    steps played through, so a replay that fails part-way says how far it got. A step with no
    executable action stops the replay."""
    for step in steps:
        if step.parse_error:
            raise RuntimeError(f"step {step.index} has no executable action ({step.parse_error})")
        yield step_screen_actions(step)
        result["replayed_steps"] += 1


def trajectory_replay(*, trajectory_id: int) -> dict[str, Any]:
    """Run the replay and store `{status, replayed_steps, total_steps, reward, ok, error, seed,
    seed_recorded, at}` under the trajectory's metadata["executability"]. Always ends in a terminal
    status ("done" or "failed"); `ok` is true when every step replayed and the verifier's reward is
    positive."""
    trajectory = Trajectory.objects.select_related("task").get(pk=trajectory_id)
    steps = list(Step.objects.filter(trajectory_id=trajectory_id).order_by("index"))
    seed = trajectory.metadata.get("seed")
    result: dict[str, Any] = {
        "status": "running",
        "replayed_steps": 0,
        "total_steps": len(steps),
        "reward": None,
        "ok": False,
        "error": "",
        "seed": seed,
        "seed_recorded": seed is not None,
    }
    executability_record(trajectory_id=trajectory_id, result=result)
    lease = None
    try:
        lease = _acquire(trajectory.env_kind, f"replay:{trajectory_id}", str(trajectory.task_id))
        # The task as the episode was reset (metadata.episode.task); the stored task's for older ones.
        recorded = (trajectory.metadata.get("episode") or {}).get("task")
        payload: dict[str, Any] = {
            "task": recorded if isinstance(recorded, dict) else task_spec_wire(trajectory.task)
        }
        if seed is not None:
            payload["seed"] = int(seed)
        fleet.env_call(lease=lease, op="reset", payload=payload)

        def step(action: Action) -> bool:
            out = fleet.env_call(lease=lease, op="step", payload={"action": action.to_json()})
            return bool(out.get("done"))

        result["replayed_steps"] = play_steps(step, _recorded(steps, result))
        result["reward"] = float(fleet.env_call(lease=lease, op="evaluate")["reward"])
        result["ok"] = result["replayed_steps"] == len(steps) and result["reward"] > 0
        if result["replayed_steps"] < len(steps):
            result["error"] = (
                f"the episode ended after step {result['replayed_steps'] - 1}; "
                f"{len(steps) - result['replayed_steps']} steps were not replayed"
            )
        result["status"] = "done"
    except (fleet.NoEnvironmentAvailable, fleet.LeaseLost, fleet.EnvCallFailed, RuntimeError) as exc:
        result["status"], result["error"] = "failed", str(exc)
    except Exception as exc:  # any failure must still end the check in a terminal state
        log.exception("replay of trajectory %s failed", trajectory_id)
        result["status"], result["error"] = "failed", f"{type(exc).__name__}: {exc}"
    finally:
        if lease is not None:
            fleet.lease_release(lease_id=lease.lease_id)
    if not result["seed_recorded"]:
        result["note"] = "no seed recorded for this trajectory: replayed on a fresh episode"
    return executability_record(trajectory_id=trajectory_id, result=result)
