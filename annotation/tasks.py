"""Celery tasks of the annotation loop."""

from __future__ import annotations

import logging
from typing import Any

from celery import current_app, shared_task
from celery.signals import worker_process_init
from django.conf import settings
from django.db import DatabaseError

from annotation import proposals
from annotation.services.common import session_reap_abandoned
from annotation.thinkaloud import transcribe

log = logging.getLogger(__name__)


@shared_task(name="annotation.tasks.propose_candidates", ignore_result=True)
def propose_candidates(session_id: int, obs_version: int) -> bool:
    return proposals.candidates_propose(session_id=session_id, obs_version=obs_version)


@shared_task(name="annotation.tasks.reap_abandoned_sessions", ignore_result=True)
def reap_abandoned_sessions() -> int:
    return session_reap_abandoned()


# Think-aloud (issue 6): live chunks on THINKALOUD_LIVE_QUEUE (`asr.live`), full passes on
# THINKALOUD_QUEUE (`asr`); annotation.thinkaloud.services names the queue.
# acks_late + reject_on_worker_lost: a worker killed mid-job gets the job delivered again; the jobs
# recompute from the stored chunks, so running twice is harmless.
_ASR_RETRY = {"acks_late": True, "reject_on_worker_lost": True, "max_retries": 3}


@shared_task(name="annotation.tasks.transcribe_chunk", bind=True, ignore_result=True, **_ASR_RETRY)
def transcribe_chunk(self: Any, chunk_id: int) -> bool:
    try:
        return transcribe.chunk_transcribe(chunk_id)
    except (OSError, DatabaseError) as exc:  # storage or database hiccup: try again shortly
        raise self.retry(exc=exc, countdown=2**self.request.retries) from exc


@shared_task(name="annotation.tasks.transcribe_recording", bind=True, ignore_result=True, **_ASR_RETRY)
def transcribe_recording(self: Any, recording_id: int) -> bool:
    try:
        return transcribe.recording_transcribe(recording_id)
    except (OSError, DatabaseError) as exc:
        if self.request.retries >= self.max_retries:
            transcribe.recording_failed(recording_id, f"{type(exc).__name__}: {exc}")
            raise
        raise self.retry(exc=exc, countdown=2**self.request.retries) from exc
    except Exception as exc:
        transcribe.recording_failed(recording_id, f"{type(exc).__name__}: {exc}")
        raise


@worker_process_init.connect
def _preload_whisper(**_: Any) -> None:
    """A worker process that consumes a think-aloud queue loads Whisper as it starts, not with its
    first chunk (the load was part of that chunk's wait for its transcript). Celery's Django fixup
    closes the connection this read opens at the task boundaries, as for any task."""
    consumed = set(current_app.amqp.queues.consume_from or {})
    if consumed & {settings.THINKALOUD_LIVE_QUEUE, settings.THINKALOUD_QUEUE}:
        try:  # the admins' model choice is read from the database: a process must start without it too
            transcribe.transcriber(live=True)
        except Exception:  # the first chunk loads it then, and reports what failed on the recording
            log.warning("think-aloud: Whisper not preloaded at process start", exc_info=True)
