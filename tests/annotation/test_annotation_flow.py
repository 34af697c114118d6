"""The annotation loop end to end on a MiniWoB++ task: start, candidates arrive, accept, bad input,
stale decision, override with a click, reload, submit — asserting on what is stored."""

from __future__ import annotations

import math
import time

import pytest

from annotation.models import AnnotationSession, Assignment
from tests.env_host import wait_idle as _wait_idle
from tests.factories import TaskFactory
from webapp.store.models import Step, Trajectory

pytestmark = pytest.mark.django_db(transaction=True)


def _wait_completed(trajectory_id: int, timeout: float = 60) -> Trajectory:
    """The trajectory once its episode is stored as completed (the verifier's result written)."""
    deadline = time.monotonic() + timeout
    while (traj := Trajectory.objects.get(pk=trajectory_id)).status != "completed":
        assert time.monotonic() < deadline, f"the episode never completed ({traj.status})"
        time.sleep(0.2)
    return traj


def _wait_candidates(client, session_id: int, version: int, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        state = client.get(f"/api/annotation/sessions/{session_id}/").json()
        c = state["candidates"]
        if c["obs_version"] == version and c["status"] in ("ready", "failed"):
            return state
        assert time.monotonic() < deadline, f"candidates never arrived: {c}"
        time.sleep(0.1)


def test_annotation_episode_on_miniwob(api, users, live_stack) -> None:
    task = TaskFactory(
        external_id="click-test", env_kind="browser", source="miniwob", setup={"task": "click-test"}
    )
    Assignment.objects.create(user=users["annotator"], task=task)
    client = api("annotator")
    _wait_idle("browser")

    assert api("researcher").post("/api/annotation/sessions/", {"task": task.pk}).status_code == 403
    started = client.post("/api/annotation/sessions/", {}, format="json")  # the next assigned task
    assert started.status_code == 201, started.content
    state = started.json()
    sid = state["id"]
    assert state["status"] == "active" and state["observation"]["obs_version"] == 1
    assert state["task"]["instruction"].lower().startswith("click")  # MiniWoB's generated utterance

    state = _wait_candidates(client, sid, 1)
    cands = state["candidates"]
    assert cands["status"] == "ready", cands["error"]
    # Up to the pool's default N (3): the greedy answer first, then distinct executable samples found
    # within the proposal's time budget; nothing unparseable or off the screen is shown.
    items = cands["items"]
    assert 1 <= len(items) <= 3 and not any(c["greedy"] for c in items[1:])
    assert all(c["model_version"] and not c["clamped"] and not c["parse_error"] for c in items)
    # the model's probability of each answer (an untrained model's long answers underflow to 0.0)
    assert all(c["probability"] == pytest.approx(math.exp(c["logprob"])) for c in items)

    # Bad input: an unparseable action is refused and nothing runs.
    bad = client.post(f"/api/annotation/sessions/{sid}/decide/",
                      {"kind": "override", "obs_version": 1, "thought": "x", "action_text": "click(start_box='(1,"},
                      format="json")  # fmt: skip
    assert bad.status_code == 400 and "does not parse" in bad.json()["detail"]
    assert Step.objects.count() == 0

    # Accept candidate 0.
    accepted = client.post(f"/api/annotation/sessions/{sid}/decide/",
                           {"kind": "accept", "index": 0, "obs_version": 1, "time_taken_ms": 1500}, format="json")  # fmt: skip
    assert accepted.status_code == 200, accepted.content
    step0 = Step.objects.get(index=0)
    assert step0.decision == "accepted" and step0.decision_index == 0
    assert step0.decision_meta["rejected"] == list(range(1, len(items)))
    assert step0.decision_meta["time_taken_ms"] == 1500
    assert len(step0.candidates) == len(items) and step0.screenshot.name.startswith("annotation/")
    version = accepted.json()["state"]["observation"]["obs_version"]

    if not accepted.json()["done"]:
        # A decision on the old screen is refused.
        stale = client.post(f"/api/annotation/sessions/{sid}/decide/",
                            {"kind": "accept", "index": 0, "obs_version": 1}, format="json")  # fmt: skip
        assert stale.status_code == 409
        # Override: click the button's centre, in screen pixels, as the canvas click would give it.
        session = AnnotationSession.objects.get(pk=sid)
        button = next(e for e in session.current_elements if e["tag"] == "button")
        x, y = button["x"] + button["width"] / 2, button["y"] + button["height"] / 2
        override = client.post(
            f"/api/annotation/sessions/{sid}/decide/",
            {"kind": "override", "obs_version": version, "thought": "The button is in the middle.",
             "action_text": f"click(start_box='({x:.0f},{y:.0f})')", "convention": "screen"},
            format="json",
        )  # fmt: skip
        assert override.status_code == 200, override.content
        assert override.json()["done"] is True and override.json()["reward"] > 0
        last = Step.objects.order_by("-index").first()
        assert last.decision == "overridden" and last.executed_points == [[round(x), round(y)]]

    # Reload: the state comes back whole.
    reloaded = client.get(f"/api/annotation/sessions/{sid}/").json()
    assert [s["index"] for s in reloaded["steps"]] == list(range(Step.objects.count()))

    submitted = client.post(f"/api/annotation/sessions/{sid}/submit/")
    assert submitted.status_code == 200 and submitted.json()["status"] == "submitted"
    traj = Trajectory.objects.get(pk=reloaded["trajectory_id"])
    # The screen captured at Finish: what the page shows now, and the trajectory's final screenshot
    # (not the last step's, which is the screen that step was decided on).
    after = submitted.json()["observation"]
    assert after["obs_version"] == reloaded["observation"]["obs_version"] + 1
    assert (
        traj.final_screenshot.name
        and traj.final_screenshot.name != traj.steps.order_by("-index")[0].screenshot.name
    )
    assert after["screenshot_url"].endswith(traj.final_screenshot.name)
    assert traj.status == "completed" and traj.review_state == "pending" and traj.source == "annotation"
    assert traj.annotator == users["annotator"]
    assert isinstance(traj.metadata["seed"], int)  # recorded so review can replay the same layout
    assert Assignment.objects.get(user=users["annotator"], task=task).status == "done"
    assert client.post(f"/api/annotation/sessions/{sid}/submit/").status_code == 409
    assert api("annotator2").get(f"/api/annotation/sessions/{sid}/").status_code == 404
