"""The one job state machine: queued → running → succeeded | failed | cancelled, terminal once.

Every long operation's row (ExportJob, SftJob, FlywheelJob) inherits `webapp.store.models.Job`
(`status`, `error`, `created_at`, `started_at`, `finished_at`); its service calls these three
transitions and publishes its own progress event.
Each transition is a conditional UPDATE, so two workers (or a worker and a cancelling user) race
safely: only the call that changed the row acts on it, and a terminal status is never overwritten.
"""

from __future__ import annotations

from typing import Any, TypeVar

from django.utils import timezone

from webapp.store.models import TERMINAL_JOB_STATUSES, Job, JobStatus

J = TypeVar("J", bound=Job)
ERROR_MAX_CHARS = 5000


class JobStateError(ValueError):
    """A transition to a status that is not terminal was asked of `job_end`."""


def job_claim(model: type[J], *, job_id: int) -> J | None:
    """queued → running; the row, or None unless exactly this call claimed it."""
    claimed = model._default_manager.filter(pk=job_id, status=JobStatus.QUEUED).update(
        status=JobStatus.RUNNING, started_at=timezone.now()
    )
    return model._default_manager.get(pk=job_id) if claimed == 1 else None


def job_end(job: J, *, status: str, error: str = "", **fields: Any) -> J:
    """Move a job that is not terminal yet to the terminal `status` with `fields` (a job already
    terminal keeps its state); `job` is refreshed from the database."""
    if status not in TERMINAL_JOB_STATUSES:
        raise JobStateError(f"{status!r} is not a terminal job status")
    type(job)._default_manager.filter(pk=job.pk).exclude(status__in=TERMINAL_JOB_STATUSES).update(
        status=status, error=error[:ERROR_MAX_CHARS], finished_at=timezone.now(), **fields
    )
    job.refresh_from_db()
    return job


def job_cancel(job: J) -> J:
    """Cancel a job that is not terminal yet; a running worker notices at its next check."""
    return job_end(job, status=JobStatus.CANCELLED, error="cancelled by user")
