"""The model's candidate actions for the current observation (seed 000 §2.4.2), computed on a worker
(the task `annotation.tasks.propose_candidates`, enqueued by `annotation.services.candidates`).

What is shown is `workers.policy.proposals.propose_executable`'s: the greedy action first, then
distinct executable samples by log-probability, each with its probability; an answer that does not
parse, points off the screen or names no key is never shown. A candidate set is stored only if its
observation is still current. Below the annotation services, so the task never imports them back.
"""

from __future__ import annotations

import time
from functools import lru_cache
from typing import Any

from django.core.files.storage import default_storage

from annotation import events
from annotation.models import AnnotationSession
from webapp.remote_calls import before_remote_call
from webapp.store.checkpoints import policy_server_key
from webapp.store.services import pg_safe
from workers.actions.coords import action_to_screen, off_screen_error
from workers.envs.base import Element, Observation
from workers.policy.base import Candidate, HistoryItem
from workers.policy.openai_client import OpenAIClient, OpenAIPolicy
from workers.policy.profiles import profile_named
from workers.policy.proposals import probability, propose_executable


@lru_cache(maxsize=16)
def _policy_client(base_url: str, api_key: str | None) -> OpenAIClient:
    """This process's client of one policy server under one key: its connections are kept alive
    between proposals (a new client per proposal opened a connection, and left it to the garbage
    collector, every time). A stale kept-alive connection is retried by the client."""
    return OpenAIClient(base_url, api_key=api_key)


def _observation(session: AnnotationSession) -> Observation:
    with default_storage.open(session.current_screenshot.name, "rb") as fh:
        data = fh.read()
    return Observation(
        screenshot=data,
        width=session.current_width,
        height=session.current_height,
        image_format="png" if session.current_screenshot.name.endswith(".png") else "jpeg",
        instruction=session.current_instruction,
        elements=tuple(Element(**e) for e in session.current_elements),
        dom_text=session.current_dom_text or None,
    )


def _history(session: AnnotationSession, max_screenshots: int) -> list[HistoryItem]:
    steps = list(session.trajectory.steps.order_by("index").values("thought", "action_text", "screenshot"))
    items = []
    for i, step in enumerate(steps):
        shot = None
        if i >= len(steps) - max_screenshots and step["screenshot"]:
            with default_storage.open(step["screenshot"], "rb") as fh:
                shot = fh.read()
        items.append(HistoryItem(thought=step["thought"], action=step["action_text"], screenshot=shot))
    return items


def candidate_record(
    candidate: Candidate, index: int, session: AnnotationSession, greedy: bool = False
) -> dict[str, Any]:
    """What the workspace draws and what a decision stores: the model's own text and coordinates,
    plus the same actions in screen pixels (for drawing and executing); `greedy`: the model's own
    top answer."""
    model_w, model_h = candidate.image_size or (None, None)
    screen_actions: list[dict[str, Any]] = []
    clamped, off_screen = False, ""
    for action in candidate.parsed.actions:
        mapped = action_to_screen(
            action, candidate.convention, session.current_width, session.current_height, model_w, model_h
        )
        screen_actions.append(mapped.action.to_json())
        if mapped.clamped and not off_screen:
            off_screen = off_screen_error(
                action, candidate.convention, session.current_width, session.current_height
            )
        clamped = clamped or mapped.clamped
    return {
        "index": index,
        "thought": candidate.thought,
        "action_text": candidate.action_text,
        "raw_text": candidate.raw_text,
        "actions": [a.to_json() for a in candidate.parsed.actions],
        "screen_actions": screen_actions,
        "clamped": clamped,
        "error": off_screen,  # accepting it is refused; the page draws it at the edge, marked
        "parse_error": candidate.parsed.error.message if candidate.parsed.error else "",
        "logprob": candidate.logprob_sum,
        "probability": probability(candidate),
        "greedy": greedy,
        "model_version": candidate.model_version,
        "convention": str(candidate.convention),
        "image_size": list(candidate.image_size) if candidate.image_size else None,
    }


def _nothing_executable(drawn: int, rejected: dict[str, int]) -> str:
    reasons = ", ".join(f"{count} {reason.replace('_', ' ')}" for reason, count in sorted(rejected.items()))
    return f"none of the model's {drawn} answers can be executed here ({reasons})"


def candidates_propose(*, session_id: int, obs_version: int) -> bool:
    """Compute and store candidates for observation `obs_version`; False if it is no longer current
    (nothing stored). Policy failures are stored as a failed set with the error shown to the page."""
    session = AnnotationSession.objects.select_related("trajectory").get(pk=session_id)
    if session.obs_version != obs_version or session.status != "active":
        return False
    started = time.perf_counter()
    try:
        profile = profile_named(session.policy_profile)
        client = _policy_client(session.policy_base_url, policy_server_key(session.policy_base_url))
        policy = OpenAIPolicy(session.policy_base_url, session.policy_model, profile, client=client)
        observation, history = _observation(session), _history(session, profile.max_screenshots - 1)
        before_remote_call("the annotation model's candidates")
        proposal = propose_executable(policy, observation, history, None, k=session.candidates_n)
        records = [
            candidate_record(c, i, session, greedy=proposal.greedy_first and i == 0)
            for i, c in enumerate(proposal.candidates)
        ]
        status, error = "ready", "" if records else _nothing_executable(proposal.drawn, proposal.rejected)
    except Exception as exc:
        records, status, error = [], "failed", f"{type(exc).__name__}: {exc}"
    model_ms = round((time.perf_counter() - started) * 1000, 1)
    stored = AnnotationSession.objects.filter(pk=session_id, obs_version=obs_version, status="active").update(
        candidates=pg_safe(records), candidates_status=status, candidates_error=pg_safe(error[:2000]),
        candidates_version=obs_version, candidates_ms=model_ms,
    )  # fmt: skip
    if stored:
        session.refresh_from_db()
        events.publish(session.pk, events.candidates_payload(session))
    return bool(stored)
