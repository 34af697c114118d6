"""Events of an annotation session, pushed to its workspace over Channels."""

from __future__ import annotations

import logging
from typing import Any, TypedDict

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from annotation.models import AnnotationSession

log = logging.getLogger(__name__)


class ObservationEvent(TypedDict):
    type: str  # "annotation.observation"
    session_id: int
    obs_version: int
    screenshot_url: str
    width: int
    height: int
    clock: float
    instruction: str
    steps: int
    reward: float
    env_done: bool


class CandidatesEvent(TypedDict):
    type: str  # "annotation.candidates"
    session_id: int
    obs_version: int
    status: str
    candidates: list[dict[str, Any]]
    error: str
    model_ms: float | None


class StatusEvent(TypedDict):
    type: str  # "annotation.status"
    session_id: int
    status: str
    error: str


class ThinkAloudEvent(TypedDict):
    type: str  # "annotation.thinkaloud"
    session_id: int
    state: dict[str, Any]  # annotation.thinkaloud.selectors.thinkaloud_state


def group(session_id: int) -> str:
    return f"annotation-{session_id}"


def observation_payload(session: AnnotationSession) -> ObservationEvent:
    return {
        "type": "annotation.observation",
        "session_id": session.pk,
        "obs_version": session.obs_version,
        "screenshot_url": session.current_screenshot.url if session.current_screenshot else "",
        "width": session.current_width,
        "height": session.current_height,
        "clock": session.current_clock,
        "instruction": session.current_instruction,
        "steps": session.trajectory.num_steps if session.trajectory_id else 0,
        "reward": session.last_reward,
        "env_done": session.env_done,
    }


def candidates_payload(session: AnnotationSession) -> CandidatesEvent:
    return {
        "type": "annotation.candidates",
        "session_id": session.pk,
        "obs_version": session.candidates_version,
        "status": session.candidates_status,
        "candidates": session.candidates,
        "error": session.candidates_error,
        "model_ms": session.candidates_ms,
    }


def status_payload(session: AnnotationSession) -> StatusEvent:
    return {
        "type": "annotation.status",
        "session_id": session.pk,
        "status": session.status,
        "error": session.error,
    }


def thinkaloud_payload(state: dict[str, Any]) -> ThinkAloudEvent:
    """The think-aloud changed (chunk transcribed, full pass done, a thought edited)."""
    return {"type": "annotation.thinkaloud", "session_id": state["session_id"], "state": state}


def publish(
    session_id: int, payload: ObservationEvent | CandidatesEvent | StatusEvent | ThinkAloudEvent
) -> None:
    """Best effort: the session row is the record; a page that missed an event reloads the state."""
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        async_to_sync(layer.group_send)(group(session_id), dict(payload))
    except Exception:
        log.warning("could not publish %s for annotation session %s", payload["type"], session_id)
