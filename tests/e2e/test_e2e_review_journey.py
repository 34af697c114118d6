"""Reviewers and the fix loop in Chromium on `make up`'s stack: two reviewers review a MiniWoB++
trajectory, one asks for a fix on a step, the annotator reads the comment in the fix view, fixes the
thought and resubmits, both approve the next round; a changed action in the fix view re-executes as
a branch that continues in the workspace and replaces the original."""

from __future__ import annotations

import json
import re
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from playwright.sync_api import expect

from tests.e2e.journeys import (
    JOURNEY_MARKS,
    People,
    annotate_miniwob,
    needs_fix_via_api,
    policy_ready,
    review,
    session_state,
    task_id,
)
from tests.e2e.live_stack import LiveStack
from workers.asr.audio import SAMPLE_RATE
from workers.asr.synth import speak, write_wav

pytestmark = JOURNEY_MARKS


def test_two_reviewers_send_a_step_back_the_annotator_fixes_it_and_both_approve(
    live_stack: LiveStack, people: People, shots: Path
) -> None:
    policy_ready(live_stack)
    annotator = people.page("annotator")
    _sid, tid, label = annotate_miniwob(live_stack, annotator, "click-button", shots)
    accepted_at = 0  # the edited step

    # Reviewer 1 opens the page's own URL form: offered a claim, not "no such trajectory".
    reviewer = people.page("reviewer")
    reviewer.goto(f"{live_stack.base_url}/review/?t={tid}")
    expect(reviewer.get_by_test_id("claim-offer")).to_be_visible(timeout=30_000)
    reviewer.screenshot(path=str(shots / "review-claim-offer.png"))
    reviewer.get_by_test_id("claim").click()
    expect(reviewer.get_by_test_id("step-panel")).to_be_visible(timeout=30_000)
    # The edited candidate has the same number here as in the workspace.
    reviewer.get_by_test_id(f"frame-{accepted_at}").click()
    expect(reviewer.get_by_test_id("step-decision")).to_have_text(label)
    comment = "Say in the thought which button you are aiming for."
    frames = reviewer.get_by_test_id("filmstrip").locator(".rv-frame")
    for i in range(frames.count()):
        frames.nth(i).click()
        if i == accepted_at:
            reviewer.get_by_test_id("step-fix").click()
            reviewer.get_by_test_id("step-comment").fill(comment)
        else:
            reviewer.get_by_test_id("step-approve").click()
    reviewer.locator("input[name=overall][value=fix]").check()
    reviewer.screenshot(path=str(shots / "review-fix-verdict.png"))
    reviewer.get_by_test_id("submit-review").click()
    expect(reviewer.get_by_test_id("other-review").first).to_be_visible(timeout=30_000)

    # Reviewer 2 approves: one fix + one approve sends the trajectory back.
    reviewer2 = people.page("reviewer2")
    review(reviewer2, live_stack, tid, {}, "approve")
    expect(reviewer2.get_by_test_id("outcome")).to_contain_text("needs fix", timeout=30_000)

    # The annotator sees the comment: the session page says so in its own tone and leads to the fix view.
    annotator.goto(f"{live_stack.base_url}/workspace/{_sid}/")
    done = annotator.get_by_test_id("done")
    expect(done).to_have_attribute("data-status", "needs_fix", timeout=30_000)
    assert "ws-done-warn" in (done.get_attribute("class") or "")
    expect(annotator.get_by_test_id("connection")).not_to_have_text("Connecting…")
    annotator.goto(f"{live_stack.base_url}/workspace/")
    annotator.get_by_test_id(f"fix-{tid}").click()
    expect(annotator).to_have_url(re.compile(rf"/workspace/fix/{tid}/\?step={accepted_at + 1}$"))
    comments = annotator.get_by_test_id("fix-comments")
    expect(comments).to_contain_text(comment)
    expect(comments).to_contain_text("reviewer")
    expect(annotator.get_by_test_id("step-decision")).to_have_text(label)  # same number again
    annotator.get_by_test_id("fix-thought").fill(
        "I click the button the task names; it is the one at the marker."
    )
    annotator.get_by_test_id("fix-save-thought").click()
    expect(annotator.get_by_test_id("fix-status")).to_contain_text("saved")
    annotator.screenshot(path=str(shots / "fix-loop.png"), full_page=True)
    annotator.get_by_test_id("fix-resubmit-button").click()
    expect(annotator.get_by_test_id("fix-status")).to_contain_text("pending")
    with live_stack.api("annotator") as api:
        fixed = api.get(f"/api/annotation/fixes/{tid}/").json()
    assert fixed["trajectory"]["review_state"] == "pending" and fixed["trajectory"]["review_round"] == 2
    assert fixed["steps"][accepted_at]["thought"].startswith("I click the button")

    # Round 2: both reviewers approve, from the same URL form (a claim for the new round).
    review(reviewer, live_stack, tid, {}, "approve")
    review(reviewer2, live_stack, tid, {}, "approve")
    expect(reviewer2.get_by_test_id("outcome")).to_contain_text("approved", timeout=30_000)
    reviewer2.screenshot(path=str(shots / "review-approved.png"), full_page=True)
    with live_stack.api("admin") as api:
        assert api.get(f"/api/trajectories/{tid}/").json()["review_state"] == "approved"


def test_annotator_reexecutes_a_changed_action_as_a_branch(
    live_stack: LiveStack, people: People, shots: Path
) -> None:
    _sid, tid = needs_fix_via_api(live_stack, "click-test")
    page = people.page("annotator")
    page.goto(f"{live_stack.base_url}/workspace/fix/{tid}/")
    expect(page.get_by_test_id("fix-comments")).to_contain_text("Click the middle of the page instead.")
    branch = page.get_by_test_id("fix-branch")
    expect(branch).to_be_disabled()  # nothing changed yet
    page.get_by_role("button", name="Use this action").click()  # the reviewer's suggested action
    expect(branch).to_be_enabled()
    suggested = page.get_by_test_id("fix-action").input_value()
    page.get_by_test_id("fix-thought").fill("The reviewer is right: the middle of the page.")
    page.screenshot(path=str(shots / "fix-branch-before.png"), full_page=True)
    branch.click()
    # The branch re-executes on a fresh environment and continues in the workspace.
    expect(page).to_have_url(re.compile(r"/workspace/\d+/$"), timeout=120_000)
    expect(page.get_by_test_id("step-0")).to_contain_text("overridden", timeout=30_000)
    sid = int(page.url.rstrip("/").rsplit("/", 1)[1])
    state = session_state(live_stack, "annotator", sid)
    assert state["steps"][0]["action_text"] == suggested
    assert state["trajectory_id"] != tid
    page.screenshot(path=str(shots / "fix-branch-workspace.png"))
    if not state["observation"]["env_done"]:
        page.get_by_role("button", name="Finish with answer").click()
        page.locator("#ws-outcome-thought").fill("Fixed as the reviewer asked.")
        page.get_by_test_id("outcome-finish").get_by_role("button", name="Finish").click()
    else:
        page.get_by_test_id("submit").click()
    expect(page.get_by_test_id("result")).to_contain_text("final reward", timeout=120_000)
    with live_stack.api("annotator") as api:
        original = api.get(f"/api/annotation/fixes/{tid}/").json()["trajectory"]
        fixed = api.get(f"/api/annotation/fixes/{state['trajectory_id']}/").json()["trajectory"]
    assert original["review_state"] == "superseded" and original["superseded_by"] == state["trajectory_id"]
    assert fixed["branch_of"] == tid and fixed["review_state"] == "pending"
    # The fix view of the original says it was replaced and offers nothing to change.
    page.goto(f"{live_stack.base_url}/workspace/fix/{tid}/")
    expect(page.get_by_test_id("fix-head")).to_contain_text(
        f"replaced by its branch #{state['trajectory_id']}"
    )
    expect(page.get_by_test_id("fix-resubmit-button")).to_be_disabled()
    assert not people.errors["annotator"], people.errors


def _annotated_with_speech(stack: LiveStack, seconds: float) -> int:
    """A MiniWoB++ trajectory annotated through the API with `seconds` of think-aloud audio (speech,
    then silence) uploaded as the session's recording, finished, and its full pass done (the
    re-encoded recording the review page plays). Returns the trajectory id."""
    audio = np.concatenate(
        [speak("I click the button in the middle of the page", "en-us", 160),
         np.zeros(round((seconds - 4) * SAMPLE_RATE), dtype=np.float32)]
    )  # fmt: skip
    wav = write_wav(audio, Path(tempfile.mkdtemp()) / "speech.wav").read_bytes()
    with stack.api("annotator") as api:
        state = api.post("/api/annotation/sessions/", json={"task": task_id(stack, "click-link")}).json()
        sid = state["id"]
        put = api.put(f"/api/annotation/sessions/{sid}/thinkaloud/chunks/0/", params={"start_clock": 0},
                      content=wav, headers={"Content-Type": "audio/wav"})  # fmt: skip
        assert put.status_code == 201, put.text
        w, h = state["observation"]["width"], state["observation"]["height"]
        body = {"kind": "override", "obs_version": state["observation"]["obs_version"], "convention": "screen",
                "thought": "The middle of the page.", "action_text": f"click(start_box='({w // 2},{h // 2})')"}  # fmt: skip
        state = api.post(f"/api/annotation/sessions/{sid}/decide/", json=body).json()["state"]
        if state["observation"]["env_done"]:
            api.post(f"/api/annotation/sessions/{sid}/submit/").raise_for_status()
        else:
            body = {
                "kind": "finish",
                "obs_version": state["observation"]["obs_version"],
                "answer": "",
                "thought": "Done.",
            }
            api.post(f"/api/annotation/sessions/{sid}/decide/", json=body).raise_for_status()
        api.post(f"/api/annotation/sessions/{sid}/thinkaloud/finish/").raise_for_status()
        tid = int(api.get(f"/api/annotation/sessions/{sid}/").json()["trajectory_id"])
    deadline = time.monotonic() + 300
    with stack.api("admin") as api:
        while not api.get(f"/api/annotation/thinkaloud/trajectories/{tid}/").json()["audio_url"]:
            assert time.monotonic() < deadline, f"no re-encoded recording in 300 s\n{stack.log('worker-asr')}"
            time.sleep(1)
    return tid


def test_a_review_page_with_think_aloud_settles_quickly(
    live_stack: LiveStack, people: People, shots: Path
) -> None:
    """The review page of a trajectory with a minute of think-aloud settles (step panel drawn, the
    network quiet) in seconds: the recording is fetched when a step is played, not while the page
    loads (it took ~15 s when the audio was preloaded). The figure is printed and kept beside the
    screenshots (review-settle.json)."""
    tid = _annotated_with_speech(live_stack, 60.0)
    page = people.page("reviewer")
    page.goto(f"{live_stack.base_url}/review/?t={tid}")
    page.get_by_test_id("claim").click()
    expect(page.get_by_test_id("step-panel")).to_be_visible(timeout=30_000)
    audio_requests: list[str] = []
    page.on("request", lambda r: audio_requests.append(r.url) if r.resource_type == "media" else None)
    settle = []
    for _ in range(3):  # the claimed review page, opened again: what a reviewer waits for
        t0 = time.monotonic()
        page.goto(f"{live_stack.base_url}/review/?t={tid}")
        expect(page.get_by_test_id("step-panel")).to_be_visible(timeout=30_000)
        expect(page.get_by_test_id("speech")).to_be_visible(timeout=30_000)
        page.wait_for_load_state("networkidle")
        settle.append(time.monotonic() - t0 - 0.5)  # networkidle waits 500 ms of quiet
    assert page.get_by_test_id("speech-audio").get_attribute("preload") == "none"
    assert audio_requests == [], f"the recording was fetched before anything played: {audio_requests}"
    page.screenshot(path=str(shots / "review-with-speech.png"), full_page=True)
    figure = {"settle_s": [round(s, 2) for s in settle], "median_s": round(statistics.median(settle), 2),
              "audio_s": 60.0, "audio_fetched_before_play": len(audio_requests)}  # fmt: skip
    (shots / "review-settle.json").write_text(json.dumps(figure))
    print(json.dumps({"review_settle": figure}))
    assert statistics.median(settle) < 5.0, figure
    # Playing a step fetches the recording then (where the step has words to play).
    play = page.get_by_test_id("speech-play")
    if play.is_enabled():
        play.click()
        deadline = time.monotonic() + 15
        while not audio_requests and time.monotonic() < deadline:
            page.wait_for_timeout(200)
        assert audio_requests, "playing a step fetched nothing"
    assert not people.errors["reviewer"], people.errors
