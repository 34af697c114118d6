"""Reads of the think-aloud: the recording's state as the workspace and the review screen draw it."""

from __future__ import annotations

from typing import Any

from annotation.models import AnnotationSession, ThinkAloudRecording
from annotation.services.common import session_clock
from webapp.store.models import Step

ALLOWED_TYPES = ("audio/webm", "audio/ogg", "audio/wav", "audio/x-wav", "audio/wave", "audio/vnd.wave")


def recording_of(session: AnnotationSession) -> ThinkAloudRecording | None:
    return ThinkAloudRecording.objects.filter(session=session).first()


def session_steps(session: AnnotationSession) -> list[Step]:
    if not session.trajectory_id:
        return []
    return list(Step.objects.filter(trajectory_id=session.trajectory_id).order_by("index"))


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


def thinkaloud_state(
    session: AnnotationSession, recording: ThinkAloudRecording | None = None
) -> dict[str, Any]:
    """Everything about one session's think-aloud; also what the `annotation.thinkaloud` event carries."""
    recording = recording if recording is not None else recording_of(session)
    chunks = list(recording.chunks.order_by("index")) if recording is not None else []
    meta = recording.step_meta if recording is not None else {}
    transcript = recording.transcript if recording is not None else {}
    final = next((s for s in transcript.get("steps", []) if s.get("final")), None)
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
        "processing_s": recording.processing_s if recording is not None else None,
        "final": {"verbatim": final["verbatim"], "words": final["words"]} if final else None,
        "steps": [step_speech(s, meta) for s in session_steps(session)],
    }
