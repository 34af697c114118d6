"""Flywheel jobs: created here and enqueued on commit, cancelled here. Their Celery tasks
(webapp.flywheel.tasks) run them through webapp.flywheel.job_run: claim with one conditional UPDATE,
progress (events), and always a terminal state with a readable error."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from webapp.flywheel.events import publish_job
from webapp.flywheel.models import DatasetIteration, FlywheelJob, JobKind
from webapp.store import jobs as store_jobs
from webapp.store.models import Checkpoint, Task, TaskPool


class JobError(ValueError):
    """The job was refused; the message says why."""


def _enqueue(job: FlywheelJob) -> None:
    from webapp.flywheel import tasks

    runner = {
        JobKind.REJECTION_SAMPLING: tasks.rejection_sampling_start,
        JobKind.MERGE: tasks.merge_execute,
        JobKind.REFRESH: tasks.refresh_execute,
        JobKind.SFT: tasks.sft_execute,
    }[JobKind(job.kind)]
    transaction.on_commit(lambda: runner.delay(job.pk))


def job_create(
    *,
    kind: str,
    params: dict[str, Any],
    user: Any = None,
    checkpoint: Checkpoint | None = None,
    enqueue: bool = True,
) -> FlywheelJob:
    """Check the parameters of a job of `kind`, store it and enqueue it once the transaction commits
    (`enqueue=False`: the caller runs the task itself, e.g. the benchmark in its own database)."""
    if kind not in JobKind.values:
        raise JobError(f"unknown job kind {kind!r}; expected one of {JobKind.values}")
    params = dict(params)
    if kind == JobKind.REJECTION_SAMPLING:
        if checkpoint is None:
            raise JobError("rejection sampling needs a checkpoint")
        k = int(params.get("k", 4))
        if not 1 <= k <= 256:
            raise JobError(f"k must be in 1..256, got {k}")
        task_ids = [int(t) for t in params.get("task_ids") or []]
        if not task_ids and params.get("pool"):
            task_ids = list(Task.objects.filter(pool_id=int(params["pool"]), enabled=True, supported=True)
                            .order_by("external_id").values_list("pk", flat=True))  # fmt: skip
        if not task_ids:
            raise JobError("rejection sampling needs task_ids or a pool with enabled tasks")
        params.update(k=k, task_ids=task_ids)
    elif kind == JobKind.MERGE:
        versions = list(params.get("checkpoints") or [])
        found = set(Checkpoint.objects.filter(version__in=versions).values_list("version", flat=True))
        if len(versions) < 2 or found != set(versions):
            raise JobError(f"a merge needs ≥ 2 known checkpoints; unknown: {sorted(set(versions) - found)}")
        from workers.rl.merge import check_merge_weights

        try:
            check_merge_weights(params.get("weights") or [], len(versions))
        except ValueError as exc:
            raise JobError(str(exc)) from exc
        # Refuse different SFT parents now, not minutes later in the worker.
        from webapp.flywheel.services.training import sft_root

        roots = {}
        for c in Checkpoint.objects.filter(version__in=versions):
            root = sft_root(c.parent) if c.parent is not None else None
            roots[c.version] = root.version if root else None
        if None in roots.values() or len(set(roots.values())) != 1:
            raise JobError(
                "checkpoints must share one SFT parent; their SFT parents are "
                + ", ".join(f"{v} ← {r or 'none'}" for v, r in sorted(roots.items()))
            )
    elif kind == JobKind.REFRESH:
        if not TaskPool.objects.filter(pk=int(params.get("pool", 0))).exists():
            raise JobError("refresh needs an existing pool")
    elif kind == JobKind.SFT:
        if checkpoint is None:
            raise JobError("SFT needs a parent checkpoint")
        if not DatasetIteration.objects.filter(pk=int(params.get("dataset", 0))).exists():
            raise JobError("SFT needs an existing dataset iteration")
    job = FlywheelJob.objects.create(kind=kind, params=params, created_by=user, checkpoint=checkpoint)
    if enqueue:
        _enqueue(job)
    return job


def job_cancel(*, job: FlywheelJob) -> FlywheelJob:
    """Running chunks notice at their next episode and stop."""
    store_jobs.job_cancel(job)
    publish_job(job)
    return job
