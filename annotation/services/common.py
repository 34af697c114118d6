"""Helpers shared by the annotation services: the session's lease, clock, observations, events,
status and abandonment (also what the reaper task runs: below the services that enqueue tasks)."""

from __future__ import annotations

import base64
import time
import uuid
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import transaction
from django.utils import timezone

from annotation import events
from annotation.models import AnnotationSession, SessionStatus
from webapp.fleet import services as fleet
from webapp.store import services as store
from workers.envs.leases import Lease


class SessionConflict(RuntimeError):
    """The session is not in a state that allows this (e.g. deciding on a submitted session, or on
    an observation that is no longer current)."""


def session_owned_active(session_id: int, user: Any) -> AnnotationSession:
    """The session (read, not locked) if it is `user`'s and active; else SessionConflict."""
    session = AnnotationSession.objects.select_related("trajectory", "task").get(pk=session_id)
    _check_owned_active(session, user.pk)
    return session


def _check_owned_active(session: AnnotationSession, user_id: int) -> None:
    if session.user_id != user_id:
        raise SessionConflict("this session belongs to another annotator")
    if session.status != SessionStatus.ACTIVE:
        raise SessionConflict(f"session {session.pk} is {session.status}")


class ClaimLapsed(SessionConflict):
    """The claim was won from one that lapsed: the call that held it may have changed the
    environment without storing what it did (its process died, its store failed). `token` is the
    claim, now held by the caller."""

    def __init__(self, token: str) -> None:
        super().__init__("the session's previous claim lapsed before its result was stored")
        self.token = token


def session_claim(
    *, session: AnnotationSession, obs_version: int | None = None, lapsed_ok: bool = True
) -> str:
    """Claim the session for one call to its environment: a conditional UPDATE (autocommit) that
    exactly one caller wins while the session is active, unclaimed (or its claim lapsed after
    ANNOTATION_CLAIM_TTL_S) and, when given, still on `obs_version`. Returns the claim token;
    SessionConflict when another decision holds it or the screen changed. With `lapsed_ok` False,
    a claim won from a lapsed one raises ClaimLapsed (holding the new token) instead."""
    token = uuid.uuid4().hex
    lapsed = timezone.now() - timedelta(seconds=settings.ANNOTATION_CLAIM_TTL_S)
    rows = AnnotationSession.objects.filter(
        pk=session.pk, user_id=session.user_id, status=SessionStatus.ACTIVE
    )
    if obs_version is not None:
        rows = rows.filter(obs_version=obs_version)
    if rows.filter(decision_claim="").update(decision_claim=token, decision_claimed_at=timezone.now()) == 1:
        return token
    if (
        rows.filter(decision_claimed_at__lt=lapsed).update(
            decision_claim=token, decision_claimed_at=timezone.now()
        )
        != 1
    ):
        raise SessionConflict(
            "another decision on this session is executing, or the screen changed; reload and decide again"
        )
    if not lapsed_ok:
        raise ClaimLapsed(token)
    return token


def session_claim_release(*, session_id: int, token: str) -> None:
    """Give a claim back (the call failed and nothing is stored); a lapsed, re-taken claim stays."""
    AnnotationSession.objects.filter(pk=session_id, decision_claim=token).update(
        decision_claim="", decision_claimed_at=None
    )


def session_fenced(*, session_id: int, user_id: int, token: str) -> AnnotationSession:
    """In the caller's (short) transaction: the session locked, still active, still `user_id`'s and
    the claim `token` still held; otherwise SessionConflict and the caller stores nothing. The claim
    is cleared on the returned object (saved with it)."""
    session = (
        AnnotationSession.objects.select_for_update(of=("self",))
        .select_related("trajectory", "task")
        .get(pk=session_id)
    )
    if session.decision_claim != token:
        raise SessionConflict(
            "the session was claimed by another request while the environment ran; its result was discarded"
        )
    try:
        _check_owned_active(session, user_id)
    except SessionConflict as exc:
        raise SessionConflict(f"{exc}; the environment's result was discarded") from exc
    session.decision_claim, session.decision_claimed_at = "", None
    return session


def session_lease(session: AnnotationSession) -> Lease:
    return Lease(
        lease_id=session.lease_id,
        env_id=session.lease_env,
        worker=session.lease_worker,
        kind=session.task.env_kind,
        owner=f"annotation:{session.pk}",
        task=str(session.task_id),
    )


def session_clock(session: AnnotationSession) -> float:
    """Seconds since the session started (the clock steps and think-aloud audio share)."""
    return round(time.time() - session.clock_origin, 4)


def _screenshot_save(session: AnnotationSession, wire_obs: dict[str, Any]) -> str:
    data = base64.b64decode(wire_obs["screenshot"])
    ext = "png" if wire_obs.get("image_format") == "png" else "jpg"
    return default_storage.save(
        f"annotation/s{session.pk}/{session.obs_version + 1:05d}-{uuid.uuid4().hex[:6]}.{ext}",
        ContentFile(data),
    )


# The fields a new current screen sets (final_observation_store saves only these).
_SCREEN_FIELDS = ["obs_version", "current_screenshot", "current_width", "current_height", "current_clock"]


def _screen_apply(session: AnnotationSession, wire_obs: dict[str, Any]) -> None:
    """The screenshot to storage first, then the session's screen fields (version + 1), unsaved."""
    name = _screenshot_save(session, wire_obs)
    session.obs_version += 1
    session.current_screenshot = name
    session.current_width = int(wire_obs["width"])
    session.current_height = int(wire_obs["height"])
    session.current_clock = session_clock(session)


def observation_store(*, session: AnnotationSession, wire_obs: dict[str, Any]) -> AnnotationSession:
    """Make a new observation current: screenshot to storage first, then the row (version + 1)."""
    _screen_apply(session, wire_obs)
    session.current_instruction = wire_obs.get("instruction") or session.task.instruction
    session.current_elements = wire_obs.get("elements") or []
    session.current_dom_text = wire_obs.get("dom_text") or ""
    session.candidates = []
    session.candidates_status = "pending"
    session.candidates_error = ""
    session.save()
    return session


def final_observation_store(*, session: AnnotationSession, wire_obs: dict[str, Any]) -> AnnotationSession:
    """The screen captured at Finish becomes the session's last one (what the page shows after it,
    and the trajectory's final screenshot); no candidates are asked for it."""
    _screen_apply(session, wire_obs)
    session.save(update_fields=_SCREEN_FIELDS)
    return session


def publish_observation(session: AnnotationSession) -> None:
    payload = events.observation_payload(session)
    transaction.on_commit(lambda: events.publish(session.pk, payload))


def release_lease(session: AnnotationSession) -> None:
    fleet.vnc_tokens_revoke(session_key=f"annotation:{session.pk}")
    if session.lease_id:
        fleet.lease_release(lease_id=session.lease_id)


def session_set_status(session: AnnotationSession, status: str, error: str = "") -> None:
    session.status = status
    session.error = error
    session.save(update_fields=["status", "error", "updated_at"])
    payload = events.status_payload(session)
    transaction.on_commit(lambda: events.publish(session.pk, payload))


def session_abandon(*, session: AnnotationSession, reason: str) -> AnnotationSession:
    """Stop a session without submitting; the partial trajectory is kept and marked."""
    if session.status not in (SessionStatus.ACTIVE, SessionStatus.CREATED):
        return session
    with transaction.atomic():
        trajectory = session.trajectory
        if trajectory is not None:
            store.trajectory_finish(
                trajectory=trajectory, status="abandoned", final_reward=None,
                final_screenshot_name=session.current_screenshot.name if trajectory.num_steps else "",
            )  # fmt: skip
            trajectory.metadata = {**trajectory.metadata, "abandoned_reason": reason}
            trajectory.save(update_fields=["metadata"])
        session_set_status(session, SessionStatus.ABANDONED, reason)
    release_lease(session)
    return session


def session_reap_abandoned() -> int:
    """Mark active sessions whose lease is gone (heartbeat stopped → reaper reclaimed it)."""
    count = 0
    registry = fleet.registry()
    for session in AnnotationSession.objects.filter(status=SessionStatus.ACTIVE).exclude(lease_id=""):
        # Read the lease without renewing it: renewing here would keep abandoned leases alive.
        state = registry.lease(session.lease_id).get("state", "gone")
        if state != "active":
            session_abandon(session=session, reason=f"the environment lease is {state} (no heartbeat)")
            count += 1
    return count
