"""Whose voice (issue 32): a second, quieter speaker in the annotator's pauses is not filed as the
annotator's thoughts; real Whisper (tiny.en) on espeak-ng speech."""

from __future__ import annotations

import numpy as np

from benchmarks.asr import background_filed, hypothesis_tokens
from workers.asr.audio import SAMPLE_RATE, build_timeline
from workers.asr.pipeline import transcribe_timeline
from workers.asr.speaker import split_by_level
from workers.asr.synth import add_background_speaker, generate_session, split_into_chunks
from workers.asr.transcribe import Transcriber
from workers.asr.types import Word
from workers.asr.wer import word_error_counts


def test_quiet_words_are_set_apart_by_level() -> None:
    t = np.arange(4 * SAMPLE_RATE) / SAMPLE_RATE
    audio = (0.3 * np.sin(2 * np.pi * 200 * t)).astype(np.float32)
    audio[2 * SAMPLE_RATE : 3 * SAMPLE_RATE] *= 0.2  # 14 dB down
    words = [
        Word(f"w{i}" + ("." if i in (3, 5) else ""), 10.0 + i * 0.5, 10.0 + i * 0.5 + 0.4, 0.9)
        for i in range(8)
    ]
    kept, quiet = split_by_level(words, audio, 10.0)
    assert [w.text for w in quiet] == ["w4", "w5."]  # the quiet phrase as a whole
    assert len(kept) == 6


def test_a_background_voice_is_not_filed_as_thoughts(transcriber: Transcriber) -> None:
    clean = generate_session(seed=21, n_steps=5, voice="en-us", speed_wpm=160, start_clock=300.0)
    session = add_background_speaker(clean, -12.0, 21, "en-gb-scotland")
    assert len(session.background) >= 2  # the premise: the other voice speaks in several pauses
    timeline = build_timeline(split_into_chunks(session, 10.0, ("webm",)))
    result = transcribe_timeline(timeline, session.action_times, transcriber=transcriber)
    reference = session.reference_words()
    assert background_filed(result.steps, session) <= 0.05 * len(reference)
    counts = word_error_counts([t for t, _ in reference], [t for t, _ in hypothesis_tokens(result.steps)])
    assert counts.wer <= 0.15, [s.text for s in result.steps]
    assert result.uncertain, "the other voice's words are kept apart for the reviewer"
    assert all({"w", "start", "end", "p"} == set(w) for w in result.to_dict()["uncertain_words"])
    # Without the level split the same words would be filed under steps (what issue 32 saw).
    from workers.asr.align import align_words

    unsplit = align_words([*result.transcript.words, *result.uncertain], session.action_times)
    assert background_filed(unsplit, session) > 0.05 * len(reference)
