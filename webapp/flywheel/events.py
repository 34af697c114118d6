"""Events of the flywheel over Channels: job progress, one group for the flywheel page."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, TypedDict

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

if TYPE_CHECKING:
    from webapp.flywheel.models import FlywheelJob

FLYWHEEL_GROUP = "flywheel"
log = logging.getLogger(__name__)


class FlywheelJobEvent(TypedDict):
    type: str  # "flywheel.job"
    job_id: int
    kind: str
    status: str
    progress: float
    done_units: int
    total_units: int
    error: str


def publish_job(job: FlywheelJob) -> None:
    """Best effort: an unreachable channel layer never fails the job."""
    payload: FlywheelJobEvent = {
        "type": "flywheel.job",
        "job_id": job.pk,
        "kind": job.kind,
        "status": job.status,
        "progress": job.progress,
        "done_units": job.done_units,
        "total_units": job.total_units,
        "error": job.error,
    }
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        async_to_sync(layer.group_send)(FLYWHEEL_GROUP, dict(payload))
    except Exception:
        log.warning("could not publish flywheel job %s", job.pk)
