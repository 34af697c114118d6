"""The store's background jobs as the web asks for them: created (checked now, not in the worker) and
queued once the row commits, or cancelled. Each job's run sits below, in the module its Celery task
(webapp.store.tasks) calls: an export in webapp.store.export.jobs, an SFT job in
webapp.store.sft_jobs, an OSWorld task's no-action check in webapp.store.importers.osworld_check.
Those runs and the store's services never import this module back (an import-linter contract).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.db import transaction

from webapp.store.jobs import job_cancel
from webapp.store.models import Checkpoint, ExportFormat, ExportJob, JobStatus, SftJob, Task
from webapp.store.services import StoreError
from webapp.store.sft_jobs import VERSION_RE, SftError, trajectories_for_sft
from webapp.store.tasks import export_job_execute, osworld_task_check, sft_job_execute


def export_job_create(*, user: Any, format: str, filters: dict[str, Any]) -> ExportJob:
    """Create an export job and queue its run (webapp.store.tasks → webapp.store.export.jobs, which
    claims, builds, and finishes it, and is where a job is cancelled)."""
    if format not in ExportFormat.values:
        raise StoreError(f"unknown export format {format!r}; expected one of {ExportFormat.values}")
    job = ExportJob.objects.create(created_by=user, format=format, filters=filters)
    transaction.on_commit(lambda: export_job_execute.delay(job.pk))
    return job


def sft_job_create(
    *,
    user: Any,
    base: Checkpoint,
    version: str,
    filters: dict[str, Any],
    steps: int,
    lr: float = 1e-3,
    batch_size: int = 16,
    enqueue: bool = True,
) -> SftJob:
    """Validate now (filters, version, base), queue the job on `train` once the row is committed."""
    if not VERSION_RE.match(version):
        raise SftError("version: 1-100 characters of letters, digits, '.', '_' or '-'")
    if (
        Checkpoint.objects.filter(version=version).exists()
        or SftJob.objects.filter(version=version)
        .exclude(status__in=[JobStatus.FAILED, JobStatus.CANCELLED])
        .exists()
    ):
        raise SftError(f"a checkpoint or SFT job {version!r} exists already")
    if base.endpoint_url or not base.path:
        raise SftError(f"checkpoint {base.version} is an external endpoint; SFT needs local weights")
    if not trajectories_for_sft(filters).exists():
        raise SftError(f"no trajectories match {filters}")
    job = SftJob.objects.create(
        created_by=user, base=base, version=version, filters=filters, steps=steps, lr=lr,
        batch_size=batch_size,
    )  # fmt: skip
    if enqueue:
        queue = getattr(settings, "SFT_TRAIN_QUEUE", "train")
        transaction.on_commit(lambda: sft_job_execute.apply_async((job.pk,), queue=queue))
    return job


def sft_job_cancel(*, job: SftJob) -> SftJob:
    """Training stops at its next step; the partial checkpoint is still registered."""
    return job_cancel(job)


def osworld_checks_queue(*, task_ids: Iterable[int]) -> int:
    """Queue the no-action check (Celery, one message per task) for the enabled, supported OSWorld
    tasks among `task_ids`, after the current transaction commits; returns how many were queued."""
    ids = list(
        Task.objects.filter(pk__in=list(task_ids), source="osworld", enabled=True, supported=True)
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    transaction.on_commit(lambda: [osworld_task_check.delay(pk) for pk in ids])
    return len(ids)
