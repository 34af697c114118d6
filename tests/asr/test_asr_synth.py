"""The espeak-ng think-aloud generator and its ground truth."""

from __future__ import annotations

import json
import wave
from pathlib import Path

import numpy as np

from workers.asr.audio import SAMPLE_RATE, decode_chunk
from workers.asr.synth import generate_session, write_session


def test_sessions_are_deterministic_and_consistent() -> None:
    a = generate_session(seed=5, n_steps=5)
    b = generate_session(seed=5, n_steps=5)
    assert np.array_equal(a.audio, b.audio) and a.actions == b.actions and a.sentences == b.sentences
    assert a.audio.dtype == np.float32 and np.abs(a.audio).max() <= 1.0
    times = a.action_times
    assert times == sorted(times) and [x.step for x in a.actions] == list(range(5))
    assert all(a.start_clock <= s.start < s.end <= a.start_clock + a.duration_s for s in a.sentences)
    assert {s.step for s in a.sentences} <= set(range(6))  # step 5 is the trailing bucket
    assert a.transcript.split()[0].lower() == a.reference_words()[0][0]


def test_ground_truth_follows_the_narration_modes() -> None:
    """Over a few seeds: every mode occurs, and each sentence sits where its mode says."""
    straddling = leading = 0
    for seed in range(3):
        session = generate_session(seed=seed, n_steps=8)
        for sentence in session.sentences:
            if sentence.step >= len(session.actions):
                assert sentence.start > session.action_times[-1]  # closing remark after the last action
                continue
            action = session.action_times[sentence.step]
            previous = session.action_times[sentence.step - 1] if sentence.step else float("-inf")
            assert sentence.end > previous  # never entirely before the previous action
            straddling += sentence.start < action < sentence.end
            leading += sentence.start < previous
    assert straddling > 0 and leading > 0


def test_session_files_are_16k_mono_wav_and_json_ground_truth(tmp_path: Path) -> None:
    session = generate_session(seed=2, n_steps=2)
    path, meta_path = write_session(session, tmp_path, "s")
    meta = json.loads(meta_path.read_text())
    assert [a["time"] for a in meta["actions"]] == session.action_times
    assert [tuple(x) for x in meta["reference_words"]] == session.reference_words()
    assert meta["transcript"] == session.transcript
    with wave.open(str(path)) as f:
        assert (f.getframerate(), f.getnchannels(), f.getnframes()) == (SAMPLE_RATE, 1, len(session.audio))
    assert len(decode_chunk(path)) == len(session.audio)
