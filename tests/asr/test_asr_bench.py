"""Benchmark scoring (pure) and one quick benchmark run (slow: real Whisper on ~2 minutes of audio)."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.asr import run_asr, score_alignment
from workers.asr.align import StepSpeech
from workers.asr.types import Word


def step(index: int, *texts: str, at: float = 0.0) -> StepSpeech:
    words = tuple(Word(t, at + k, at + k + 0.5, 0.9) for k, t in enumerate(texts))
    return StepSpeech(index, float(index), words)


def test_score_alignment_pairs_words_through_the_wer_alignment() -> None:
    reference = [("open", 0), ("the", 0), ("menu", 0), ("click", 1), ("save", 1)]
    # "menu" was put in step 1 (wrong), "the" was not recognised, "Save." matches "save" after
    # normalisation, and "uh" is an insertion that is not scored.
    steps = [step(0, "open", at=0.0), step(1, "menu", "click", "Save.", "uh", at=10.0)]
    score = score_alignment(steps, reference)
    assert (score.correct, score.matched, score.total) == (3, 4, 5)


@pytest.mark.slow
def test_quick_benchmark_meets_its_goals_roughly() -> None:
    figures = run_asr(quick=True)
    assert figures["sessions"] == 3 and figures["audio_s"] > 60
    assert figures["silence_words"] == 0
    assert figures["wer"] <= 0.1
    assert figures["alignment_accuracy"] >= 0.9
    assert 0 < figures["rtf_cpu"] < 0.5
    assert 0 < figures["live_chunk_cpu_s_mean"] < 10  # one 10 s chunk of the live pass


def test_hard_set_sessions_have_their_conditions() -> None:
    """The hard set's generation (espeak-ng, no model): each condition is what it says."""
    from benchmarks.asr import HARD_CONDITIONS, hard_session
    from benchmarks.harness.config import AsrBenchConfig
    from workers.asr.synth import VOICES, shipped_instructions
    from workers.asr.vocab import terms

    config = AsrBenchConfig(quick=True, sessions=4, split="validation", speech_set="hard")
    made = dict(hard_session(config, k) for k in range(4))
    assert set(made) == set(HARD_CONDITIONS)
    assert all(s.voice not in VOICES for s in made.values())
    assert made["fast"].speed_wpm >= 205
    assert (
        made["background"].background
        and made["background"].actions[-1].time > made["background"].sentences[0].end
    )
    tech = made["technical"]
    assert tech.instruction in shipped_instructions()
    assert any(term in tech.transcript for term in terms([tech.instruction]))
    clean = [s for s in made.values() if s is not made["noisy"]]
    quiet = min(float(np.mean(s.audio[:4000] ** 2)) for s in clean)
    assert float(np.mean(made["noisy"].audio[:4000] ** 2)) > quiet  # noise before the first word


def test_hard_final_test_seeds_were_never_read_before() -> None:
    """The hard set's final test moved after each of six reads; its seeds meet neither earlier final range
    (validation-grade now) nor the validation range decisions were made on."""
    from benchmarks.asr import hard_seed
    from benchmarks.harness.config import AsrBenchConfig

    final = AsrBenchConfig(quick=False, sessions=20, split="final_test", speech_set="hard")
    validation = AsrBenchConfig(quick=True, sessions=100, split="validation", speech_set="hard")
    seeds = {hard_seed(final, k) for k in range(20)}
    assert min(seeds) == 690501
    read_before = {
        7919 * k + shift for k in range(20) for shift in (90501, 190501, 290501, 390501, 490501, 590501)
    }
    assert seeds.isdisjoint(read_before | {hard_seed(validation, k) for k in range(88)})


def test_condition_intervals_resample_that_conditions_sessions_only() -> None:
    from benchmarks.asr import condition_interval

    rows = [
        {"condition": "noisy", "errors": 10, "aligned": 95, "ref_words": 100},
        {"condition": "noisy", "errors": 30, "aligned": 90, "ref_words": 100},
        {"condition": "fast", "errors": 90, "aligned": 0, "ref_words": 100},
    ]
    low, high = condition_interval(rows, "noisy", "errors")
    assert 0.1 <= low <= 0.2 <= high <= 0.3  # the fast session's 90 % never enters
    assert condition_interval(rows, "fast", "errors") == [0.9, 0.9]
    assert condition_interval(rows, "noisy", "aligned")[1] <= 0.95
