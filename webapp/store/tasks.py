"""Celery tasks of the store: archive export jobs (queue `export`) and SFT jobs (queue `train`)."""

from __future__ import annotations

import logging
import secrets
import tempfile
import zipfile

from celery import shared_task
from django.core.files import File
from django.core.files.storage import default_storage

from webapp.store import services
from webapp.store.api.filters import TrajectoryFilter, export_queryset
from webapp.store.export.archive import WRITERS
from webapp.store.export.records import iter_trajectory_records
from webapp.store.models import JobStatus, Trajectory

log = logging.getLogger(__name__)


@shared_task(name="webapp.store.tasks.export_job_execute", acks_late=True)
def export_job_execute(job_id: int) -> None:
    """Build the archive of an export job. Ends in a terminal state whatever happens."""
    job = services.export_job_claim(job_id=job_id)
    if job is None:
        return  # already claimed, finished or cancelled
    try:
        filterset = TrajectoryFilter(job.filters, queryset=Trajectory.objects.all())
        if not filterset.is_valid():
            # An invalid filter would otherwise be ignored and export everything.
            raise ValueError(f"invalid filters: {dict(filterset.errors)}")
        qs = export_queryset(filterset)
        total = qs.count()
        services.export_job_progress(job=job, done=0, total=total)
        cancelled = False
        every = max(1, total // 100)

        def progress(done: int) -> bool:
            nonlocal cancelled
            if done % every == 0 or done == total:
                cancelled = not services.export_job_progress(job=job, done=done, total=total)
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
        services.export_job_finish(job=job, status=JobStatus.SUCCEEDED, archive_name=name)
    except Exception as exc:
        log.exception("export job %s failed", job_id)
        services.export_job_finish(job=job, status=JobStatus.FAILED, error=f"{type(exc).__name__}: {exc}")


@shared_task(name="webapp.store.tasks.sft_job_execute", acks_late=True)
def sft_job_execute(job_id: int) -> None:
    """Run an SFT job (enqueued on the `train` queue by `sft_jobs.sft_job_create`)."""
    from webapp.store.sft_jobs import sft_job_run

    sft_job_run(job_id=job_id)


@shared_task(name="webapp.store.tasks.osworld_task_check", acks_late=True)
def osworld_task_check(task_id: int) -> str:
    """The no-action check of one imported OSWorld task (queue `default`; one task per message so a
    folder's checks interleave with other work). Returns the verdict."""
    from webapp.store.importers.osworld_check import osworld_tasks_check

    checks = osworld_tasks_check(task_ids=[task_id])
    return checks[0].verdict if checks else "skipped"
