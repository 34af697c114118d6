"""Applying an annotator's decision: accept candidate k, edit it, override it, finish, mark the task
infeasible, or call the user. The action executes at once; the step stores everything about the
decision (chosen index, rejected candidates, edit diff, model version, time taken)."""

from __future__ import annotations

import difflib
import logging
import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import InterfaceError, OperationalError, connection, transaction

from annotation.models import AnnotationSession
from annotation.services.candidates import candidates_request
from annotation.services.common import (
    ClaimLapsed,
    SessionConflict,
    observation_store,
    publish_observation,
    session_abandon,
    session_claim,
    session_claim_release,
    session_clock,
    session_fenced,
    session_lease,
    session_owned_active,
)
from annotation.services.sessions import session_submit
from webapp.fleet import services as fleet
from webapp.store import services as store
from workers.actions.coords import OffScreen, action_from_screen, actions_on_screen
from workers.actions.parse import parse_response
from workers.actions.serialize import format_response
from workers.actions.types import TERMINAL_KINDS, Action, Convention
from workers.policy.profiles import profile_named

log = logging.getLogger(__name__)

DECISION_KINDS = ("accept", "edit", "override", "finish", "infeasible", "call_user")


class DecisionInvalid(ValueError):
    """The decision cannot be applied as given (bad index, unparseable action, ...); nothing ran."""


@dataclass(frozen=True)
class _Chosen:
    thought: str
    actions: tuple[Action, ...]
    convention: Convention
    model_size: tuple[int, int] | None
    decision: str
    index: int | None
    meta: dict[str, Any]


def _candidate(session: AnnotationSession, index: int | None) -> dict[str, Any]:
    if session.candidates_status != "ready" or session.candidates_version != session.obs_version:
        raise DecisionInvalid("the model's candidates for this state are not ready; override instead")
    if index is None or not 0 <= index < len(session.candidates):
        raise DecisionInvalid(f"candidate index must be in 0..{len(session.candidates) - 1}")
    return session.candidates[index]


def _parse(text: str, convention: Convention) -> tuple[Action, ...]:
    parsed = parse_response(text if "Action:" in text else f"Action: {text}", convention=convention)
    if parsed.error is not None:
        raise DecisionInvalid(f"the action does not parse: {parsed.error.message}")
    if not parsed.actions:
        raise DecisionInvalid("no action given")
    return parsed.actions


def _choose(session: AnnotationSession, kind: str, data: dict[str, Any]) -> _Chosen:
    thought = str(data.get("thought") or "").strip()
    if kind == "accept":
        cand = _candidate(session, data.get("index"))
        if cand["parse_error"]:
            raise DecisionInvalid(
                f"candidate {cand['index']} does not parse ({cand['parse_error']}); edit it"
            )
        actions = tuple(Action.from_json(a) for a in cand["actions"])
        size = tuple(cand["image_size"]) if cand["image_size"] else None
        return _Chosen(
            cand["thought"], actions, Convention(cand["convention"]), size, "accepted", cand["index"], {}
        )
    if kind == "edit":
        cand = _candidate(session, data.get("index"))
        action_text = str(data.get("action_text") or "")
        convention = Convention(cand["convention"])
        diff = "\n".join(
            difflib.unified_diff(
                f"Thought: {cand['thought']}\nAction: {cand['action_text']}".splitlines(),
                f"Thought: {thought}\nAction: {action_text}".splitlines(),
                "candidate", "edited", lineterm="",
            )
        )  # fmt: skip
        size = tuple(cand["image_size"]) if cand["image_size"] else None
        return _Chosen(
            thought,
            _parse(action_text, convention),
            convention,
            size,
            "edited",
            cand["index"],
            {"edit_diff": diff},
        )
    if kind == "override":
        convention = Convention(data.get("convention") or "screen")
        return _Chosen(
            thought,
            _parse(str(data.get("action_text") or ""), convention),
            convention,
            None,
            "overridden",
            None,
            {},
        )
    answer = str(data.get("answer") or "")
    # As OSWorld scores them: finish is DONE; infeasible and call_user give the task up (FAIL:
    # UI-TARS's call_user, which OSWorld's UI-TARS agent sends as FAIL), 1 on an infeasible task
    # and 0 on any other. The step's decision_meta.outcome keeps which of the two it was.
    terminal = {
        "finish": Action(kind="finished", text=answer),
        "infeasible": Action(kind="call_user"),
        "call_user": Action(kind="call_user", text=answer or None),
    }[kind]
    return _Chosen(thought, (terminal,), Convention.SCREEN, None, "overridden", None, {"outcome": kind})


def _to_screen(chosen: _Chosen, session: AnnotationSession) -> list[Action]:
    """The chosen actions in screen pixels; a point outside the screen is refused (never clamped
    onto the edge, which would execute and record a click nobody meant)."""
    model_w, model_h = chosen.model_size or (None, None)
    try:
        return actions_on_screen(
            chosen.actions, chosen.convention, session.current_width, session.current_height, model_w, model_h
        )
    except OffScreen as exc:
        raise DecisionInvalid(str(exc)) from None


def _stored_text(
    screen_actions: list[Action], thought: str, session: AnnotationSession
) -> tuple[str, str, list[Action]]:
    """Training data keeps one convention per model: the step's text is in the profile's convention."""
    convention = profile_named(session.policy_profile).convention
    w, h = session.current_width, session.current_height
    model_actions = [action_from_screen(a, convention, w, h).action for a in screen_actions]
    response = format_response(thought, model_actions)
    action_text = response.split("Action:", 1)[1].strip() if "Action:" in response else response
    return str(convention), action_text, model_actions


class _LeaseGone(Exception):
    pass


@dataclass(frozen=True)
class _Planned:
    """The decision as it will execute (screen pixels) and be stored (the profile's convention)."""

    kind: str
    chosen: _Chosen
    screen_actions: list[Action]
    convention: str
    action_text: str
    model_actions: list[Action]

    @property
    def terminal(self) -> bool:
        return any(a.kind in TERMINAL_KINDS for a in self.screen_actions)


@dataclass(frozen=True)
class _Executed:
    """What the environment answered to the decision's last action (None: no action ran)."""

    result: dict[str, Any] | None
    infos: list[dict[str, Any]]
    clock_end: float


def session_decide(
    *, session_id: int, user: Any, kind: str, data: dict[str, Any], timings: dict[str, float] | None = None
) -> dict[str, Any]:
    """Apply one decision to the session's current observation (`data["obs_version"]` must match).
    Returns {"step": index, "done": bool, "reward": float}.

    Claim, commit, call, store (STYLE 16): the decision is checked and the session claimed by a
    conditional UPDATE; the environment runs it with no transaction, lock or connection held; the
    step is stored in one short transaction only if the session is still active, this annotator's,
    and the claim still ours (else SessionConflict says the result was discarded). A concurrent
    decision on the same session gets SessionConflict at the claim. If the environment is gone the
    session is closed (its partial trajectory kept) and SessionConflict says so; an environment that
    does not answer within ANNOTATION_ENV_TIMEOUT_S raises fleet.EnvTimeout (504), nothing stored.

    `timings`, when given, gets the milliseconds of each phase ("check", "env", "store": the
    decide endpoint's Server-Timing)."""
    clock = _Phases(timings)
    if kind not in DECISION_KINDS:
        raise DecisionInvalid(f"unknown decision {kind!r}; expected one of {DECISION_KINDS}")
    session = session_owned_active(session_id, user)
    if data.get("obs_version") != session.obs_version:
        raise SessionConflict(
            f"the screen changed (version {session.obs_version}, decision made on {data.get('obs_version')}); reload"
        )
    chosen = _choose(session, kind, data)
    screen_actions = _to_screen(chosen, session)
    plan = _Planned(kind, chosen, screen_actions, *_stored_text(screen_actions, chosen.thought, session))
    try:
        token = session_claim(session=session, obs_version=session.obs_version, lapsed_ok=False)
    except ClaimLapsed as exc:  # the decision before this one may have run without being stored
        _reobserve(session_id, exc.token, "a decision on this screen was not stored")
        raise SessionConflict(
            "a decision on this screen was interrupted before it was stored; the screen was read again, decide on it"
        ) from exc
    clock.lap("check")
    try:
        executed = _execute(session, screen_actions)
        clock.lap("env")
    except _LeaseGone as exc:
        session_claim_release(session_id=session_id, token=token)
        session_abandon(session=AnnotationSession.objects.get(pk=session_id), reason=str(exc))
        raise SessionConflict(f"the environment is gone ({exc}); the session was closed") from exc
    except BaseException:
        session_claim_release(session_id=session_id, token=token)
        raise
    out = _store_retrying(session_id, user, token, data, plan, executed)
    clock.lap("store")
    return out


# Waits between tries of a store that lost its database connection (PostgreSQL restarted, the
# connection terminated): the environment has executed the decision, so its step is worth ~4 s.
STORE_RETRY_WAITS_S = (0.2, 0.5, 1.0, 2.0)


def _store_retrying(
    session_id: int, user: Any, token: str, data: dict[str, Any], plan: _Planned, executed: _Executed
) -> dict[str, Any]:
    """`_store`, tried again on a fresh connection when the database connection failed (the
    transaction rolled back: nothing was stored, the claim is still ours). A failure at COMMIT may
    have committed: a step already stored for this screen is the answer then. When the step cannot
    be stored at all, the environment has moved on from the screen the session shows: the session
    reads the screen again (`_reobserve`), so nobody decides on a screen that is gone."""
    obs_version = int(data["obs_version"])
    failed = False
    for wait_s in (*STORE_RETRY_WAITS_S, None):
        try:
            return _store(session_id, user, token, data, plan, executed)
        except SessionConflict as exc:
            if failed and (stored := _stored_already(session_id, obs_version)) is not None:
                return stored
            _reobserve_unclaimed(session_id, f"the decision's result was discarded ({exc})")
            raise
        except (OperationalError, InterfaceError) as exc:
            failed = True
            connection.close()  # the broken connection goes back to the pool, which discards it
            if wait_s is None:
                _reobserve(session_id, token, f"storing the decision failed: {exc}")
                raise
            log.warning(
                "session %s: storing a decision failed (%s); trying again in %s s", session_id, exc, wait_s
            )
            time.sleep(wait_s)
        except Exception as exc:
            _reobserve(session_id, token, f"storing the decision failed: {type(exc).__name__}: {exc}")
            raise
    raise AssertionError("unreachable")  # the last try returns or raises


def _stored_already(session_id: int, obs_version: int) -> dict[str, Any] | None:
    """The answer of a decision on screen `obs_version` whose step was stored (its COMMIT succeeded
    although the connection failed on the way back), or None."""
    session = AnnotationSession.objects.filter(pk=session_id).first()
    if session is None:
        return None
    step = session.trajectory.steps.filter(decision_meta__obs_version=obs_version).order_by("index").first()
    if step is None:
        return None
    return {"step": step.index, "done": session.env_done or step.done, "reward": session.last_reward}


def _reobserve(session_id: int, token: str, why: str) -> None:
    """The environment ran a decision that could not be stored: read its screen and make that the
    session's current observation (a new version: a decision on the old one gets 409), releasing
    the claim. Best effort: if the database is still unreachable the claim lapses after
    ANNOTATION_CLAIM_TTL_S and the next decision reads the screen again (`session_claim`)."""
    log.warning("session %s: %s; reading the screen again", session_id, why)
    try:
        session = AnnotationSession.objects.select_related("task").get(pk=session_id)
        wire_obs = fleet.env_call(
            lease=session_lease(session), op="observe", timeout_s=settings.ANNOTATION_ENV_TIMEOUT_S
        )["observation"]
        with transaction.atomic():
            session = session_fenced(session_id=session_id, user_id=session.user_id, token=token)
            observation_store(session=session, wire_obs=wire_obs)
            publish_observation(session)
            candidates_request(session=session)
    except Exception as exc:
        log.warning("session %s: the screen could not be read again (%s)", session_id, exc)
        connection.close()  # the claim stays: when it lapses, the next decision reads the screen again


def _reobserve_unclaimed(session_id: int, why: str) -> None:
    """A decision ran on the environment but lost its claim: if the session is still active and
    nobody holds it, claim it and read the screen again (one who holds it stores a newer one)."""
    session = AnnotationSession.objects.filter(pk=session_id).first()
    if session is None:
        return
    try:
        token = session_claim(session=session)
    except SessionConflict:
        return
    _reobserve(session_id, token, why)


class _Phases:
    """Milliseconds since the previous lap, by phase name, into `into` (nothing when it is None)."""

    def __init__(self, into: dict[str, float] | None) -> None:
        self.into, self.last = into, time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        if self.into is not None:
            self.into[name] = round((now - self.last) * 1000, 1)
        self.last = now


def _execute(session: AnnotationSession, screen_actions: list[Action]) -> _Executed:
    """Run the actions on the environment, outside any transaction, up to a terminal one (sent
    too: the environment scores an OSWorld task from the last action, as DesktopEnv.step records
    DONE / FAIL) or the episode's end."""
    lease = session_lease(session)
    result: dict[str, Any] | None = None
    infos: list[dict[str, Any]] = []
    timeout_s = settings.ANNOTATION_ENV_TIMEOUT_S
    try:
        for action in screen_actions:
            result = fleet.env_call(
                lease=lease, op="step", payload={"action": action.to_json()}, timeout_s=timeout_s
            )
            infos.append(result.get("info") or {})
            if result.get("done") or action.kind in TERMINAL_KINDS:
                break
    except fleet.LeaseLost as exc:
        raise _LeaseGone(str(exc)) from exc
    except fleet.EnvCallFailed as exc:
        raise DecisionInvalid(f"the environment refused the action: {exc}") from exc
    return _Executed(result, infos, session_clock(session))


@transaction.atomic
def _store(
    session_id: int, user: Any, token: str, data: dict[str, Any], plan: _Planned, executed: _Executed
) -> dict[str, Any]:
    """The decision's step and the new observation, in one short transaction behind the fence."""
    session = session_fenced(session_id=session_id, user_id=user.pk, token=token)
    result = executed.result
    step = store.step_append(
        trajectory=session.trajectory,
        screenshot_name=session.current_screenshot.name,
        fields=_step_fields(session, data, plan, executed),
    )
    if result is None:
        session.save(update_fields=["decision_claim", "decision_claimed_at"])
    else:
        session.last_reward = float(result["reward"])
        session.env_done = bool(result.get("done"))
        observation_store(session=session, wire_obs=result["observation"])
        publish_observation(session)
        if not session.env_done and not plan.terminal:
            candidates_request(session=session)
    if plan.terminal:
        transaction.on_commit(lambda: session_submit(session=AnnotationSession.objects.get(pk=session_id)))
    out: dict[str, Any] = {
        "step": step.index,
        "done": session.env_done or plan.terminal,
        "reward": session.last_reward,
    }
    if notices := [info["disk_full"] for info in executed.infos if info.get("disk_full")]:
        out["disk_full"] = notices[-1]  # the session's home is full (workers/envs/sandbox/home.py)
    return out


def _step_fields(
    session: AnnotationSession, data: dict[str, Any], plan: _Planned, executed: _Executed
) -> dict[str, Any]:
    """The step's record of the decision: screen, candidates, what was chosen and rejected."""
    chosen, result = plan.chosen, executed.result
    rejected = [c["index"] for c in session.candidates if c["index"] != chosen.index]
    points = [[p.x, p.y] for a in plan.screen_actions for p in (a.point, a.end_point) if p is not None]
    return {
        "clock_start": session.current_clock,
        "clock_end": executed.clock_end,
        "raw_text": format_response(chosen.thought, plan.model_actions),
        "thought": chosen.thought,
        "action_text": plan.action_text,
        "action": [a.to_json() for a in plan.model_actions],
        "coord_convention": plan.convention,
        "screen_width": session.current_width,
        "screen_height": session.current_height,
        "executed_points": points,
        "candidates": session.candidates if session.candidates_version == session.obs_version else [],
        "decision": "takeover" if data.get("takeover") else chosen.decision,
        "decision_index": chosen.index,
        "decision_meta": {
            **chosen.meta,
            "kind": plan.kind,
            "rejected": rejected,
            "time_taken_ms": data.get("time_taken_ms"),
            "obs_version": session.obs_version,
            "model_version": session.policy_model,
            "env_info": executed.infos,
        },
        "policy_version": session.policy_model,
        "reward": float(result["reward"]) if result else 0.0,
        "done": bool(result and result.get("done")) or plan.terminal,
    }
