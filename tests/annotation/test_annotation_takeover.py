"""Take-over end to end on a live environment: the input the VNC proxy publishes for a read-write
session (written here to the same Redis stream in the proxy's format: the proxy itself is covered by
tests/envs/test_desktop_takeover.py) becomes `takeover` steps when the annotator hands back control;
the screen is observed again and the model proposes for it; the consumed input is not replayed."""

from __future__ import annotations

import time

import pytest

from annotation.models import Assignment
from tests.annotation.test_annotation_flow import _wait_candidates, _wait_idle
from tests.factories import TaskFactory
from webapp.fleet import services as fleet
from webapp.store.models import Step
from workers.envs.vnc.rfb import InputEvent
from workers.envs.vnc.takeover import STREAM_PREFIX, event_to_fields

pytestmark = pytest.mark.django_db(transaction=True)


def _publish(session_id: int, events: list[InputEvent], user_id: int) -> None:
    redis, t0 = fleet.registry().r, time.monotonic() - 2.0
    for n, event in enumerate(events):
        redis.xadd(
            STREAM_PREFIX + f"annotation:{session_id}", event_to_fields(event, t0 + 0.05 * n, str(user_id))
        )


def test_takeover_input_becomes_steps_and_fresh_candidates(api, users, live_stack) -> None:
    task = TaskFactory(
        external_id="click-test", env_kind="browser", source="miniwob", setup={"task": "click-test"}
    )
    Assignment.objects.create(user=users["annotator"], task=task)
    client = api("annotator")
    _wait_idle("browser")
    sid = client.post("/api/annotation/sessions/", {}, format="json").json()["id"]
    _wait_candidates(client, sid, 1)

    # Another annotator cannot end this session's take-over.
    assert api("annotator2").post(f"/api/annotation/sessions/{sid}/takeover/end/").status_code == 404

    _publish(sid, [
        InputEvent("pointer", x=40, y=90, buttons=1), InputEvent("pointer", x=40, y=90, buttons=0),
        InputEvent("key", keysym=ord("h"), down=True), InputEvent("key", keysym=ord("h"), down=False),
        InputEvent("key", keysym=ord("i"), down=True), InputEvent("key", keysym=ord("i"), down=False),
    ], users["annotator"].pk)  # fmt: skip
    ended = client.post(
        f"/api/annotation/sessions/{sid}/takeover/end/",
        {"thought": "I clicked the field myself"},
        format="json",
    )
    assert ended.status_code == 200, ended.content
    body = ended.json()
    assert body["actions"] == 2 and body["steps"] == [0, 1]
    assert body["state"]["observation"]["obs_version"] == 2  # the screen was observed again

    steps = list(Step.objects.filter(trajectory_id=body["state"]["trajectory_id"]).order_by("index"))
    assert [s.decision for s in steps] == ["takeover", "takeover"]
    assert steps[0].action[0]["kind"] == "click" and steps[0].executed_points == [[40, 90]]
    assert steps[0].thought == "I clicked the field myself"
    assert steps[1].action[0] == {**steps[1].action[0], "kind": "type", "text": "hi"}
    assert steps[0].clock_start <= steps[1].clock_start
    assert steps[0].screenshot  # the screen the take-over started from

    # New candidates for the new screen; ending again records nothing more (input was consumed).
    assert _wait_candidates(client, sid, 2)["candidates"]["status"] == "ready"
    again = client.post(f"/api/annotation/sessions/{sid}/takeover/end/", {}, format="json").json()
    assert (
        again["actions"] == 0
        and Step.objects.filter(trajectory_id=body["state"]["trajectory_id"]).count() == 2
    )
