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
import re
import time

import numpy as np
import pytest
from PIL import Image
from playwright.sync_api import Browser, expect

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


def test_reviewer_sees_terms_as_said_and_the_other_voice_greyed(browser: Browser, live_server, users) -> None:
    audio, first_action, second_action = _recording_audio()
    start = 100.0
    task = TaskFactory(instruction=INSTRUCTION)
    trajectory = store.trajectory_create(task=task, source="annotation", annotator=users["annotator"])
    for colour, action, end in [
        ("white", {"kind": "click", "point": [40, 20]}, start + first_action),
        ("lightgrey", {"kind": "type", "text": "3.14"}, start + second_action),
        ("grey", {"kind": "hotkey", "keys": ["ctrl", "shift", "t"]}, start + len(audio) / SAMPLE_RATE - 0.8),
    ]:  # fmt: skip
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
    services.chunk_upload(session=session, index=0, start_clock=start, data=encode_audio(audio, "webm"),
                          content_type="audio/webm")  # fmt: skip
    recording = ThinkAloudRecording.objects.get(session=session)
    ThinkAloudRecording.objects.filter(pk=recording.pk).update(finished=True)
    AnnotationSession.objects.filter(pk=session.pk).update(status="submitted")
    assert transcribe.recording_transcribe(recording.pk)
    recording.refresh_from_db()
    assert recording.status == "done", recording.error
    other_words = " ".join(w["w"] for w in recording.transcript["uncertain_words"]).lower()
    assert "football" in other_words, recording.transcript

    Review.objects.create(trajectory=trajectory, reviewer=users["reviewer"])
    page = browser.new_page(viewport={"width": 1360, "height": 1000})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"{live_server.url}/login/?next=/review/?t={trajectory.pk}")
    page.get_by_label("Username").fill("rev")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.goto(f"{live_server.url}/review/?t={trajectory.pk}")
    page.get_by_test_id("frame-0").click()
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
