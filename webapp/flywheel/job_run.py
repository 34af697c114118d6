"""A flywheel job's run, as its Celery tasks (webapp.flywheel.tasks) drive it: claim (queued →
running, one conditional UPDATE), progress of parallel chunks, and the terminal state. Below the
services that create and enqueue a job (webapp.flywheel.services.jobs), so a task never imports them
back."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import F

from webapp.flywheel.events import publish_job
from webapp.flywheel.models import FlywheelJob
from webapp.store import jobs as store_jobs
from webapp.store.models import JobStatus


def job_claim(*, job_id: int) -> FlywheelJob | None:
    """queued → running; None unless exactly this call claimed it."""
    job = store_jobs.job_claim(FlywheelJob, job_id=job_id)
    if job is not None:
        publish_job(job)
    return job


def job_is_running(job_id: int) -> bool:
    return FlywheelJob.objects.filter(pk=job_id, status=JobStatus.RUNNING).exists()


def job_set_total(*, job: FlywheelJob, total: int) -> None:
    FlywheelJob.objects.filter(pk=job.pk).update(total_units=total)
    job.total_units = total


def job_add_done(*, job_id: int, units: int = 1, result: dict[str, Any] | None = None) -> FlywheelJob:
    """Count finished units atomically (parallel chunks) and merge numeric `result` counters."""
    with transaction.atomic():
        job = FlywheelJob.objects.select_for_update().get(pk=job_id)
        merged = dict(job.result)
        for key, value in (result or {}).items():
            if isinstance(value, int | float) and isinstance(merged.get(key, 0), int | float):
                merged[key] = merged.get(key, 0) + value
            else:
                merged[key] = value
        FlywheelJob.objects.filter(pk=job_id).update(done_units=F("done_units") + units, result=merged)
        job.refresh_from_db()
        if job.total_units:
            job.progress = round(100.0 * job.done_units / job.total_units, 2)
            FlywheelJob.objects.filter(pk=job_id).update(progress=job.progress)
    publish_job(job)
    return job


def job_finish(
    *, job: FlywheelJob, status: str, result: dict[str, Any] | None = None, error: str = ""
) -> FlywheelJob:
    """End the job in the terminal `status` (webapp.store.jobs.JobStateError for any other), merging
    `result` into the job's result."""
    fields: dict[str, Any] = {}
    if result is not None:
        fields["result"] = {**FlywheelJob.objects.get(pk=job.pk).result, **result}
    if status == JobStatus.SUCCEEDED:
        fields["progress"] = 100.0
    store_jobs.job_end(job, status=status, error=error, **fields)
    publish_job(job)
    return job
