"""Events the store publishes over Channels: payload types and publish helpers."""

from __future__ import annotations

from typing import Any, TypedDict

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer


class ExportJobProgress(TypedDict):
    type: str  # "export.progress"
    job_id: int
    status: str
    progress: float
    done_trajectories: int
    total_trajectories: int
    error: str


def export_progress_event(job: Any) -> ExportJobProgress:
    """The progress payload of an `ExportJob` row (published on change, sent on connect)."""
    return {
        "type": "export.progress",
        "job_id": job.pk,
        "status": job.status,
        "progress": job.progress,
        "done_trajectories": job.done_trajectories,
        "total_trajectories": job.total_trajectories,
        "error": job.error,
    }


def export_job_group(job_id: int) -> str:
    return f"export-job-{job_id}"


def publish_export_progress(payload: ExportJobProgress) -> None:
    """Best effort: a missing or unreachable channel layer never fails the export itself."""
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        async_to_sync(layer.group_send)(export_job_group(payload["job_id"]), dict(payload))
    except Exception:
        import logging

        logging.getLogger(__name__).warning("could not publish export progress for job %s", payload["job_id"])
