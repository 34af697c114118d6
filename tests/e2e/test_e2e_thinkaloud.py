"""Think-aloud in Chromium against the real stack: the annotator records while annotating a MiniWoB++
task, Chromium's fake microphone playing synthesized speech (espeak-ng) with a pause between the
thought for each action. The page uploads chunks (one per decision), a real Celery worker on its own
asr queue transcribes them with Whisper (tiny.en), and the words appear under the right step; after
submit the full pass runs and the reviewer plays a step's audio with its words lighting up.

Needs the built frontend (`npm --prefix frontend run build`). Screenshots go to
$FLYWHEEL_E2E_SCREENSHOTS or a fresh temp dir (printed at the end of the run).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from annotation.models import AnnotationSession, Assignment, Review, ThinkAloudRecording
from tests.annotation.conftest import live_stack, policy_server, warm_pool  # noqa: F401 (fixtures)
from tests.annotation.test_thinkaloud_worker import asr_worker  # noqa: F401 (fixture)
from tests.conftest import PASSWORD
from tests.e2e.conftest import CHROMIUM_ARGS, MANIFEST, shots  # noqa: F401
from tests.e2e.test_e2e_workspace import _wait_idle, asgi_server  # noqa: F401
from tests.factories import TaskFactory
from webapp.store.models import Step
from workers.asr.audio import SAMPLE_RATE
from workers.asr.synth import speak, write_wav

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

FIRST = "I wait a moment so the page can finish loading"
SECOND = "now I click the button in the middle to finish the task"
LEAD_S, GAP_S = 1.5, 7.0


@pytest.fixture(scope="module")
def speech(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, float, float]:
    """The fake microphone's file: silence, FIRST, a long pause, SECOND, silence. Returns the path
    and the seconds (from the start of capture) at which FIRST and SECOND end."""
    first, second = speak(FIRST, "en-us", 160), speak(SECOND, "en-us", 160)
    silence = lambda s: np.zeros(round(s * SAMPLE_RATE), dtype=np.float32)  # noqa: E731
    audio = np.concatenate([silence(LEAD_S), first, silence(GAP_S), second, silence(30.0)])
    first_end = LEAD_S + len(first) / SAMPLE_RATE
    second_end = first_end + GAP_S + len(second) / SAMPLE_RATE
    path = write_wav(audio, tmp_path_factory.mktemp("thinkaloud") / "speech.wav")
    return path, first_end, second_end


@pytest.fixture(scope="module")
def browser(speech: tuple[Path, float, float]) -> Iterator[Browser]:
    if not MANIFEST.exists():
        pytest.fail(
            f"The frontend is not built ({MANIFEST} is missing): run `npm --prefix frontend run build`."
        )
    os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # Playwright's loop runs in this thread
    args = [
        *CHROMIUM_ARGS, "--use-fake-device-for-media-stream", "--use-fake-ui-for-media-stream",
        f"--use-file-for-fake-audio-capture={speech[0]}%noloop", "--autoplay-policy=no-user-gesture-required",
    ]  # fmt: skip
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path="/usr/bin/chromium", args=args)
        yield b
        b.close()


@pytest.fixture
def page(browser: Browser, shots: Path, request: pytest.FixtureRequest) -> Iterator[Page]:  # noqa: F811
    page = browser.new_page(viewport={"width": 1440, "height": 960})
    failed_before = request.session.testsfailed
    yield page
    if request.session.testsfailed > failed_before:
        page.screenshot(path=str(shots / f"{request.node.name}-failed.png"), full_page=True)
    page.close()


def _screen_point(page: Page, session: AnnotationSession, x: float, y: float) -> tuple[float, float]:
    box = page.get_by_test_id("overlay").bounding_box()
    assert box is not None and box["width"] > 0
    return (box["x"] + (x + 0.5) * box["width"] / session.current_width,
            box["y"] + (y + 0.5) * box["height"] / session.current_height)  # fmt: skip


def _sleep_until(t: float) -> None:
    time.sleep(max(0.0, t - time.monotonic()))


def test_annotator_thinks_aloud_and_the_reviewer_plays_it(
    asr_worker,  # noqa: F811 (imported fixture)
    asgi_server,  # noqa: F811
    browser: Browser,
    page: Page,
    users,
    shots,  # noqa: F811
    speech,
) -> None:
    base = asgi_server
    _, first_end, second_end = speech
    task = TaskFactory(
        external_id="click-test", env_kind="browser", source="miniwob", setup={"task": "click-test"}
    )
    Assignment.objects.create(user=users["annotator"], task=task)
    _wait_idle("browser")
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))

    page.goto(f"{base}/login/?next=/workspace/")
    page.get_by_label("Username").fill("ann")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_test_id("take-next").click()
    expect(page).to_have_url(re.compile(rf"{base}/workspace/\d+/$"), timeout=60_000)
    session = AnnotationSession.objects.get(user=users["annotator"])
    expect(page.get_by_test_id("connection")).to_have_attribute("data-status", "open", timeout=15_000)
    expect(page.get_by_test_id("record-status")).to_have_text("Not recording")

    # Record: the fake microphone starts playing the speech file when the capture opens.
    opened = time.monotonic()
    page.get_by_test_id("record-toggle").click()
    recorder = page.get_by_test_id("recorder")
    expect(recorder).to_have_attribute("data-state", "on", timeout=10_000)
    expect(page.get_by_test_id("record-status")).to_contain_text("Recording")
    # The level meter moves while the first sentence plays.
    page.wait_for_function(
        "() => Number(document.querySelector('[data-testid=level-meter]').dataset.level) > 20", timeout=10_000
    )
    page.screenshot(path=str(shots / "thinkaloud-recording.png"))

    # Step 1 (wait) in the pause after the first thought; step 2 (click the button) after the second.
    _sleep_until(opened + first_end + GAP_S / 2)
    page.keyboard.press("o")
    page.locator("#ws-action").fill("wait()")
    page.locator("#ws-action").press("Enter")
    expect(page.get_by_test_id("step-0")).to_be_visible(timeout=30_000)
    # The step's words arrive while the annotator goes on (its chunk was cut at the decision).
    expect(page.get_by_test_id("said-text-0")).to_contain_text("page", timeout=60_000)
    expect(page.get_by_test_id("record-noise")).to_be_hidden()  # a quiet room: no noise notice
    page.screenshot(path=str(shots / "thinkaloud-live-words.png"))

    session.refresh_from_db()
    button = next(e for e in session.current_elements if e["tag"] == "button")
    bx, by = round(button["x"] + button["width"] / 2), round(button["y"] + button["height"] / 2)
    _sleep_until(opened + second_end + 2.5)
    page.mouse.click(*_screen_point(page, session, bx, by))
    expect(page.locator("#ws-action")).to_have_value(f"click(start_box='({bx},{by})')")
    page.locator("#ws-action").press("Enter")
    expect(page.get_by_test_id("step-1")).to_be_visible(timeout=30_000)
    expect(page.get_by_test_id("env-done")).to_be_visible()

    # Submit: the recorder stops, uploads what is left and the full pass runs.
    page.get_by_test_id("submit").click()
    expect(page.get_by_test_id("done")).to_contain_text("Submitted", timeout=30_000)
    expect(recorder).to_have_attribute("data-transcription", "done", timeout=120_000)
    # (Assertions use words tiny.en gets reliably from espeak: it sometimes hears "button" as "them up".)
    expect(page.get_by_test_id("said-text-1")).to_contain_text("middle")
    expect(page.get_by_test_id("said-text-0")).not_to_contain_text("middle")
    page.get_by_test_id("said-1").scroll_into_view_if_needed()
    page.screenshot(path=str(shots / "thinkaloud-final.png"), full_page=True)

    recording = ThinkAloudRecording.objects.get(session=session)
    assert recording.status == "done" and recording.finished and recording.chunks.count() >= 2
    steps = list(Step.objects.filter(trajectory=session.trajectory).order_by("index"))
    assert "page" in steps[0].human_thought_verbatim.lower(), steps[0].human_thought_verbatim
    assert "middle" in steps[1].human_thought_verbatim.lower(), steps[1].human_thought_verbatim
    assert "middle" not in steps[0].human_thought_verbatim.lower(), steps[0].human_thought_verbatim
    assert all(
        steps[0].clock_start - 10 < w["start"] <= steps[0].clock_end + 1.5 for w in steps[0].human_words
    )

    # The annotator corrects the first thought in place.
    page.get_by_test_id("said-0").get_by_role("button", name="Edit the thought of step 1").click()
    page.get_by_test_id("said-edit-0").fill("I wait for the page to load.")
    page.get_by_test_id("said-0").get_by_role("button", name="Save").click()
    expect(page.get_by_test_id("said-text-0")).to_have_text("I wait for the page to load.")
    assert Step.objects.get(pk=steps[0].pk).human_thought_refined == "I wait for the page to load."

    # The reviewer plays step 2's audio: its words light up in turn.
    Review.objects.create(trajectory=session.trajectory, reviewer=users["reviewer"])
    reviewer = page.context.browser.new_page(viewport={"width": 1440, "height": 960})
    reviewer.goto(f"{base}/login/?next=/review/?t={session.trajectory_id}")
    reviewer.get_by_label("Username").fill("rev")
    reviewer.get_by_label("Password").fill(PASSWORD)
    reviewer.get_by_role("button", name="Sign in").click()
    reviewer.goto(f"{base}/review/?t={session.trajectory_id}")
    expect(reviewer.get_by_test_id("speech")).to_contain_text("edited by the annotator")
    reviewer.get_by_test_id("frame-1").click()
    expect(reviewer.get_by_test_id("speech-words")).to_contain_text("middle")
    reviewer.get_by_test_id("speech-play").click()
    reviewer.wait_for_selector(".rv-word-on", timeout=10_000)
    reviewer.screenshot(path=str(shots / "thinkaloud-review-playing.png"), full_page=True)
    reviewer.close()
    assert errors == [], errors
