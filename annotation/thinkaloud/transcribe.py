"""The think-aloud's transcription passes, run by the `asr` Celery tasks (annotation.tasks) that the
think-aloud services enqueue (annotation.thinkaloud.services, whose docstring describes the two
passes): below those services, so a task never imports them back.

- live (`chunk_transcribe`): one uploaded chunk transcribed on its own, then every live word
  re-aligned to the session's steps;
- final (`recording_transcribe`): the whole recording on one session-clock timeline, re-aligned,
  optionally refined by an LLM, re-encoded as one file for review playback.

Steps the annotator edited (thought) or re-cut (moved words) keep their text through later passes.
"""

from __future__ import annotations

import math
import time
import uuid
from dataclasses import replace
from typing import Any

from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import transaction

from annotation import events
from annotation.models import AnnotationSession, ThinkAloudChunk, ThinkAloudRecording, ThinkAloudStatus
from annotation.thinkaloud.selectors import (
    asr_model_name,
    session_steps,
    session_vocabulary,
    step_vocabularies,
    thinkaloud_state,
)
from webapp.store.models import Step
from workers.asr.align import StepSpeech, align_words
from workers.asr.types import Word, word_json, word_of


def transcriber(*, live: bool = False) -> Any:
    """The configured Whisper (loaded once per worker process; see workers.asr.transcribe). `live`
    (a chunk while the annotator works): greedy decoding (THINKALOUD_LIVE_BEAM_SIZE) and no second
    decode of weak speech, so a transcript shows in seconds; the full pass decodes everything again
    with the full settings when the recording ends."""
    from workers.asr.models import model_path
    from workers.asr.transcribe import Transcriber, TranscriberConfig

    config = TranscriberConfig(
        model_path=model_path(asr_model_name()),
        device=settings.THINKALOUD_DEVICE,
        compute_type=settings.THINKALOUD_COMPUTE_TYPE,
    )
    if live:
        config = replace(config, beam_size=settings.THINKALOUD_LIVE_BEAM_SIZE, redecode_weak=False)
    return Transcriber(config)


def action_times(steps: list[Step]) -> list[float]:
    """Each step's action time on the session clock, made non-decreasing (a missing time takes the
    previous step's)."""
    times: list[float] = []
    last = -math.inf
    for step in steps:
        t = step.clock_end if step.clock_end is not None else step.clock_start
        t = last if t is None else max(float(t), last)
        times.append(t if math.isfinite(t) else 0.0)
        last = times[-1]
    return times


def _align(words: list[Word], steps: list[Step]) -> list[StepSpeech]:
    return align_words(
        words, action_times(steps), lead_s=settings.THINKALOUD_LEAD_S, lag_s=settings.THINKALOUD_LAG_S
    )


def _store_steps(
    recording: ThinkAloudRecording, steps: list[Step], speech: list[StepSpeech], refined: dict[int, Any]
) -> None:
    """Write aligned words to the steps; edited or re-cut steps are left as the annotator made them."""
    changed = []
    for pos, step in enumerate(steps):
        meta = recording.step_meta.get(str(step.index), {})
        if meta.get("edited") or meta.get("moved"):
            continue
        said = speech[pos]
        step.human_words = [word_json(w) for w in said.words]
        step.human_thought_verbatim = said.text
        thought = refined.get(pos)
        if thought is not None:
            step.human_thought_refined = thought.text if thought.refined else ""
            recording.step_meta[str(step.index)] = {
                "refined_by": f"llm:{thought.model}" if thought.refined else "",
                **({"refine_error": thought.error} if thought.error else {}),
            }
        changed.append(step)
    Step.objects.bulk_update(changed, ["human_words", "human_thought_verbatim", "human_thought_refined"])


def _previous_chunk_audio(chunk: ThinkAloudChunk) -> tuple[Any, float] | None:
    """The samples and start clock of the chunk uploaded before `chunk` (None: none, or undecodable)."""
    from workers.asr.audio import AudioDecodeError, decode_chunk

    previous = ThinkAloudChunk.objects.filter(recording_id=chunk.recording_id, index=chunk.index - 1).first()
    if previous is None or not previous.file:
        return None
    try:
        with previous.file.open("rb") as fh:
            return decode_chunk(fh.read()), previous.start_clock
    except AudioDecodeError:
        return None


def chunk_transcribe(chunk_id: int) -> bool:
    """Live pass for one chunk: transcribe it (with the previous chunk's last
    THINKALOUD_LIVE_OVERLAP_S in front), then re-align every live word to the steps."""
    from workers.asr.audio import AudioDecodeError, decode_chunk
    from workers.asr.pipeline import LiveChunk, join_live_words, transcribe_live_chunk

    chunk = ThinkAloudChunk.objects.select_related("recording__session").filter(pk=chunk_id).first()
    if chunk is None:
        return False
    if not chunk.transcribed:
        try:
            with chunk.file.open("rb") as fh:
                samples = decode_chunk(fh.read())
            session = chunk.recording.session
            vocabulary = session_vocabulary(session, until_clock=chunk.start_clock + len(samples) / 16_000)
            live = transcribe_live_chunk(
                samples, chunk.start_clock, transcriber=transcriber(live=True),
                previous=_previous_chunk_audio(chunk) if settings.THINKALOUD_LIVE_OVERLAP_S > 0 else None,
                overlap_s=settings.THINKALOUD_LIVE_OVERLAP_S, vocabulary=vocabulary,
            )  # fmt: skip
            chunk.words, chunk.live_cut = [word_json(w) for w in live.words], live.cut
            chunk.snr_db = None if live.snr_db is None else round(live.snr_db, 1)
            chunk.error = ""
        except AudioDecodeError as exc:
            chunk.words, chunk.live_cut, chunk.snr_db, chunk.error = [], None, None, str(exc)
        chunk.transcribed = True
        chunk.save(update_fields=["words", "live_cut", "snr_db", "error", "transcribed"])
    with transaction.atomic():
        recording = ThinkAloudRecording.objects.select_for_update().get(pk=chunk.recording_id)
        if recording.finished:  # the full pass owns the steps now
            return True
        session = recording.session
        words = join_live_words(
            [
                LiveChunk(
                    c.start_clock if c.live_cut is None else c.live_cut, tuple(word_of(d) for d in c.words)
                )
                for c in recording.chunks.filter(transcribed=True)
            ]
        )
        steps = session_steps(session)
        _store_steps(recording, steps, _align(words, steps), {})
        recording.save(update_fields=["step_meta", "updated_at"])
    recording_publish(recording)
    return True


def _refine(speech: list[StepSpeech], instruction: str) -> dict[int, Any]:
    if not (settings.THINKALOUD_REFINE_BASE_URL and settings.THINKALOUD_REFINE_MODEL):
        return {}
    from workers.asr.refine import RefineConfig, Refiner

    config = RefineConfig(
        base_url=settings.THINKALOUD_REFINE_BASE_URL,
        model=settings.THINKALOUD_REFINE_MODEL,
        api_key=settings.THINKALOUD_REFINE_API_KEY or None,
    )
    with Refiner(config) as refiner:
        return {
            pos: refiner.refine_or_verbatim(s.text, context=instruction)
            for pos, s in enumerate(speech)
            if not s.is_final
        }


def recording_transcribe(recording_id: int) -> bool:
    """Full pass over the whole recording (see module docstring). False when it gave up."""
    from workers.asr.audio import AudioChunk, build_timeline, encode_audio
    from workers.asr.pipeline import transcribe_timeline

    with transaction.atomic():
        recording = ThinkAloudRecording.objects.select_for_update().filter(pk=recording_id).first()
        if recording is None:
            return False
        recording.attempts += 1
        if recording.attempts > settings.THINKALOUD_MAX_ATTEMPTS:
            recording.status = ThinkAloudStatus.FAILED
            recording.error = f"gave up after {recording.attempts - 1} attempts"
            recording.save(update_fields=["status", "error", "attempts", "updated_at"])
            recording_publish(recording)
            return False
        recording.status = ThinkAloudStatus.RUNNING
        recording.save(update_fields=["status", "attempts", "updated_at"])
    recording_publish(recording)
    started = time.perf_counter()
    session = recording.session
    chunks = []
    for c in recording.chunks.order_by("index"):
        with c.file.open("rb") as fh:
            chunks.append(AudioChunk(fh.read(), c.start_clock, f"chunk {c.index}"))
    timeline = build_timeline(chunks)
    steps = session_steps(session)
    result = transcribe_timeline(
        timeline, action_times(steps), transcriber=transcriber(),
        lead_s=settings.THINKALOUD_LEAD_S, lag_s=settings.THINKALOUD_LAG_S,
        vocabulary=session_vocabulary(session), step_vocabularies=step_vocabularies(steps),
    )  # fmt: skip
    speech = list(result.steps)
    refined = _refine(speech, session.current_instruction or session.task.instruction)
    audio_name = ""
    if timeline.audio.size:
        audio_name = default_storage.save(
            f"thinkaloud/s{session.pk}/recording-{uuid.uuid4().hex[:6]}.ogg",
            ContentFile(encode_audio(timeline.audio, "ogg", bit_rate=32_000)),
        )
    with transaction.atomic():
        recording = ThinkAloudRecording.objects.select_for_update().get(pk=recording_id)
        steps = session_steps(session)  # steps cannot change after submit, but re-read under the lock
        _store_steps(recording, steps, speech, refined)
        old_audio = recording.audio.name if recording.audio else ""
        recording.audio = audio_name
        recording.audio_start_clock = result.audio_start_clock
        recording.audio_s = round(result.audio_s, 3)
        recording.transcript = result.to_dict()
        recording.processing_s = round(time.perf_counter() - started, 3)
        recording.status = ThinkAloudStatus.DONE
        errors = result.to_dict()["chunk_errors"]
        recording.error = "; ".join(f"{e['name']}: {e['message']}" for e in errors)
        recording.save()
    if old_audio and old_audio != audio_name:
        default_storage.delete(old_audio)
    recording_publish(recording)
    return True


def recording_failed(recording_id: int, error: str) -> None:
    """The full pass raised and will not be retried: say so, keep the audio for a later retry."""
    ThinkAloudRecording.objects.filter(pk=recording_id).update(
        status=ThinkAloudStatus.FAILED, error=error[:2000]
    )
    recording = ThinkAloudRecording.objects.filter(pk=recording_id).first()
    if recording is not None:
        recording_publish(recording)


def recording_publish(recording: ThinkAloudRecording) -> None:
    session = AnnotationSession.objects.select_related("task").get(pk=recording.session_id)
    payload = events.thinkaloud_payload(thinkaloud_state(session))
    transaction.on_commit(lambda: events.publish(session.pk, payload))
