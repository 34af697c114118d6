"""Ending a take-over: what the annotator did by hand on the live desktop becomes steps.

While the annotator drives the desktop over a read-write VNC token, the proxy publishes every
forwarded pointer and key event to the session's stream (workers/envs/vnc/takeover.py). When they
hand control back, `takeover_end` folds those events into canonical actions (click, drag, scroll,
type, hotkey), appends one step per action with decision "takeover" (stored in the model
profile's coordinate convention, like every other step), consumes the events, then observes the
desktop and asks the model for new candidates.

Screens: `takeover_start` makes the desktop record its frames in the background (env op `frames`);
each step gets the last frame captured before its action began. Environments without a frame
recorder (or a recorder that has no frame that early) fall back to the screen the take-over started
from, and the step says so in `decision_meta["screenshot"]`.

Clocks: events carry `time.monotonic()` of the proxy's host, converted to the session clock by
their age at the moment the take-over ends (the proxy and the web process share a host with
`make up`; across hosts the step times are as accurate as the hosts' clock rates agree).
"""

from __future__ import annotations

import base64
import logging
import time
from typing import Any

from django.conf import settings
from django.db import transaction

from annotation.models import AnnotationSession
from annotation.services.candidates import candidates_request
from annotation.services.common import (
    SessionConflict,
    observation_store,
    publish_observation,
    session_claim,
    session_claim_release,
    session_clock,
    session_fenced,
    session_lease,
    session_owned_active,
)
from webapp.fleet import services as fleet
from webapp.store import services as store
from workers.actions.coords import action_from_screen
from workers.actions.serialize import format_response
from workers.envs.vnc.takeover import STREAM_PREFIX, RecordedAction, TakeoverFolder, read_events
from workers.policy.profiles import profile_named

log = logging.getLogger(__name__)


def _stream_id(session: AnnotationSession) -> str:
    return f"annotation:{session.pk}"


def takeover_actions(session: AnnotationSession) -> tuple[list[RecordedAction], list[str]]:
    """The actions recorded since the last take-over ended, and the stream ids they came from."""
    redis = fleet.registry().r
    folder = TakeoverFolder()
    actions: list[RecordedAction] = []
    ids: list[str] = []
    after = "0-0"
    while True:
        batch = read_events(redis, _stream_id(session), after=after)
        if not batch:
            break
        for entry_id, timed in batch:
            ids.append(entry_id)
            actions.extend(folder.feed(timed))
        after = batch[-1][0]
    actions.extend(folder.flush())
    # A double click replaces the click it started with.
    folded: list[RecordedAction] = []
    for action in actions:
        if action.merges_previous and folded:
            folded.pop()
        folded.append(action)
    return folded, ids


def takeover_start(*, session_id: int, user: Any) -> dict[str, Any]:
    """The annotator takes the controls: input recorded from now on (stale input is dropped) and,
    where the environment can, its screen recorded so every step gets the screen it acted on.
    Nothing is written to the database: no transaction around the environment call."""
    session = session_owned_active(session_id, user)
    redis = fleet.registry().r
    redis.delete(STREAM_PREFIX + _stream_id(session))
    try:
        out = fleet.env_call(
            lease=session_lease(session), op="frames", payload={"cmd": "start"},
            timeout_s=settings.ANNOTATION_ENV_TIMEOUT_S,
        )  # fmt: skip
        frames = bool(out.get("frames"))
    except fleet.EnvCallFailed as exc:
        log.info("session %s: no take-over frames (%s)", session.pk, exc)
        frames = False
    except fleet.LeaseLost as exc:
        raise SessionConflict(f"the environment is gone: {exc}") from exc
    return {"recording_frames": frames}


def _frames_before(session: AnnotationSession, times: list[float]) -> list[bytes | None]:
    if not times:
        return []
    lease, timeout_s = session_lease(session), settings.ANNOTATION_ENV_TIMEOUT_S
    try:
        out = fleet.env_call(
            lease=lease, op="frames", payload={"cmd": "before", "times": times}, timeout_s=timeout_s
        )
        fleet.env_call(lease=lease, op="frames", payload={"cmd": "stop"}, timeout_s=timeout_s)
    except (fleet.EnvCallFailed, fleet.LeaseLost) as exc:
        log.info("session %s: no take-over frames (%s)", session.pk, exc)
        return [None] * len(times)
    return [base64.b64decode(f) if f else None for f in out.get("frames") or [None] * len(times)]


def _observe(session: AnnotationSession) -> dict[str, Any]:
    try:
        out = fleet.env_call(
            lease=session_lease(session), op="observe", timeout_s=settings.ANNOTATION_ENV_TIMEOUT_S
        )
    except (fleet.LeaseLost, fleet.EnvCallFailed) as exc:
        raise SessionConflict(f"the environment did not answer after the take-over: {exc}") from exc
    return dict(out["observation"])


def takeover_end(*, session_id: int, user: Any, thought: str = "") -> dict[str, Any]:
    """Store the take-over's actions as steps and refresh the observation. Returns
    {"steps": [indices], "actions": n}. With no recorded input it only refreshes the screen.

    Claim, call, store (STYLE 16): the session is claimed, the environment asked for the frames and
    the screen with nothing held, then steps and observation stored in one short transaction behind
    the fence (SessionConflict, nothing stored, if the session changed hands or state meanwhile)."""
    session = session_owned_active(session_id, user)
    token = session_claim(session=session)
    try:
        recorded, ids = takeover_actions(session)
        screens = _frames_before(session, [rec.t_start - 0.001 for rec in recorded])
        wire_obs = _observe(session)
    except BaseException:
        session_claim_release(session_id=session_id, token=token)
        raise
    with transaction.atomic():
        session = session_fenced(session_id=session_id, user_id=user.pk, token=token)
        indices = _store_steps(session, recorded, screens, thought)
        observation_store(session=session, wire_obs=wire_obs)
        publish_observation(session)
        candidates_request(session=session)
    if ids:
        fleet.registry().r.xdel(STREAM_PREFIX + _stream_id(session), *ids)
    return {"steps": indices, "actions": len(recorded)}


def _store_steps(
    session: AnnotationSession, recorded: list[RecordedAction], screens: list[bytes | None], thought: str
) -> list[int]:
    """One step per recorded action, in the model profile's convention (caller's transaction)."""
    convention = profile_named(session.policy_profile).convention
    w, h = session.current_width, session.current_height
    now_mono, now_clock = time.monotonic(), session_clock(session)
    indices: list[int] = []
    for n, rec in enumerate(recorded):
        model_action = action_from_screen(rec.action, convention, w, h).action
        response = format_response(thought if n == 0 else "", [model_action])
        screen = screens[n] if n < len(screens) else None
        step = store.step_append(
            trajectory=session.trajectory,
            screenshot=screen,
            image_format="jpeg",
            screenshot_name="" if screen else session.current_screenshot.name,
            fields={
                "clock_start": max(0.0, round(now_clock - (now_mono - rec.t_start), 4)),
                "clock_end": max(0.0, round(now_clock - (now_mono - rec.t_end), 4)),
                "raw_text": response,
                "thought": thought if n == 0 else "",
                "action_text": response.split("Action:", 1)[1].strip(),
                "action": [model_action.to_json()],
                "coord_convention": str(convention),
                "screen_width": w,
                "screen_height": h,
                "executed_points": [
                    [p.x, p.y] for p in (rec.action.point, rec.action.end_point) if p is not None
                ],
                "candidates": [],
                "decision": "takeover",
                "decision_index": None,
                "decision_meta": {
                    "kind": "takeover",
                    "obs_version": session.obs_version,
                    "model_version": session.policy_model,
                    "count": rec.count,
                    "screenshot": "before the action"
                    if screen
                    else ("take-over start" if n == 0 else "take-over start (no frame recorded)"),
                },
                "policy_version": session.policy_model,
                "reward": 0.0,
                "done": False,
            },
        )
        indices.append(step.index)
    return indices
