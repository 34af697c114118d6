"""Decisions are never silently rewritten: an off-screen point is refused with the reason, nothing
runs and nothing is recorded; candidates pointing off screen are marked; numbers the user sees are
1-based in the session state; the result after Finish is the stored final reward."""

from __future__ import annotations

import pytest

from annotation.models import AnnotationSession
from annotation.selectors import session_state
from tests.factories import TaskFactory
from webapp.store import services as store

pytestmark = pytest.mark.django_db


def _active(user, **fields) -> AnnotationSession:
    task = TaskFactory(env_kind="desktop")
    trajectory = store.trajectory_create(task=task, source="annotation", annotator=user)
    return AnnotationSession.objects.create(
        user=user, task=task, trajectory=trajectory, status="active", obs_version=1,
        current_width=1280, current_height=800, **fields,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("action_text", "convention"),
    [
        ("click(start_box='(5000,5000)')", "screen"),
        ("drag(start_box='(10,10)', end_box='(10,900)')", "screen"),
    ],
)
def test_an_off_screen_point_is_refused_with_the_reason(users, api, action_text, convention) -> None:
    session = _active(users["annotator"])
    response = api("annotator").post(
        f"/api/annotation/sessions/{session.pk}/decide/",
        {"kind": "override", "obs_version": 1, "thought": "x", "action_text": action_text, "convention": convention},
        format="json",
    )  # fmt: skip
    assert response.status_code == 400
    assert "outside the 1280x800 screen" in response.json()["detail"]
    assert session.trajectory.steps.count() == 0


def test_accepting_an_off_screen_candidate_is_refused(users, api) -> None:
    candidate = {
        "index": 0, "thought": "far away", "action_text": "click(start_box='(3000,10)')", "raw_text": "",
        "actions": [{"kind": "click", "point": [3000, 10]}], "screen_actions": [{"kind": "click", "point": [1279, 10]}],
        "clamped": True, "error": "off screen", "parse_error": "", "logprob": -1.0, "model_version": "v1",
        "convention": "screen", "image_size": None,
    }  # fmt: skip
    session = _active(
        users["annotator"], candidates=[candidate], candidates_status="ready", candidates_version=1
    )
    state = session_state(session)
    assert state["candidates"]["items"][0]["number"] == 1  # what the user sees
    response = api("annotator").post(
        f"/api/annotation/sessions/{session.pk}/decide/", {"kind": "accept", "obs_version": 1, "index": 0},
        format="json",
    )  # fmt: skip
    assert response.status_code == 400 and "outside" in response.json()["detail"]


def test_candidate_records_mark_off_screen_points() -> None:
    from annotation.proposals import candidate_record
    from workers.actions.parse import parse_response
    from workers.actions.types import Convention
    from workers.policy.base import Candidate

    session = AnnotationSession(current_width=160, current_height=210)
    parsed = parse_response(
        "Thought: t\nAction: click(start_box='(5000,5000)')", convention=Convention.SCREEN
    )
    record = candidate_record(
        Candidate(thought="t", action_text="click", parsed=parsed, logprob_sum=None, token_logprobs=None,
                  model_version="v1", raw_text="", convention=Convention.SCREEN),
        0, session,
    )  # fmt: skip
    assert record["clamped"] and "lies outside the 160x210 screen" in record["error"]


def test_result_after_finish_is_the_stored_final_reward(users) -> None:
    session = _active(users["annotator"], last_reward=0.91)
    assert session_state(session)["result"] is None
    store.step_append(trajectory=session.trajectory, fields={"decision": "accepted", "decision_index": 1})
    store.trajectory_finish(trajectory=session.trajectory, status="completed", final_reward=1.0)
    AnnotationSession.objects.filter(pk=session.pk).update(status="submitted")
    session.refresh_from_db()
    state = session_state(session)
    assert state["result"] == {
        "final_reward": 1.0,
        "success": True,
        "status": "completed",
        "review_state": "none",
    }
    assert state["steps"][0]["decision_number"] == 2 and state["steps"][0]["number"] == 1


def test_an_environment_that_does_not_answer_is_a_504_and_stores_nothing(users, api) -> None:
    """The env's host hangs (its queue has no consumer): the request waits ANNOTATION_ENV_TIMEOUT_S,
    answers 504 with the reason, gives the session's claim back and stores no step."""
    import uuid

    from django.test import override_settings

    from webapp.fleet import services as fleet

    host = f"hung{uuid.uuid4().hex[:6]}"
    with override_settings(ANNOTATION_ENV_TIMEOUT_S=1.0, FLEET_REDIS_PREFIX=f"test:fleet:{host}"):
        fleet.registry.cache_clear()
        registry = fleet.registry()
        try:
            registry.register_env(env_id=f"{host}-e1", kind="desktop", worker=host, boot_s=0.1)
            lease = registry.acquire(kind="desktop", owner="annotation:test")
            assert lease is not None
            session = _active(
                users["annotator"], lease_id=lease.lease_id, lease_env=lease.env_id, lease_worker=host
            )
            response = api("annotator").post(
                f"/api/annotation/sessions/{session.pk}/decide/",
                {"kind": "override", "obs_version": 1, "thought": "x", "action_text": "click(start_box='(5,5)')"},
                format="json",
            )  # fmt: skip
        finally:
            registry.r.delete(f"env.{host}")  # the call nobody consumed
            registry.clear()
            fleet.registry.cache_clear()
    assert response.status_code == 504, response.content
    assert "did not answer within 1 s" in response.json()["detail"]
    session.refresh_from_db()
    assert session.decision_claim == "" and session.obs_version == 1
    assert session.trajectory.steps.count() == 0
