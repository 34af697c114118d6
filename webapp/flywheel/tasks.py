"""Celery tasks of the flywheel: each receives a job id, loads the row, calls services, and leaves
the job terminal whatever happens. Rejection sampling fans out one chunk per (task, seed slice) so
several workers sample in parallel; the chunk that completes the last unit finishes the job."""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task

from webapp.flywheel import job_run
from webapp.flywheel.models import DatasetIteration, FlywheelJob
from webapp.store.models import Checkpoint, JobStatus, Task, TaskPool

log = logging.getLogger(__name__)


def _fail(job: FlywheelJob, exc: BaseException) -> None:
    log.exception("flywheel job %s failed", job.pk)
    job_run.job_finish(job=job, status=JobStatus.FAILED, error=f"{type(exc).__name__}: {exc}")


def rejection_sampling_plan(job: FlywheelJob) -> list[tuple[int, list[int]]]:
    """(task id, seeds) chunks: K seeds per task, sliced by `chunk` (default K: one chunk per task).
    Seeds are `seed_base + 1000 · task position + k`, so a job is reproducible."""
    k = int(job.params["k"])
    chunk = max(1, int(job.params.get("chunk") or k))
    base = int(job.params.get("seed_base", 10_000))
    plan = []
    for position, task_id in enumerate(job.params["task_ids"]):
        seeds = [base + 1000 * position + i for i in range(k)]
        plan += [(int(task_id), seeds[i : i + chunk]) for i in range(0, k, chunk)]
    return plan


@shared_task(name="webapp.flywheel.tasks.rejection_sampling_start", acks_late=True)
def rejection_sampling_start(job_id: int, inline: bool = False) -> None:
    """Claim the job and enqueue its chunks (`inline` runs them here, one after another)."""
    job = job_run.job_claim(job_id=job_id)
    if job is None:
        return
    try:
        plan = rejection_sampling_plan(job)
        job_run.job_set_total(job=job, total=len(plan))
    except Exception as exc:
        _fail(job, exc)
        return
    for task_id, seeds in plan:
        if inline:
            rejection_sampling_chunk(job_id, task_id, seeds)
        else:
            rejection_sampling_chunk.delay(job_id, task_id, seeds)


@shared_task(name="webapp.flywheel.tasks.rejection_sampling_chunk", acks_late=True)
def rejection_sampling_chunk(job_id: int, task_id: int, seeds: list[int]) -> dict[str, Any]:
    from webapp.flywheel.services.sampling import open_env, open_policy, sample_task

    job = FlywheelJob.objects.select_related("checkpoint").get(pk=job_id)
    counts: dict[str, Any] = {"episodes": 0, "v1": 0, "v0": 0, "pending": 0, "errors": 0}
    if job.status != JobStatus.RUNNING:
        return counts  # cancelled or failed meanwhile
    env = None
    try:
        task = Task.objects.select_related("pool").get(pk=task_id)
        policy = open_policy(
            checkpoint=job.checkpoint,
            policy_url=job.params.get("policy_url", ""),
            seed=seeds[0],
            max_new_tokens=job.params.get("max_new_tokens"),
        )
        env = open_env(
            use_fleet=bool(job.params.get("use_fleet")), kind=task.env_kind, owner=f"flywheel-job-{job_id}"
        )
        for seed in seeds:
            if not job_run.job_is_running(job_id):
                break
            (trajectory,) = sample_task(
                task=task, checkpoint=job.checkpoint, seeds=[seed], policy=policy, env=env,
                max_steps=int(job.params.get("max_steps", 6)),
                temperature=float(job.params.get("temperature", 1.0)), job_id=job_id,
            )  # fmt: skip
            counts["episodes"] += 1
            if trajectory.validation is None:
                counts["pending"] += 1
            else:
                counts["v1" if trajectory.validation == 1 else "v0"] += 1
    except Exception as exc:
        log.exception("rejection sampling chunk of job %s (task %s) failed", job_id, task_id)
        counts["errors"] += 1
        counts["last_error"] = f"{type(exc).__name__}: {exc}"[:500]
    finally:
        if env is not None:
            env.close()
    job = job_run.job_add_done(job_id=job_id, result=counts)
    if job.done_units >= job.total_units and job.status == JobStatus.RUNNING:
        result = job.result
        if result.get("episodes", 0) == 0 and result.get("errors"):
            job_run.job_finish(
                job=job, status=JobStatus.FAILED, error=str(result.get("last_error", "every chunk failed"))
            )
        else:
            n = result.get("v1", 0) + result.get("v0", 0)
            job_run.job_finish(
                job=job,
                status=JobStatus.SUCCEEDED,
                result={"v1_rate": result.get("v1", 0) / n if n else None},
            )
    return counts


@shared_task(name="webapp.flywheel.tasks.merge_execute", acks_late=True)
def merge_execute(job_id: int) -> None:
    from webapp.flywheel.services.training import checkpoint_merge, evaluate_checkpoint, source_task_sets

    job = job_run.job_claim(job_id=job_id)
    if job is None:
        return
    try:
        sources = list(Checkpoint.objects.filter(version__in=job.params["checkpoints"]))
        sources.sort(key=lambda c: job.params["checkpoints"].index(c.version))
        merged = checkpoint_merge(
            checkpoints=sources, weights=job.params["weights"], version=job.params.get("version", "")
        )
        FlywheelJob.objects.filter(pk=job.pk).update(checkpoint=merged)
        evaluation: dict[str, Any] = {}
        seeds = list(
            range(
                int(job.params.get("eval_seed_base", 50_000)),
                int(job.params.get("eval_seed_base", 50_000)) + int(job.params.get("eval_episodes", 0)),
            )
        )
        if seeds:
            for version, task_names in source_task_sets(sources).items():
                evaluation[version] = {
                    "merged": evaluate_checkpoint(checkpoint=merged, tasks=task_names, seeds=seeds),
                    "source": evaluate_checkpoint(
                        checkpoint=next(c for c in sources if c.version == version),
                        tasks=task_names,
                        seeds=seeds,
                    ),
                }
            merged.metrics = {**merged.metrics, "evaluation": evaluation}
            merged.save(update_fields=["metrics"])
        job_run.job_finish(
            job=job,
            status=JobStatus.SUCCEEDED,
            result={"checkpoint": merged.version, "evaluation": evaluation},
        )
    except Exception as exc:
        _fail(job, exc)


@shared_task(name="webapp.flywheel.tasks.refresh_execute", acks_late=True)
def refresh_execute(job_id: int) -> None:
    from webapp.flywheel.services.refresh import pool_refresh

    job = job_run.job_claim(job_id=job_id)
    if job is None:
        return
    try:
        pool = TaskPool.objects.get(pk=int(job.params["pool"]))
        row = pool_refresh(
            pool=pool, shift=float(job.params.get("shift", 3.0)), last_n=job.params.get("last_n"), job=job
        )
        job_run.job_finish(
            job=job,
            status=JobStatus.SUCCEEDED,
            result={"refresh": row.pk, "buckets": row.buckets, "mean_success": row.mean_success},
        )
    except Exception as exc:
        _fail(job, exc)


@shared_task(name="webapp.flywheel.tasks.sft_execute", acks_late=True)
def sft_execute(job_id: int) -> None:
    """SFT of the job's checkpoint on a dataset iteration; stops early when the job is cancelled."""
    from webapp.flywheel.services.training import checkpoint_sft

    job = job_run.job_claim(job_id=job_id)
    if job is None:
        return
    try:
        dataset = DatasetIteration.objects.get(pk=int(job.params["dataset"]))
        steps = int(job.params.get("steps", 200))
        losses: list[list[float]] = []

        def progress(p: dict[str, float]) -> None:
            losses.append([p["step"], p["loss"]])
            FlywheelJob.objects.filter(pk=job_id).update(done_units=int(p["step"]), total_units=steps,
                                                         progress=round(100.0 * p["step"] / steps, 2))  # fmt: skip

        child = checkpoint_sft(
            parent=job.checkpoint, dataset=dataset, steps=steps, lr=float(job.params.get("lr", 1e-3)),
            batch_size=int(job.params.get("batch_size", 16)), progress=progress,
            should_stop=lambda: not job_run.job_is_running(job_id),
        )  # fmt: skip
        if not job_run.job_is_running(job_id):
            return
        job_run.job_finish(
            job=job,
            status=JobStatus.SUCCEEDED,
            result={"checkpoint": child.version, "losses": losses, **child.metrics["sft"]},
        )
    except Exception as exc:
        _fail(job, exc)
