"""One call for the whole think-aloud path: uploaded chunks + action times -> per-step speech.

This is what the ASR job (Celery task, owned by the service layer) calls. Its result is plain data
(`to_dict`) ready to store: the verbatim transcript with per-word times and confidence, each step's
words, and the chunks that could not be decoded.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np

from workers.asr.align import StepSpeech, align_words, window_of
from workers.asr.audio import SAMPLE_RATE, AudioChunk, ChunkError, Timeline, build_timeline
from workers.asr.speaker import speech_to_noise_db, split_by_level
from workers.asr.transcribe import Transcriber, speech_regions
from workers.asr.types import Transcript, Word, word_json
from workers.asr.vocab import MAX_TERMS, Snap, hotwords, snap_words


@dataclass(frozen=True)
class RecordingResult:
    """Transcript of one recording on the session clock, its step alignment and chunk errors."""

    transcript: Transcript
    steps: tuple[StepSpeech, ...]
    chunk_errors: tuple[ChunkError, ...]
    audio_start_clock: float
    audio_s: float
    snaps: tuple[Snap, ...] = ()
    uncertain: tuple[Word, ...] = ()  # much quieter than the annotator: another voice (workers.asr.speaker)
    snr_db: float | None = None  # speech over the room's noise (workers.asr.speaker); None: none measured

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form (times in session-clock seconds)."""

        return {
            "model": self.transcript.model,
            "verbatim": self.transcript.text,
            "words": [word_json(w) for w in self.transcript.words],
            "dropped_words": self.transcript.dropped_words,
            "retried_spans": self.transcript.retried_spans,
            "lost_spans": self.transcript.lost_spans,
            "looped_words": self.transcript.looped_words,
            "uncertain_words": [word_json(w) for w in self.uncertain],
            "snapped": [{"said": s.said, "term": s.term} for s in self.snaps],
            "audio_start_clock": self.audio_start_clock,
            "audio_s": round(self.audio_s, 3),
            "snr_db": None if self.snr_db is None else round(self.snr_db, 1),
            "processing_s": round(self.transcript.processing_s, 3),
            "steps": [
                {
                    "step_index": s.step_index,
                    "action_time": s.action_time,
                    "final": s.is_final,
                    "verbatim": s.text,
                    "words": [word_json(w) for w in s.words],
                }
                for s in self.steps
            ],
            "chunk_errors": [
                {"index": e.index, "name": e.name, "start_clock": e.start_clock, "message": e.message}
                for e in self.chunk_errors
            ],
        }


SPAN_MAX_S = 28.0  # a decoded span stays within one of Whisper's 30 s windows


def speech_spans(regions: Sequence[tuple[float, float]], duration_s: float) -> list[tuple[float, float]]:
    """Cut [0, duration_s] into spans of at most SPAN_MAX_S of speech each (longer speech regions
    stay whole), each cut in the middle of a pause between VAD speech regions."""
    cuts = [0.0]
    first = None
    for i, (start, end) in enumerate(regions):
        if first is None:
            first = start
        elif end - first > SPAN_MAX_S:
            cuts.append((regions[i - 1][1] + start) / 2)
            first = start
    return list(zip(cuts, [*cuts[1:], duration_s], strict=True))


def _transcribe_by_span(
    timeline: Timeline,
    times: list[float],
    transcriber: Transcriber,
    step_terms: Callable[[Sequence[int]], list[str]],
    hotwords_at: Callable[[float, float], str | None],
) -> Transcript:
    """Decode the recording span by span (`speech_spans`), each span with the terms of the steps it
    covers as hotwords: as many 30 s windows as one decode of the whole recording, so the cost stays
    the same, while a long session's later steps get their own terms instead of the first 40."""
    audio, clock = timeline.audio, timeline.start_clock
    regions = speech_regions(audio, transcriber.config)
    parts: list[Transcript] = []
    for begin, end in speech_spans(regions, len(audio) / SAMPLE_RATE):
        inside = [r for r in regions if begin <= (r[0] + r[1]) / 2 < end] or [(begin, end)]
        steps = sorted({window_of(clock + (a + b) / 2, times) for a, b in inside})
        clip = audio[round(begin * SAMPLE_RATE) : round(end * SAMPLE_RATE)]
        parts.append(
            transcriber.transcribe(
                clip, offset_s=clock + begin, hotwords=hotwords(step_terms(steps)), hotwords_at=hotwords_at
            )
        )
    if not parts:
        return transcriber.transcribe(audio, offset_s=clock)
    return Transcript(
        tuple(w for p in parts for w in p.words), len(audio) / SAMPLE_RATE,
        sum(p.processing_s for p in parts), parts[0].model, sum(p.dropped_words for p in parts),
        sum(p.retried_spans for p in parts), sum(p.lost_spans for p in parts),
        sum(p.looped_words for p in parts),
    )  # fmt: skip


def transcribe_recording(
    chunks: Sequence[AudioChunk],
    action_times: Sequence[float],
    *,
    transcriber: Transcriber,
    lead_s: float = 0.5,
    lag_s: float = 1.5,
    trailing: Literal["final", "last"] = "final",
    vocabulary: Sequence[str] = (),
    step_vocabularies: Sequence[Sequence[str]] = (),
) -> RecordingResult:
    """Decode `chunks` onto the session clock, transcribe, and align words to `action_times`.

    Undecodable chunks are reported, not fatal; with no decodable chunk at all the transcript is
    empty and every step gets no speech.
    """
    return transcribe_timeline(
        build_timeline(chunks), action_times, transcriber=transcriber, lead_s=lead_s, lag_s=lag_s,
        trailing=trailing, vocabulary=vocabulary, step_vocabularies=step_vocabularies,
    )  # fmt: skip


def transcribe_timeline(
    timeline: Timeline,
    action_times: Sequence[float],
    *,
    transcriber: Transcriber,
    lead_s: float = 0.5,
    lag_s: float = 1.5,
    trailing: Literal["final", "last"] = "final",
    vocabulary: Sequence[str] = (),
    step_vocabularies: Sequence[Sequence[str]] = (),
) -> RecordingResult:
    """`transcribe_recording` for an already decoded timeline (callers that also keep the audio).

    `vocabulary`: the task's terms (workers.asr.vocab): hotwords for the decoder, then low-confidence
    near misses snapped to them (listed in `snapped`). `step_vocabularies` (one per action, optional):
    each step's own terms (what its screen showed, what it typed): the recording is decoded in spans of up to SPAN_MAX_S, each with its steps' terms as hotwords
    (`_transcribe_by_span`); a span decoded again because it came out weak gets its step's terms
    first; and each step's words are snapped again with its own terms once aligned. A term of step 3
    is not offered to step 7's words, and a long session's steps keep their terms although the
    session's whole list is longer than hotwords hold (MAX_TERMS).
    Words far quieter than the session's main speaker are not aligned to steps but kept apart as
    `uncertain`, and the recording's speech-to-noise ratio is measured (workers.asr.speaker).
    """
    if step_vocabularies and len(step_vocabularies) != len(action_times):
        raise ValueError(
            f"step_vocabularies has {len(step_vocabularies)} entries for {len(action_times)} actions"
        )
    times = list(action_times)

    def step_terms(indices: Sequence[int]) -> list[str]:
        """The steps' own terms first, then the session's, without repeats, at most MAX_TERMS."""
        found: list[str] = []
        seen: set[str] = set()
        for term in [
            *(t for i in indices if i < len(step_vocabularies) for t in step_vocabularies[i]),
            *vocabulary,
        ]:
            if term.lower() not in seen:
                seen.add(term.lower())
                found.append(term)
        return found[:MAX_TERMS]

    def hotwords_at(start: float, end: float) -> str | None:
        return hotwords(step_terms([window_of((start + end) / 2, times)]))

    if step_vocabularies:
        transcript = _transcribe_by_span(timeline, times, transcriber, step_terms, hotwords_at)
    else:
        transcript = transcriber.transcribe(
            timeline.audio, offset_s=timeline.start_clock, hotwords=hotwords(vocabulary)
        )
    words, snaps = snap_words(transcript.words, vocabulary)
    words, uncertain = split_by_level(words, timeline.audio, timeline.start_clock)
    steps = align_words(words, times, lead_s=lead_s, lag_s=lag_s, trailing=trailing)
    if step_vocabularies:
        snapped_steps = []
        for step in steps:
            if step.step_index < len(step_vocabularies) and step_vocabularies[step.step_index]:
                own, more = snap_words(step.words, step_vocabularies[step.step_index])
                step, snaps = replace(step, words=tuple(own)), snaps + more
            snapped_steps.append(step)
        steps = snapped_steps
        words = sorted((w for s in steps for w in s.words), key=lambda w: w.start)
    transcript = replace(transcript, words=tuple(words))
    snr_db = speech_to_noise_db(timeline.audio, speech_regions(timeline.audio, transcriber.config))
    return RecordingResult(
        transcript, tuple(steps), timeline.errors, timeline.start_clock, timeline.duration_s, tuple(snaps),
        tuple(uncertain), snr_db,
    )  # fmt: skip


# ---------- the live pass: one chunk at a time, as it arrives ----------

# A chunk is decoded with the last LIVE_OVERLAP_S of the chunk before it in front (when the two are
# contiguous), and the words of the overlap's second half are taken from this decode: a word cut
# by the chunk boundary is heard whole once, and the chunk's first words have their context.
# Chosen on the hard set's validation sessions (benchmarks/HISTORY.md, asr: live pass).
LIVE_OVERLAP_S = 2.0
CONTIGUOUS_S = 0.05  # chunks this close on the session clock are one stream


@dataclass(frozen=True)
class LiveChunk:
    """A chunk's live words: those with their midpoint at or after `cut` (session clock) are its own."""

    cut: float
    words: tuple[Word, ...]
    uncertain: tuple[Word, ...] = ()
    snr_db: float | None = None  # the chunk's own audio: speech over the room's noise (workers.asr.speaker)


def live_cut(
    start_clock: float, previous_end_clock: float | None, overlap_s: float = LIVE_OVERLAP_S
) -> float:
    """Where a chunk's own words begin: half the overlap before its first sample when the previous
    chunk ends where it starts (so it was decoded with that chunk's tail), else its first sample."""
    contiguous = previous_end_clock is not None and abs(previous_end_clock - start_clock) <= CONTIGUOUS_S
    return start_clock - overlap_s / 2 if contiguous and overlap_s > 0 else start_clock


def transcribe_live_chunk(
    samples: np.ndarray,
    start_clock: float,
    *,
    transcriber: Transcriber,
    previous: tuple[np.ndarray, float] | None = None,
    overlap_s: float = LIVE_OVERLAP_S,
    vocabulary: Sequence[str] = (),
) -> LiveChunk:
    """The live pass for one chunk (16 kHz samples starting at `start_clock`): decoded with the last
    `overlap_s` of `previous` (its samples and start clock) in front when that chunk ends where
    this one starts; task vocabulary as hotwords and snapping; much quieter phrases set apart and
    the chunk's speech-to-noise ratio measured (workers.asr.speaker). Keeps the words from
    `live_cut` on; `join_live_words` drops the words a later chunk took over."""
    audio, offset = samples, start_clock
    previous_end = None if previous is None else previous[1] + len(previous[0]) / SAMPLE_RATE
    cut = live_cut(start_clock, previous_end, overlap_s)
    if previous is not None and cut < start_clock:
        tail = previous[0][-round(overlap_s * SAMPLE_RATE) :]
        audio = np.concatenate([tail, samples])
        offset = start_clock - len(tail) / SAMPLE_RATE
    result = transcriber.transcribe(audio, offset_s=offset, hotwords=hotwords(vocabulary))
    words, _snaps = snap_words(result.words, vocabulary)
    words, uncertain = split_by_level(words, audio, offset)
    return LiveChunk(
        cut, tuple(w for w in words if w.midpoint >= cut), tuple(w for w in uncertain if w.midpoint >= cut),
        speech_to_noise_db(samples, speech_regions(samples, transcriber.config)),
    )  # fmt: skip


def join_live_words(chunks: Sequence[LiveChunk]) -> list[Word]:
    """The live words of a recording's chunks (in order): each chunk's words up to the next chunk's
    cut, from which on that chunk heard them (with more context)."""
    words: list[Word] = []
    for i, chunk in enumerate(chunks):
        until = chunks[i + 1].cut if i + 1 < len(chunks) else float("inf")
        words.extend(w for w in chunk.words if w.midpoint < until)
    return words
