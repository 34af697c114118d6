"""Celery tasks of the store: archive export jobs (queue `export`) and SFT jobs (queue `train`)."""

from __future__ import annotations

from celery import shared_task

from webapp.store.export import jobs as export_jobs
from webapp.store.importers.osworld_check import osworld_tasks_check
from webapp.store.sft_jobs import sft_job_run


@shared_task(name="webapp.store.tasks.export_job_execute", acks_late=True)
def export_job_execute(job_id: int) -> None:
    """Build the archive of an export job (webapp.store.export.jobs); ends in a terminal state."""
    export_jobs.export_job_run(job_id)


@shared_task(name="webapp.store.tasks.sft_job_execute", acks_late=True)
def sft_job_execute(job_id: int) -> None:
    """Run an SFT job (enqueued on the `train` queue by `job_services.sft_job_create`)."""
    sft_job_run(job_id=job_id)


@shared_task(name="webapp.store.tasks.osworld_task_check", acks_late=True)
def osworld_task_check(task_id: int) -> str:
    """The no-action check of one imported OSWorld task (queue `default`; one task per message so a
    folder's checks interleave with other work). Returns the verdict."""
    checks = osworld_tasks_check(task_ids=[task_id])
    return checks[0].verdict if checks else "skipped"
