"""One call for the whole think-aloud path: uploaded chunks + action times -> per-step speech.

This is what the ASR job (Celery task, owned by the service layer) calls. Its result is plain data
(`to_dict`) ready to store: the verbatim transcript with per-word times and confidence, each step's
words, and the chunks that could not be decoded.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from workers.asr.align import StepSpeech, align_words
from workers.asr.audio import AudioChunk, ChunkError, Timeline, build_timeline
from workers.asr.speaker import split_by_level
from workers.asr.transcribe import Transcriber
from workers.asr.types import Transcript, Word, word_json
from workers.asr.vocab import Snap, hotwords, snap_words


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

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form (times in session-clock seconds)."""

        return {
            "model": self.transcript.model,
            "verbatim": self.transcript.text,
            "words": [word_json(w) for w in self.transcript.words],
            "dropped_words": self.transcript.dropped_words,
            "retried_spans": self.transcript.retried_spans,
            "lost_spans": self.transcript.lost_spans,
            "uncertain_words": [word_json(w) for w in self.uncertain],
            "snapped": [{"said": s.said, "term": s.term} for s in self.snaps],
            "audio_start_clock": self.audio_start_clock,
            "audio_s": round(self.audio_s, 3),
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


def transcribe_recording(
    chunks: Sequence[AudioChunk],
    action_times: Sequence[float],
    *,
    transcriber: Transcriber,
    lead_s: float = 0.5,
    lag_s: float = 1.5,
    trailing: Literal["final", "last"] = "final",
    vocabulary: Sequence[str] = (),
) -> RecordingResult:
    """Decode `chunks` onto the session clock, transcribe, and align words to `action_times`.

    Undecodable chunks are reported, not fatal; with no decodable chunk at all the transcript is
    empty and every step gets no speech.
    """
    return transcribe_timeline(
        build_timeline(chunks), action_times, transcriber=transcriber, lead_s=lead_s, lag_s=lag_s,
        trailing=trailing, vocabulary=vocabulary,
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
) -> RecordingResult:
    """`transcribe_recording` for an already decoded timeline (callers that also keep the audio).

    `vocabulary`: the task's terms (workers.asr.vocab): hotwords for the decoder, then low-confidence
    near misses snapped to them (listed in `snapped`). Words far quieter than the session's main
    speaker are not aligned to steps but kept apart as `uncertain` (workers.asr.speaker).
    """
    transcript = transcriber.transcribe(
        timeline.audio, offset_s=timeline.start_clock, hotwords=hotwords(vocabulary)
    )
    words, snaps = snap_words(transcript.words, vocabulary)
    words, uncertain = split_by_level(words, timeline.audio, timeline.start_clock)
    transcript = replace(transcript, words=tuple(words))
    steps = align_words(transcript.words, action_times, lead_s=lead_s, lag_s=lag_s, trailing=trailing)
    return RecordingResult(
        transcript, tuple(steps), timeline.errors, timeline.start_clock, timeline.duration_s, tuple(snaps),
        tuple(uncertain),
    )  # fmt: skip
