"""Whose voice: keep the annotator's words, set aside the room's (issue 32).

The annotator speaks into their own microphone; another person in the room reaches it much quieter.
Each phrase's level (RMS in dB over its span; a phrase ends at a sentence end or a pause) is
compared with the session's main level (the word-weighted median of phrase levels, which the
annotator's own speech dominates): a phrase more than `margin_db` quieter is marked uncertain. Uncertain words are not aligned to steps (they are no
thought of the annotator's); the transcript keeps them apart for the reviewer, shown greyed.

Only level consistency: no speaker-embedding model ships with the project's packages (faster-whisper
has Silero VAD only), so a background voice as loud as the annotator's is not told apart.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from workers.asr.audio import SAMPLE_RATE
from workers.asr.types import Word

MARGIN_DB = 6.0  # the background speaker of the hard benchmark set is 12 dB down
PHRASE_GAP_S = 0.3


def word_level_db(word: Word, audio: np.ndarray, start_clock: float) -> float:
    """RMS level in dB (full scale) of the audio under `word` (session-clock times)."""
    begin = max(0, round((word.start - start_clock) * SAMPLE_RATE))
    end = min(len(audio), max(begin + 1, round((word.end - start_clock) * SAMPLE_RATE)))
    clip = audio[begin:end]
    if clip.size == 0:
        return -120.0
    return float(10 * np.log10(float(np.mean(clip.astype(np.float64) ** 2)) + 1e-12))


def phrases(words: Sequence[Word], gap_s: float = PHRASE_GAP_S) -> list[list[Word]]:
    """Runs of words: a run ends at a sentence end or a pause of at least `gap_s`."""
    runs: list[list[Word]] = []
    for word in words:
        if runs and not runs[-1][-1].text.endswith((".", "?", "!")) and word.start - runs[-1][-1].end < gap_s:
            runs[-1].append(word)
        else:
            runs.append([word])
    return runs


def span_level_db(start: float, end: float, audio: np.ndarray, start_clock: float) -> float:
    """RMS level in dB (full scale) of the audio between two session-clock seconds."""
    return word_level_db(Word("", start, end, 1.0), audio, start_clock)


def split_by_level(
    words: Sequence[Word], audio: np.ndarray, start_clock: float, margin_db: float = MARGIN_DB
) -> tuple[list[Word], list[Word]]:
    """(the main speaker's words, uncertain words): a phrase whose level is more than `margin_db`
    below the main level (the word-weighted median of phrase levels) is uncertain as a whole
    (single words are too short to measure a voice's level reliably)."""
    runs = phrases(words)
    if len(words) < 4 or len(runs) < 2:  # too little speech to know the main level: keep it all
        return list(words), []
    levels = [span_level_db(run[0].start, run[-1].end, audio, start_clock) for run in runs]
    weighted = sorted(level for level, run in zip(levels, runs, strict=True) for _ in run)
    main = weighted[len(weighted) // 2]
    kept: list[Word] = []
    quiet: list[Word] = []
    for level, run in zip(levels, runs, strict=True):
        (kept if level >= main - margin_db else quiet).extend(run)
    return kept, quiet
