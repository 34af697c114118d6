"""Reads of the think-aloud: the recording's state as the workspace and the review screen draw it."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from annotation.models import AnnotationSession, AsrSettings, ThinkAloudChunk, ThinkAloudRecording
from annotation.services.common import session_clock
from webapp.store.models import Step

ALLOWED_TYPES = ("audio/webm", "audio/ogg", "audio/wav", "audio/x-wav", "audio/wave", "audio/vnd.wave")


def asr_model_name() -> str:
    """The Whisper model think-aloud uses now: the admins' choice (AsrSettings), else the deploy's
    THINKALOUD_MODEL_PATH, else tiny.en."""
    chosen = AsrSettings.objects.filter(pk=1).values_list("model", flat=True).first()
    return chosen or settings.THINKALOUD_MODEL_PATH or "tiny.en"


def asr_models_state() -> dict[str, Any]:
    """What admins choose between: each named model with its measured cost and whether it is
    installed here, and the one in use."""
    from workers.asr.models import MODELS, installed

    row = AsrSettings.objects.filter(pk=1).first()
    return {
        "model": asr_model_name(),
        "chosen": row.model if row is not None else "",
        "deploy_default": settings.THINKALOUD_MODEL_PATH or "tiny.en",
        "updated_at": row.updated_at.isoformat() if row is not None else None,
        "models": [
            {
                "name": m.name,
                "packages": m.packages,
                "size_mb": m.size_mb,
                "rtf_wall": m.rtf_wall,
                "rtf_cpu": m.rtf_cpu,
                "note": m.note,
                "installed": installed(m.name),
            }
            for m in MODELS.values()
        ],
    }


def recording_of(session: AnnotationSession) -> ThinkAloudRecording | None:
    return ThinkAloudRecording.objects.filter(session=session).first()


def session_steps(session: AnnotationSession) -> list[Step]:
    if not session.trajectory_id:
        return []
    return list(Step.objects.filter(trajectory_id=session.trajectory_id).order_by("index"))


def step_texts(step: Step) -> list[str]:
    """What a step puts on screen or types: its element texts (the observation the annotator saw),
    typed text and key combinations ("ctrl+shift+t" as "Ctrl+Shift+T")."""
    texts: list[str] = []
    for action in step.action if isinstance(step.action, list) else []:
        if isinstance(action, dict):
            if isinstance(action.get("text"), str):
                texts.append(action["text"])
            keys = action.get("keys")
            if isinstance(keys, list) and len(keys) > 1 and all(isinstance(k, str) for k in keys):
                texts.append("+".join(k[:1].upper() + k[1:] for k in keys))
    elements = (step.rl or {}).get("elements") if isinstance(step.rl, dict) else None
    for element in elements if isinstance(elements, list) else []:
        if isinstance(element, dict) and isinstance(element.get("text"), str):
            texts.append(element["text"][:200])
    return texts


def session_vocabulary(session: AnnotationSession, until_clock: float | None = None) -> list[str]:
    """The words the annotator is likely to say (workers.asr.vocab.terms): the task instruction,
    then the texts of the steps up to `until_clock` (all when None), most recent first."""
    from workers.asr.vocab import terms

    texts = [session.current_instruction or session.task.instruction]
    for step in reversed(session_steps(session)):
        begun = step.clock_start if step.clock_start is not None else step.clock_end
        if until_clock is None or begun is None or begun <= until_clock:
            texts.extend(step_texts(step))
    return terms(texts)


def step_vocabularies(steps: list[Step]) -> list[list[str]]:
    """Each step's own terms (workers.asr.vocab.terms): what it typed or pressed and the element names
    on its screen, then those of the step before (the annotator often names what they just saw)."""
    from workers.asr.vocab import terms

    texts = [step_texts(step) for step in steps]
    return [terms(texts[i] + (texts[i - 1] if i else [])) for i in range(len(steps))]


def step_speech(step: Step, meta: dict[str, Any]) -> dict[str, Any]:
    """One step's think-aloud: its words (session clock), verbatim and refined thought, provenance."""
    own = meta.get(str(step.index), {})
    return {
        "index": step.index,
        "clock_start": step.clock_start,
        "clock_end": step.clock_end,
        "words": step.human_words,
        "verbatim": step.human_thought_verbatim,
        "refined": step.human_thought_refined,
        "refined_by": own.get("refined_by", ""),
        "edited": bool(own.get("edited")),
        "moved": bool(own.get("moved")),
    }


NOISE_RECENT_CHUNKS = 3  # while recording, the room's noise is read over the last few measured chunks


def speech_to_noise(transcript: dict[str, Any], chunks: list[ThinkAloudChunk]) -> float | None:
    """The recording's speech-to-noise ratio in dB: the full pass's, once it has run; before, the
    median of the last NOISE_RECENT_CHUNKS chunks the live pass measured (the room as it is now).
    None: nothing measured (silent pauses, or too little speech)."""
    if "snr_db" in transcript:
        return transcript["snr_db"]
    measured = sorted(c.snr_db for c in [c for c in chunks if c.snr_db is not None][-NOISE_RECENT_CHUNKS:])
    return measured[len(measured) // 2] if measured else None


def thinkaloud_state(
    session: AnnotationSession, recording: ThinkAloudRecording | None = None
) -> dict[str, Any]:
    """Everything about one session's think-aloud; also what the `annotation.thinkaloud` event carries."""
    recording = recording if recording is not None else recording_of(session)
    chunks = list(recording.chunks.order_by("index")) if recording is not None else []
    meta = recording.step_meta if recording is not None else {}
    transcript = recording.transcript if recording is not None else {}
    final = next((s for s in transcript.get("steps", []) if s.get("final")), None)
    snr_db = speech_to_noise(transcript, chunks)
    return {
        "session_id": session.pk,
        "status": recording.status if recording is not None else "none",
        "finished": recording.finished if recording is not None else False,
        "error": recording.error if recording is not None else "",
        "server_clock": session_clock(session),
        "chunks": [
            {
                "index": c.index,
                "start_clock": c.start_clock,
                "duration_s": c.duration_s,
                "size": c.size,
                "transcribed": c.transcribed,
                "error": c.error,
            }
            for c in chunks
        ],
        "next_index": (chunks[-1].index + 1) if chunks else 0,
        "audio_url": recording.audio.url if recording is not None and recording.audio else "",
        "audio_start_clock": recording.audio_start_clock if recording is not None else 0.0,
        "audio_s": recording.audio_s if recording is not None else 0.0,
        "model": transcript.get("model", ""),
        # Speech regions decoded a second time because the first found nothing sure, those still
        # empty after it (speech left out: the reviewer should listen), and words snapped to the
        # task's vocabulary ({said, term}).
        "retried_spans": transcript.get("retried_spans", 0),
        "lost_spans": transcript.get("lost_spans", 0),
        # words of the decoder's repetition loops left out ("Sorry." over 100 times for a garbled window)
        "looped_words": transcript.get("looped_words", 0),
        "snapped": transcript.get("snapped", []),
        # Words of another, much quieter voice (workers.asr.speaker): not the annotator's thoughts.
        "uncertain_words": transcript.get("uncertain_words", []),
        # The speech's level over the room's noise (dB; None: not measured): below
        # THINKALOUD_NOISY_SNR_DB Whisper mishears more, and the annotator and reviewer are told.
        "snr_db": snr_db,
        "noisy": snr_db is not None and snr_db < settings.THINKALOUD_NOISY_SNR_DB,
        "processing_s": recording.processing_s if recording is not None else None,
        "final": {"verbatim": final["verbatim"], "words": final["words"]} if final else None,
        "steps": [step_speech(s, meta) for s in session_steps(session)],
    }
