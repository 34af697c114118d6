"""Writes of the think-aloud (issue 6): store uploaded chunks and queue their transcription, the
annotator's and reviewer's corrections, the ASR model choice. The passes themselves run in
annotation.thinkaloud.transcribe.

Two passes, both on the `asr` Celery queues:
- live: every uploaded chunk is transcribed on its own and all chunk words so far are re-aligned to
  the session's steps, so a step shows what was said for it seconds after the chunk arrives (the
  workspace cuts a chunk at every decision);
- final (`recording_finish`): the whole recording is decoded onto one session-clock timeline and
  transcribed in one go (Whisper gets the full context, no words cut at chunk edges), re-aligned,
  optionally refined by an LLM, and re-encoded as one file for review playback.

Steps the annotator edited (thought) or re-cut (moved words) keep their text through later passes.
The jobs are idempotent (each pass recomputes from the stored chunks), run with acks_late and
reject_on_worker_lost, so a worker killed mid-job loses nothing: the job is delivered again.
"""

from __future__ import annotations

import hashlib
import logging
import math
import uuid
from typing import Any, Literal

from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import transaction

from annotation.models import (
    AnnotationSession,
    AsrSettings,
    SessionStatus,
    ThinkAloudChunk,
    ThinkAloudRecording,
    ThinkAloudStatus,
)
from annotation.services.common import session_clock
from annotation.thinkaloud.selectors import ALLOWED_TYPES, session_steps
from annotation.thinkaloud.transcribe import recording_publish
from webapp.store.models import Step
from workers.asr.align import AlignmentError, StepSpeech, move_boundary
from workers.asr.types import word_json, word_of

log = logging.getLogger(__name__)

UPLOAD_STATUSES = (SessionStatus.ACTIVE, SessionStatus.SUBMITTED)


class ChunkRejected(ValueError):
    """An upload that cannot be accepted; `status` is the HTTP status to answer with."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class ThinkAloudConflict(RuntimeError):
    """The request does not fit the recording's state (nothing recorded, no such step, ...)."""


# ---------- upload ----------


def base_type(content_type: str) -> str:
    """`audio/webm;codecs=opus` -> `audio/webm`."""
    return content_type.split(";", 1)[0].strip().lower()


def recording_get_or_create(session: AnnotationSession) -> ThinkAloudRecording:
    recording, _ = ThinkAloudRecording.objects.get_or_create(session=session)
    return recording


def chunk_upload(
    *,
    session: AnnotationSession,
    index: int,
    start_clock: float,
    data: bytes,
    content_type: str,
    clock_rtt_ms: float | None = None,
) -> tuple[ThinkAloudChunk, bool]:
    """Store one chunk and queue its live transcription; returns (chunk, created).

    Idempotent by index: the same bytes at the same index again return the stored chunk (a retried
    upload after a lost response); different bytes at a used index are refused (409).
    Raises ChunkRejected with the HTTP status for anything that is not a usable chunk.
    """
    from workers.asr.audio import (  # PyAV: only when audio arrives
        AudioDecodeError,
        decode_chunk,
        probe_duration,
    )

    if session.status not in UPLOAD_STATUSES:
        raise ChunkRejected(f"session is {session.status}: it takes no more audio", 409)
    kind = base_type(content_type)
    if kind not in ALLOWED_TYPES:
        raise ChunkRejected(
            f"unsupported audio type {content_type or '(none)'!r}: send one of {', '.join(ALLOWED_TYPES)}",
            415,
        )
    if len(data) > settings.THINKALOUD_MAX_CHUNK_BYTES:
        raise ChunkRejected(
            f"chunk is {len(data)} bytes, more than the limit of {settings.THINKALOUD_MAX_CHUNK_BYTES}", 413
        )
    if index < 0 or index > 100_000:
        raise ChunkRejected(f"chunk index {index} is out of range 0..100000")
    if not math.isfinite(start_clock) or start_clock < 0:
        raise ChunkRejected(f"start_clock {start_clock} is not a session-clock second (>= 0)")
    now = session_clock(session)
    if start_clock > now + settings.THINKALOUD_CLOCK_TOLERANCE_S:
        raise ChunkRejected(
            f"start_clock {start_clock:.2f} is in the future (session clock is {now:.2f}): sync the clock"
        )
    digest = hashlib.sha256(data).hexdigest()
    existing = ThinkAloudChunk.objects.filter(recording__session=session, index=index).first()
    if existing is not None:
        if existing.sha256 == digest:
            return existing, False
        raise ChunkRejected(f"chunk {index} was already uploaded with different audio", 409)
    limit_s = settings.THINKALOUD_MAX_CHUNK_S
    declared = probe_duration(data, limit_s)  # from the container, before any audio is decoded
    if declared is not None and declared > limit_s:
        raise ChunkRejected(f"chunk lasts {declared:.0f} s, more than {limit_s:.0f} s", 413)
    try:
        samples = decode_chunk(data)
    except AudioDecodeError as exc:
        raise ChunkRejected(f"not playable audio: {exc}") from exc
    duration = len(samples) / 16_000
    if duration > limit_s:  # a container that understated its length
        raise ChunkRejected(f"chunk lasts {duration:.0f} s, more than {limit_s:.0f} s", 413)
    ext = {"audio/webm": "webm", "audio/ogg": "ogg"}.get(kind, "wav")
    name = default_storage.save(
        f"thinkaloud/s{session.pk}/{index:05d}-{uuid.uuid4().hex[:6]}.{ext}", ContentFile(data)
    )
    recording = recording_get_or_create(session)  # only once the bytes are known to be audio
    with transaction.atomic():
        recording = ThinkAloudRecording.objects.select_for_update().get(pk=recording.pk)
        existing = recording.chunks.filter(index=index).first()
        if existing is not None:  # a concurrent retry of the same upload won the race
            default_storage.delete(name)
            if existing.sha256 != digest:
                raise ChunkRejected(f"chunk {index} was already uploaded with different audio", 409)
            return existing, False
        chunk = ThinkAloudChunk.objects.create(
            recording=recording, index=index, start_clock=start_clock, duration_s=round(duration, 3),
            file=name, content_type=kind, size=len(data), sha256=digest,
        )  # fmt: skip
        fields = ["updated_at"]
        if clock_rtt_ms is not None and math.isfinite(clock_rtt_ms):
            recording.clock_rtt_ms = clock_rtt_ms
            fields.append("clock_rtt_ms")
        if recording.status in (ThinkAloudStatus.DONE, ThinkAloudStatus.FAILED) and not recording.finished:
            recording.status = ThinkAloudStatus.RECORDING
            fields.append("status")
        recording.save(update_fields=fields)
        transaction.on_commit(lambda: _enqueue("transcribe_chunk", chunk.pk))
        if recording.finished:  # audio after the end: redo the full pass with it
            transaction.on_commit(lambda: recording_finish(session=session))
    return chunk, True


def _enqueue(task: str, arg: int) -> None:
    """Live chunks go to THINKALOUD_LIVE_QUEUE, served ahead of the full passes (THINKALOUD_QUEUE):
    an annotator's words never wait behind another's whole recording."""
    from annotation import tasks

    queue = settings.THINKALOUD_LIVE_QUEUE if task == "transcribe_chunk" else settings.THINKALOUD_QUEUE
    getattr(tasks, task).apply_async((arg,), queue=queue)


def recording_finish(*, session: AnnotationSession) -> ThinkAloudRecording:
    """The annotator stopped recording: queue the full pass over the whole recording."""
    with transaction.atomic():
        recording = ThinkAloudRecording.objects.select_for_update().filter(session=session).first()
        if recording is None or not recording.chunks.exists():
            raise ThinkAloudConflict("nothing was recorded in this session")
        recording.finished = True
        recording.status = ThinkAloudStatus.QUEUED
        recording.attempts = 0
        recording.error = ""
        recording.save(update_fields=["finished", "status", "attempts", "error", "updated_at"])
        pk = recording.pk
        transaction.on_commit(lambda: _enqueue("transcribe_recording", pk))
    recording_publish(recording)
    return recording


# ---------- transcription (runs on the asr worker) ----------


class AsrModelRejected(ValueError):
    """The model an admin chose is unknown, not installed, or its files fail their pinned digests."""


def asr_model_check(model: str) -> None:
    """Refuse (AsrModelRejected) a model that is not a name of workers.asr.models.MODELS or cannot
    load here: its package missing or a file not matching its pinned SHA-256."""
    from workers.asr.models import MODELS, ModelUnavailable, model_path

    if model not in MODELS:
        raise AsrModelRejected(f"model must be one of {', '.join(MODELS)}, got {model!r}")
    try:
        model_path(model)
    except ModelUnavailable as exc:
        raise AsrModelRejected(str(exc)) from None


def asr_model_set(*, model: str, user: Any) -> AsrSettings:
    """Make `model` the think-aloud model of every ASR worker from their next job on, once
    `asr_model_check` passes (so a bad choice is refused before any recording depends on it)."""
    asr_model_check(model)
    row, _ = AsrSettings.objects.update_or_create(pk=1, defaults={"model": model, "updated_by": user})
    log.info("think-aloud ASR model set to %s by %s", model, getattr(user, "username", user))
    return row


# ---------- the annotator's and reviewer's corrections ----------


def _step(session: AnnotationSession, step_index: int) -> Step:
    step = next((s for s in session_steps(session) if s.index == step_index), None)
    if step is None:
        raise ThinkAloudConflict(f"session {session.pk} has no step {step_index}")
    return step


def step_thought_edit(*, session: AnnotationSession, step_index: int, text: str) -> Step:
    """The annotator's own wording of a step's thought: stored as the refined thought, marked as
    theirs; later passes leave the step alone. The verbatim words are kept."""
    with transaction.atomic():
        recording = ThinkAloudRecording.objects.select_for_update().get(
            pk=recording_get_or_create(session).pk
        )
        step = _step(session, step_index)
        step.human_thought_refined = text.strip()
        step.save(update_fields=["human_thought_refined"])
        recording.step_meta[str(step_index)] = {
            **recording.step_meta.get(str(step_index), {}), "edited": True, "refined_by": "annotator",
        }  # fmt: skip
        recording.save(update_fields=["step_meta", "updated_at"])
    recording_publish(recording)
    return step


def step_words_move(
    *, session: AnnotationSession, step_index: int, direction: Literal["previous", "next"], count: int = 1
) -> list[Step]:
    """Move `count` boundary words of a step to its neighbour (workers.asr.align.move_boundary)."""
    with transaction.atomic():
        recording = ThinkAloudRecording.objects.select_for_update().get(
            pk=recording_get_or_create(session).pk
        )
        steps = session_steps(session)
        pos = next((i for i, s in enumerate(steps) if s.index == step_index), None)
        if pos is None:
            raise ThinkAloudConflict(f"session {session.pk} has no step {step_index}")
        speech = [StepSpeech(s.index, s.clock_end, tuple(word_of(d) for d in s.human_words)) for s in steps]
        try:
            moved = move_boundary(speech, step_index=pos, direction=direction, count=count)
        except AlignmentError as exc:
            raise ThinkAloudConflict(str(exc)) from exc
        target = pos + (1 if direction == "next" else -1)
        for p in (pos, target):
            steps[p].human_words = [word_json(w) for w in moved[p].words]
            steps[p].human_thought_verbatim = moved[p].text
            key = str(steps[p].index)
            recording.step_meta[key] = {**recording.step_meta.get(key, {}), "moved": True}
        Step.objects.bulk_update([steps[pos], steps[target]], ["human_words", "human_thought_verbatim"])
        recording.save(update_fields=["step_meta", "updated_at"])
    recording_publish(recording)
    return [steps[pos], steps[target]]
