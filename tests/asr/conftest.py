"""ASR fixtures: one real Whisper model per test session, one generated think-aloud session."""

from __future__ import annotations

import pytest

from workers.asr.synth import SynthSession, generate_session
from workers.asr.transcribe import Transcriber


@pytest.fixture(scope="session")
def transcriber() -> Transcriber:
    """The default transcriber (bundled tiny.en, int8, CPU), loaded once."""
    return Transcriber()


@pytest.fixture(scope="session")
def think_aloud() -> SynthSession:
    """A ~30 s espeak-ng session with straddling and leading speech and a closing remark."""
    return generate_session(seed=11, n_steps=6, voice="en-us", speed_wpm=155, start_clock=1234.5)
