"""A reviewer in Chromium sees the annotator's think-aloud as said, and another voice greyed (issue 32).

The recording is real audio through the real full pass: espeak-ng speech (the annotator naming
"LibreOffice Calc", "3.14" and "Ctrl+Shift+T", a second, other voice 12 dB down talking in the
annotator's pause),
encoded as one webm/opus chunk, stored by the upload service and transcribed by Whisper (tiny.en)
with the task's and each step's vocabulary. The reviewer opens the trajectory: the steps' word lines
read "LibreOffice Calc", "3.14" and "Ctrl+Shift+T", and the background sentence shows apart, greyed, as
another voice.
Needs the built frontend (`npm --prefix frontend run build`).
"""

from __future__ import annotations

import io
import os
import re
import time

import numpy as np
import pytest
from PIL import Image
from playwright.sync_api import Browser, Page, expect

from annotation.models import AnnotationSession, Review, ThinkAloudRecording
from annotation.thinkaloud import services, transcribe
from tests.conftest import PASSWORD
from tests.factories import TaskFactory
from webapp.store import services as store
from workers.asr.audio import SAMPLE_RATE, encode_audio
from workers.asr.synth import speak

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

INSTRUCTION = (
    "Open LibreOffice Calc, type 3.14 into cell B12, then press Ctrl+Shift+T to reopen the closed tab."
)
MAIN = (
    "now I open LibreOffice Calc from the menu",
    "and I type 3.14 into the cell",
    "now I press Ctrl+Shift+T",
)
OTHER = "did you see the football game yesterday evening"


def _png(colour: str) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (480, 300), colour).save(out, "PNG")
    return out.getvalue()


def _recording_audio() -> tuple[np.ndarray, float, float]:
    """MAIN[0], a pause holding OTHER 12 dB down, MAIN[1], a pause, MAIN[2]; and the seconds of the
    first and second actions (each in the pause after its sentence)."""
    silence = lambda s: np.zeros(round(s * SAMPLE_RATE), dtype=np.float32)  # noqa: E731
    first, second, third = (speak(text, "en-us", 160) for text in MAIN)
    other = speak(OTHER, "en-gb-scotland", 170)
    other = other * (10 ** (-12 / 20)) * np.max(np.abs(first)) / max(1e-6, float(np.max(np.abs(other))))
    audio = np.concatenate(
        [silence(0.5), first, silence(0.8), other, silence(0.8), second, silence(2.5), third, silence(1.0)]
    )
    first_action = 0.5 + len(first) / SAMPLE_RATE + 0.8 + len(other) / SAMPLE_RATE + 0.4
    second_action = first_action + 0.4 + len(second) / SAMPLE_RATE + 1.2
    return audio.astype(np.float32), first_action, second_action


def _transcribed(users, audio: np.ndarray, actions: list[float]) -> ThinkAloudRecording:
    """A submitted annotation session of three steps (a click, typing "3.14", Ctrl+Shift+T) at
    `actions` seconds into `audio`, its recording uploaded as two webm/opus chunks, each through the
    live pass, then the full pass."""
    start = 100.0
    task = TaskFactory(instruction=INSTRUCTION)
    trajectory = store.trajectory_create(task=task, source="annotation", annotator=users["annotator"])
    for colour, action, end in zip(
        ("white", "lightgrey", "grey"),
        ({"kind": "click", "point": [40, 20]}, {"kind": "type", "text": "3.14"},
         {"kind": "hotkey", "keys": ["ctrl", "shift", "t"]}),
        (start + a for a in actions), strict=True,
    ):  # fmt: skip
        store.step_append(
            trajectory=trajectory, screenshot=_png(colour), image_format="png",
            fields={"thought": "", "action": [action], "action_text": "", "clock_start": end - 1.0,
                    "clock_end": end, "coord_convention": "screen", "screen_width": 480, "screen_height": 300},
        )  # fmt: skip
    store.trajectory_finish(trajectory=trajectory, status="completed", final_reward=1.0)
    session = AnnotationSession.objects.create(
        user=users["annotator"], task=task, trajectory=trajectory, status="active",
        clock_origin=time.time() - start - 60,
    )  # fmt: skip
    half = len(audio) // 2
    for index, piece in enumerate((audio[:half], audio[half:])):
        services.chunk_upload(session=session, index=index, start_clock=start + index * half / SAMPLE_RATE,
                              data=encode_audio(piece, "webm"), content_type="audio/webm")  # fmt: skip
    recording = ThinkAloudRecording.objects.get(session=session)
    for chunk in recording.chunks.order_by("index"):
        assert transcribe.chunk_transcribe(chunk.pk)
    ThinkAloudRecording.objects.filter(pk=recording.pk).update(finished=True)
    AnnotationSession.objects.filter(pk=session.pk).update(status="submitted")
    assert transcribe.recording_transcribe(recording.pk)
    recording.refresh_from_db()
    assert recording.status == "done", recording.error
    return recording


def _review(browser: Browser, live_server, users, recording: ThinkAloudRecording) -> tuple[Page, list[str]]:
    """The reviewer signed in, on the recording's trajectory; and the page's errors as they come."""
    trajectory = recording.session.trajectory
    Review.objects.create(trajectory=trajectory, reviewer=users["reviewer"])
    page = browser.new_page(viewport={"width": 1360, "height": 1000})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"{live_server.url}/login/?next=/review/?t={trajectory.pk}")
    page.get_by_label("Username").fill("rev")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.goto(f"{live_server.url}/review/?t={trajectory.pk}")
    return page, errors


def test_reviewer_sees_terms_as_said_and_the_other_voice_greyed(browser: Browser, live_server, users) -> None:
    audio, first_action, second_action = _recording_audio()
    recording = _transcribed(users, audio, [first_action, second_action, len(audio) / SAMPLE_RATE - 0.8])
    other_words = " ".join(w["w"] for w in recording.transcript["uncertain_words"]).lower()
    assert "football" in other_words, recording.transcript

    page, errors = _review(browser, live_server, users, recording)
    page.get_by_test_id("frame-0").click()
    expect(page.get_by_test_id("speech-noisy")).to_have_count(0)  # silent pauses: a quiet room
    words = page.get_by_test_id("speech-words")
    expect(words).to_contain_text("LibreOffice Calc")
    expect(words).not_to_contain_text("football")
    other = page.get_by_test_id("speech-other-voice")
    expect(other).to_contain_text(re.compile("football", re.I))
    grey = other.evaluate("el => getComputedStyle(el).color")
    ink = words.evaluate("el => getComputedStyle(el).color")
    r, g, b = (int(v) for v in re.findall(r"\d+", grey)[:3])
    assert grey != ink and max(r, g, b) - min(r, g, b) <= 40 and 80 <= r <= 200, (grey, ink)
    page.get_by_test_id("frame-1").click()
    expect(page.get_by_test_id("speech-words")).to_contain_text("3.14")
    expect(page.get_by_test_id("speech-words")).not_to_contain_text("3 .14")
    page.get_by_test_id("frame-2").click()
    expect(page.get_by_test_id("speech-words")).to_contain_text("Ctrl+Shift+T")
    # Stored with its action but no action string: the action is shown, not "(no action)".
    expect(page.get_by_test_id("step-panel")).to_contain_text("hotkey ctrl+shift+t")
    expect(page.get_by_test_id("step-action")).to_have_count(0)
    assert errors == [], errors
    page.close()


def test_reviewer_and_annotator_are_told_the_room_was_noisy(browser: Browser, live_server, users) -> None:
    """The same think-aloud with white + pink noise 13 dB below the speech: the live pass already
    tells the annotator (the state the workspace's recorder shows), and the reviewer reads a notice
    with the measured figure above the step's words."""
    audio, first_action, second_action = _recording_audio()
    rng = np.random.default_rng(13)
    noise = rng.standard_normal(len(audio))
    speech = audio[np.abs(audio) > 1e-3]
    noise *= np.sqrt(float(np.mean(speech**2)) / 10 ** (13 / 10) / float(np.mean(noise**2)))
    noisy = (audio + noise).astype(np.float32)
    recording = _transcribed(users, noisy, [first_action, second_action, len(audio) / SAMPLE_RATE - 0.8])
    assert abs(recording.transcript["snr_db"] - 13.0) <= 2.0, recording.transcript["snr_db"]
    live = [c.snr_db for c in recording.chunks.all() if c.snr_db is not None]  # a chunk needs 1 s of pause
    assert live and all(v < 20 for v in live), live  # what the recorder showed while recording

    page, errors = _review(browser, live_server, users, recording)
    page.get_by_test_id("frame-0").click()
    notice = page.get_by_test_id("speech-noisy")
    expect(notice).to_contain_text(f"about {round(recording.transcript['snr_db'])} dB above the room's noise")
    expect(page.get_by_test_id("speech-words")).to_contain_text("LibreOffice")
    shots_dir = os.environ.get("FLYWHEEL_E2E_SCREENSHOTS")
    if shots_dir:
        page.screenshot(path=os.path.join(shots_dir, "review-noisy.png"))
    assert errors == [], errors
    page.close()
