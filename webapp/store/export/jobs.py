"""An export job's run: claimed by one worker, its archive built with progress (a cancel stops it at
the next progress report), finished in a terminal state. `webapp.store.job_services.export_job_create`
queues it; the task (`webapp.store.tasks.export_job_execute`) runs `export_job_run`."""

from __future__ import annotations

import logging
import secrets
import tempfile
import zipfile
from typing import Any

from django.core.files import File
from django.core.files.storage import default_storage

from webapp.store.api.filters import TrajectoryFilter, export_queryset
from webapp.store.events import export_progress_event, publish_export_progress
from webapp.store.export.archive import WRITERS
from webapp.store.export.records import iter_trajectory_records
from webapp.store.jobs import job_cancel, job_claim, job_end
from webapp.store.models import ExportJob, JobStatus, Trajectory

log = logging.getLogger(__name__)


def _publish(job: ExportJob) -> None:
    publish_export_progress(export_progress_event(job))


def export_job_claim(*, job_id: int) -> ExportJob | None:
    """Move a queued job to running; returns None unless exactly this call claimed it."""
    job = job_claim(ExportJob, job_id=job_id)
    if job is not None:
        _publish(job)
    return job


def export_job_progress(*, job: ExportJob, done: int, total: int) -> bool:
    """Record progress; returns False when the job was cancelled meanwhile (the caller stops)."""
    progress = 100.0 * done / total if total else 100.0
    updated = ExportJob.objects.filter(pk=job.pk, status=JobStatus.RUNNING).update(
        done_trajectories=done, total_trajectories=total, progress=progress
    )
    job.done_trajectories, job.total_trajectories, job.progress = done, total, progress
    if updated:
        _publish(job)
    return updated == 1


def export_job_finish(*, job: ExportJob, status: str, archive_name: str = "", error: str = "") -> ExportJob:
    """End the job in the terminal `status` (webapp.store.jobs.JobStateError for any other)."""
    fields: dict[str, Any] = {}
    if archive_name:
        fields["archive"] = archive_name
    if status == JobStatus.SUCCEEDED:
        fields["progress"] = 100.0
    job_end(job, status=status, error=error, **fields)
    _publish(job)
    return job


def export_job_cancel(*, job: ExportJob) -> ExportJob:
    job_cancel(job)
    _publish(job)
    return job


def export_job_run(job_id: int) -> None:
    """Build the archive of an export job (the `export_job_execute` task). Ends in a terminal state
    whatever happens."""
    job = export_job_claim(job_id=job_id)
    if job is None:
        return  # already claimed, finished or cancelled
    try:
        filterset = TrajectoryFilter(job.filters, queryset=Trajectory.objects.all())
        if not filterset.is_valid():
            # An invalid filter would otherwise be ignored and export everything.
            raise ValueError(f"invalid filters: {dict(filterset.errors)}")
        qs = export_queryset(filterset)
        total = qs.count()
        export_job_progress(job=job, done=0, total=total)
        cancelled = False
        every = max(1, total // 100)

        def progress(done: int) -> bool:
            nonlocal cancelled
            if done % every == 0 or done == total:
                cancelled = not export_job_progress(job=job, done=done, total=total)
            return not cancelled

        with tempfile.NamedTemporaryFile(suffix=".zip") as tmp:
            with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED, allowZip64=True) as zf:
                records = iter_trajectory_records(qs, media_ref=lambda name: name)
                WRITERS[job.format](zf, records, progress)
            if cancelled:
                return
            tmp.seek(0)
            name = default_storage.save(
                f"exports/export-{job.pk}-{job.format}-{secrets.token_urlsafe(24)}.zip", File(tmp)
            )
        export_job_finish(job=job, status=JobStatus.SUCCEEDED, archive_name=name)
    except Exception as exc:
        log.exception("export job %s failed", job_id)
        export_job_finish(job=job, status=JobStatus.FAILED, error=f"{type(exc).__name__}: {exc}")
