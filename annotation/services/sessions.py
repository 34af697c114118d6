"""Annotation session lifecycle: start (lease + reset + first candidates), heartbeat, submit,
abandon, and reaping sessions whose lease expired."""

from __future__ import annotations

import logging
import secrets
import time
from typing import Any

from django.conf import settings
from django.db import transaction

from annotation.models import AnnotationSession, Assignment, AssignmentStatus, SessionStatus
from annotation.services.candidates import candidates_request
from annotation.services.common import (
    SessionConflict,
    final_observation_store,
    observation_store,
    publish_observation,
    release_lease,
    session_abandon,
    session_lease,
    session_set_status,
)
from webapp.fleet import services as fleet
from webapp.store import services as store
from webapp.store.models import Checkpoint, Task
from webapp.store.taskspec import task_spec_wire

log = logging.getLogger(__name__)


def log_text(value: object, limit: int = 200) -> str:
    """`value` for a log line: at most `limit` characters, control characters and quotes escaped
    (one line whatever the text; a task cannot forge log lines or terminal escapes)."""
    text = str(value)
    return repr(text[:limit] + ("…" if len(text) > limit else ""))


__all__ = ["SessionConflict"]


def annotation_policy() -> dict[str, Any]:
    """Which model proposes to annotators: the promoted annotation checkpoint (served by the
    embedded policy server, or vLLM at the same URL), else the configured default model."""
    checkpoint = Checkpoint.objects.filter(is_annotation_model=True).first()
    if checkpoint is None:
        return {"base_url": settings.POLICY_BASE_URL, "model": settings.POLICY_MODEL,
                "profile": settings.POLICY_PROFILE, "checkpoint": None}  # fmt: skip
    return {
        "base_url": checkpoint.endpoint_url or settings.POLICY_BASE_URL,
        "model": checkpoint.version,
        "profile": checkpoint.profile,
        "checkpoint": checkpoint,
    }


def session_start(*, user: Any, task: Task, track: str = "expert") -> AnnotationSession:
    """Lease an environment for `task`, reset it, make its first observation current and ask the
    model for candidates. Raises fleet.NoEnvironmentAvailable when no env is free (nothing kept)."""
    if not task.enabled or not task.supported:
        raise SessionConflict(f"task {task.external_id} is disabled or not supported here")
    # Every episode gets a recorded seed, so review can replay it on the very same layout.
    seed = secrets.randbelow(2**31)
    session = session_open(user=user, task=task, track=track, metadata={"track": track, "seed": seed})
    out = session_reset(session=session, seed=seed)
    with transaction.atomic():
        session_activate(session=session, wire_obs=out["observation"])
        Assignment.objects.filter(user=user, task=task).update(status=AssignmentStatus.IN_PROGRESS)
    return session


def session_open(*, user: Any, task: Task, track: str, metadata: dict[str, Any]) -> AnnotationSession:
    """A new session and its (running) trajectory, with the annotation model of the moment."""
    policy = annotation_policy()
    with transaction.atomic():
        trajectory = store.trajectory_create(
            task=task, source="annotation", annotator=user, checkpoint=policy["checkpoint"],
            policy_version=policy["model"], metadata=metadata,
        )  # fmt: skip
        return AnnotationSession.objects.create(
            user=user, task=task, trajectory=trajectory, track=track, clock_origin=time.time(),
            policy_base_url=policy["base_url"], policy_model=policy["model"],
            policy_profile=policy["profile"], candidates_n=task.pool.candidates_n,
        )  # fmt: skip


def session_reset(*, session: AnnotationSession, seed: int) -> dict[str, Any]:
    """Lease an environment for the session and reset it for its task with `seed`; returns the env's
    answer ({"observation": wire obs, "env": ...}). What re-creates the episode (the task as reset,
    the seed, the env's kind, version and start state) and its instruction (MiniWoB++ generates one
    per episode) are stored on the trajectory. No free environment: session and trajectory are deleted
    and NoEnvironmentAvailable raised; the env failing to start closes both as crashed/abandoned."""
    task, trajectory = session.task, session.trajectory
    try:
        lease = fleet.lease_acquire(kind=task.env_kind, owner=f"annotation:{session.pk}", task=str(task.pk))
    except fleet.NoEnvironmentAvailable:
        trajectory.delete()
        session.delete()
        raise
    session.lease_id, session.lease_env, session.lease_worker = lease.lease_id, lease.env_id, lease.worker
    session.save(update_fields=["lease_id", "lease_env", "lease_worker"])
    wire = task_spec_wire(task, for_human=True)
    try:
        out = fleet.env_call(lease=lease, op="reset", payload={"task": wire, "seed": seed})
    except Exception as exc:
        fleet.lease_release(lease_id=lease.lease_id)
        store.trajectory_finish(trajectory=trajectory, status="crashed", final_reward=None)
        session_set_status(
            session, SessionStatus.ABANDONED, f"the environment could not start the task: {exc}"
        )
        raise
    store.trajectory_record_episode(trajectory=trajectory, task_spec=wire, seed=seed, env=out.get("env"))
    store.trajectory_set_instruction(
        trajectory=trajectory, instruction=str(out["observation"].get("instruction") or "")
    )
    return out


def session_activate(*, session: AnnotationSession, wire_obs: dict[str, Any]) -> None:
    """Make `wire_obs` the session's current observation, mark it active and ask for candidates."""
    observation_store(session=session, wire_obs=wire_obs)
    session.status = SessionStatus.ACTIVE
    session.save(update_fields=["status"])
    publish_observation(session)
    candidates_request(session=session)


def session_heartbeat(*, session: AnnotationSession) -> str:
    """Keep the lease alive while the workspace is open; returns the lease state."""
    if session.status != SessionStatus.ACTIVE or not session.lease_id:
        return "inactive"
    state = fleet.lease_renew(lease_id=session.lease_id)
    if state != "active":
        session_abandon(session=session, reason=f"the environment lease is {state}")
    return state


def session_submit(*, session: AnnotationSession) -> AnnotationSession:
    """Finish the episode: verify, close the trajectory, release the env, queue it for review."""
    if session.status != SessionStatus.ACTIVE:
        raise SessionConflict(f"session {session.pk} is {session.status}, not active")
    reward: float | None = None
    try:
        # The screen as it is at Finish (a take-over or a slow program may have changed it since the
        # last observation): the page shows it and it is the trajectory's final screenshot.
        final = fleet.env_call(lease=session_lease(session), op="observe")["observation"]
        final_observation_store(session=session, wire_obs=final)
        publish_observation(session)
    except (fleet.LeaseLost, fleet.EnvCallFailed, KeyError, ValueError) as exc:
        log.info(
            "session %s: no final screen at submit (%s); the last one is kept", session.pk, log_text(exc)
        )
    verifier_error = ""
    try:
        reward = float(fleet.env_call(lease=session_lease(session), op="evaluate")["reward"])
    except (fleet.LeaseLost, fleet.EnvCallFailed) as exc:
        # The message can carry text the task controls (an evaluator's output): stored with the
        # trajectory for its reviewers, logged only as one short escaped line.
        verifier_error = str(exc)[:2000]
        log.info("session %s: verifier unavailable at submit: %s", session.pk, log_text(exc))
    with transaction.atomic():
        trajectory = session.trajectory
        if verifier_error:
            trajectory.metadata = {**trajectory.metadata, "verifier_error": verifier_error}
            trajectory.save(update_fields=["metadata"])
        store.trajectory_finish(
            trajectory=trajectory, status="completed", final_reward=reward,
            final_screenshot_name=session.current_screenshot.name if trajectory.num_steps else "",
        )  # fmt: skip
        trajectory.review_state = "pending"
        trajectory.save(update_fields=["review_state"])
        branch_of = trajectory.metadata.get("branch_of")
        if branch_of is not None:  # a fix that re-executed a changed action replaces the original
            from annotation.services.fixes import fix_supersede

            fix_supersede(trajectory_id=int(branch_of), branch_id=trajectory.pk)
        Assignment.objects.filter(user=session.user, task=session.task).update(status=AssignmentStatus.DONE)
        session_set_status(session, SessionStatus.SUBMITTED)
    release_lease(session)
    return session
