"""Whose voice: keep the annotator's words, set aside the room's (issue 32).

The annotator speaks into their own microphone; another person in the room reaches it much quieter.
Each word's level (RMS in dB over its span in the audio) is compared with the session's main level
(the median level of its words, which the annotator's own dominate): a word more than
`margin_db` quieter is marked uncertain. Uncertain words are not aligned to steps (they are no
thought of the annotator's); the transcript keeps them apart for the reviewer, shown greyed.

Only level consistency: no speaker-embedding model ships with the project's packages (faster-whisper
has Silero VAD only), so a background voice as loud as the annotator's is not told apart.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from workers.asr.audio import SAMPLE_RATE
from workers.asr.types import Word

MARGIN_DB = 8.0  # the background speaker of the hard benchmark set is 12 dB down


def word_level_db(word: Word, audio: np.ndarray, start_clock: float) -> float:
    """RMS level in dB (full scale) of the audio under `word` (session-clock times)."""
    begin = max(0, round((word.start - start_clock) * SAMPLE_RATE))
    end = min(len(audio), max(begin + 1, round((word.end - start_clock) * SAMPLE_RATE)))
    clip = audio[begin:end]
    if clip.size == 0:
        return -120.0
    return float(10 * np.log10(float(np.mean(clip.astype(np.float64) ** 2)) + 1e-12))


def split_by_level(
    words: Sequence[Word], audio: np.ndarray, start_clock: float, margin_db: float = MARGIN_DB
) -> tuple[list[Word], list[Word]]:
    """(the main speaker's words, uncertain words) by level against the median word level."""
    if len(words) < 4:  # too few words to know the main level: keep them all
        return list(words), []
    levels = [word_level_db(w, audio, start_clock) for w in words]
    main = float(np.median(levels))
    kept = [w for w, level in zip(words, levels, strict=True) if level >= main - margin_db]
    quiet = [w for w, level in zip(words, levels, strict=True) if level < main - margin_db]
    return kept, quiet
