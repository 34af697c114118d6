"""Helpers shared by the annotation services: the session's lease, clock, observations, events."""

from __future__ import annotations

import base64
import time
import uuid
from typing import Any

from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import transaction

from annotation import events
from annotation.models import AnnotationSession
from webapp.fleet import services as fleet
from workers.envs.leases import Lease


class SessionConflict(RuntimeError):
    """The session is not in a state that allows this (e.g. deciding on a submitted session, or on
    an observation that is no longer current)."""


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


def observation_store(*, session: AnnotationSession, wire_obs: dict[str, Any]) -> AnnotationSession:
    """Make a new observation current: screenshot to storage first, then the row (version + 1)."""
    name = _screenshot_save(session, wire_obs)
    session.obs_version += 1
    session.current_screenshot = name
    session.current_width = int(wire_obs["width"])
    session.current_height = int(wire_obs["height"])
    session.current_clock = session_clock(session)
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
    name = _screenshot_save(session, wire_obs)
    session.obs_version += 1
    session.current_screenshot = name
    session.current_width = int(wire_obs["width"])
    session.current_height = int(wire_obs["height"])
    session.current_clock = session_clock(session)
    session.save(
        update_fields=[
            "obs_version",
            "current_screenshot",
            "current_width",
            "current_height",
            "current_clock",
        ]
    )
    return session


def publish_observation(session: AnnotationSession) -> None:
    payload = events.observation_payload(session)
    transaction.on_commit(lambda: events.publish(session.pk, payload))


def release_lease(session: AnnotationSession) -> None:
    fleet.vnc_tokens_revoke(session_key=f"annotation:{session.pk}")
    if session.lease_id:
        fleet.lease_release(lease_id=session.lease_id)
