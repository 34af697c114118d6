"""Whose voice: keep the annotator's words, set aside the room's (issue 32).

The annotator speaks into their own microphone; another person in the room reaches it much quieter.
Each phrase's level (RMS in dB over its span; a phrase ends at a sentence end or a pause) is
compared with the session's main level (the word-weighted median of phrase levels, which the
annotator's own speech dominates): a phrase more than `margin_db` quieter is marked uncertain. Uncertain words are not aligned to steps (they are no
thought of the annotator's); the transcript keeps them apart for the reviewer, shown greyed.

Only level consistency: no speaker-embedding model ships with the project's packages (faster-whisper
has Silero VAD only), so a background voice as loud as the annotator's is not told apart.

How noisy the room is (`speech_to_noise_db`): the speech's power over the noise floor between the
speech, so the annotator and the reviewer are told when Whisper is likely to mishear (it does, below
about 20 dB: benchmarks/HISTORY.md, asr).
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


NOISE_FRAME_S = 0.02
MIN_MEASURED_S = 1.0  # at least this much speech and this much noise between it, or no figure
DIGITAL_SILENCE = 1e-10  # mean power of a frame that holds no room noise at all (zeros, gaps)


def speech_to_noise_db(audio: np.ndarray, regions: Sequence[tuple[float, float]]) -> float | None:
    """Signal-to-noise ratio in dB: the mean power of the 20 ms frames inside the speech `regions`
    (seconds into `audio`, from the VAD), less the noise, over the noise floor (the median power of
    the frames outside every region; a median, so a cough or an undetected word does not raise it).
    None when there is under MIN_MEASURED_S of either, or the gaps are digital silence (nothing to
    measure: no room noise reached the recording)."""
    size = round(NOISE_FRAME_S * SAMPLE_RATE)
    n = len(audio) // size
    if n == 0:
        return None
    power = np.mean(audio[: n * size].astype(np.float64).reshape(n, size) ** 2, axis=1)
    inside = np.zeros(n, dtype=bool)
    for start, end in regions:
        first, last = int(start * SAMPLE_RATE) // size, int(np.ceil(end * SAMPLE_RATE / size))
        inside[max(0, first) : max(0, last)] = True
    noise = power[~inside]
    noise = noise[noise > DIGITAL_SILENCE]
    speech = power[inside]
    enough = round(MIN_MEASURED_S / NOISE_FRAME_S)
    if noise.size < enough or speech.size < enough:
        return None
    floor = float(np.median(noise))
    return float(10 * np.log10(max(float(np.mean(speech)) - floor, DIGITAL_SILENCE) / floor))
