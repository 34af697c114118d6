"""Reads of the flywheel: the page overview, datasets, jobs, pool difficulty and history."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db.models import Count, Q

from webapp.flywheel.models import (
    DatasetIteration,
    FlywheelJob,
    JobKind,
    PoolRefresh,
    Promotion,
    PromotionTarget,
)
from webapp.store.models import Checkpoint, TaskPool, Trajectory, TrajectorySource
from webapp.timestamps import iso_utc
from workers.rl.curation import CURRICULUM_BUCKETS


def rl_start_checkpoint() -> Checkpoint | None:
    promotion = Promotion.objects.filter(target=PromotionTarget.RL_START).select_related("checkpoint").first()
    return promotion.checkpoint if promotion else None


def dataset_json(ds: DatasetIteration) -> dict[str, Any]:
    return {
        "id": ds.pk, "version": ds.version, "name": ds.name, "filters": ds.filters, "sft": ds.sft_count,
        "ct": ds.ct_count, "prefixes": ds.prefix_count, "v1_rate": ds.v1_rate, "card": ds.card,
        "created_at": iso_utc(ds.created_at),
    }  # fmt: skip


def job_json(job: FlywheelJob) -> dict[str, Any]:
    return {
        "id": job.pk, "kind": job.kind, "status": job.status, "progress": job.progress,
        "done_units": job.done_units, "total_units": job.total_units, "params": job.params,
        "result": job.result, "error": job.error,
        "checkpoint": job.checkpoint.version if job.checkpoint_id else None,
        "created_at": iso_utc(job.created_at),
        "finished_at": iso_utc(job.finished_at),
    }  # fmt: skip


def checkpoint_json(c: Checkpoint | None) -> dict[str, Any] | None:
    if c is None:
        return None
    return {"id": c.pk, "version": c.version, "parent": c.parent.version if c.parent_id else None,
            "metrics": c.metrics, "notes": c.notes, "is_annotation_model": c.is_annotation_model,
            "created_at": iso_utc(c.created_at)}  # fmt: skip


def pool_difficulty(pool: TaskPool) -> dict[str, Any]:
    """The latest refresh's buckets and the history of every refresh (oldest first)."""
    history = list(PoolRefresh.objects.filter(pool=pool).order_by("created_at", "id"))
    latest = history[-1] if history else None
    return {
        "pool": {"id": pool.pk, "name": pool.name, "validation_mode": pool.validation_mode},
        "buckets": latest.buckets if latest else {b: 0 for b in CURRICULUM_BUCKETS},
        "tasks": latest.tasks if latest else [],
        "history": [
            {
                "id": r.pk,
                "created_at": iso_utc(r.created_at),
                "buckets": r.buckets,
                "mean_success": r.mean_success,
            }
            for r in history
        ],
    }


def v1_rate_by_checkpoint(limit: int = 20) -> list[dict[str, Any]]:
    """V(s)=1 rate of rejection-sampled trajectories per sampling checkpoint (one per iteration)."""
    rows = (
        Trajectory.objects.filter(
            source=TrajectorySource.REJECTION_SAMPLING, validation__isnull=False, checkpoint__isnull=False
        )
        .values("checkpoint__version")
        .annotate(n=Count("id"), v1=Count("id", filter=Q(validation=1)))
        .order_by("checkpoint__version")
    )
    created = dict(Checkpoint.objects.values_list("version", "created_at"))
    out = [{"checkpoint": r["checkpoint__version"], "n": r["n"], "v1": r["v1"], "rate": r["v1"] / r["n"]}
           for r in rows]  # fmt: skip
    out.sort(key=lambda r: created.get(r["checkpoint"]) or 0)
    return out[-limit:]


def _no_rl_app() -> dict[str, Any] | None:
    return None


# The last RL run's summary is the RL app's to give: it sits above (imports run one way) and hands it
# over in its AppConfig.ready() (`last_rl_run_source`).
_last_rl_run: Callable[[], dict[str, Any] | None] = _no_rl_app


def last_rl_run_source(summary: Callable[[], dict[str, Any] | None]) -> None:
    """Where the overview's `last_rl` comes from: {id, name, status, episodes_done, updates_done}."""
    global _last_rl_run
    _last_rl_run = summary


def flywheel_overview() -> dict[str, Any]:
    """Everything the flywheel page shows at a glance."""
    datasets = list(DatasetIteration.objects.all()[:20])
    last_sft = Checkpoint.objects.filter(metrics__has_key="sft").order_by("-created_at").first()
    last_merge = Checkpoint.objects.filter(metrics__has_key="merge").order_by("-created_at").first()
    return {
        "annotation_model": checkpoint_json(Checkpoint.objects.filter(is_annotation_model=True).first()),
        "rl_start": checkpoint_json(rl_start_checkpoint()),
        "datasets": [dataset_json(d) for d in reversed(datasets)],
        "last_sft": checkpoint_json(last_sft),
        "last_merge": checkpoint_json(last_merge),
        "last_rl": _last_rl_run(),
        "v1_by_checkpoint": v1_rate_by_checkpoint(),
        "jobs": [job_json(j) for j in FlywheelJob.objects.select_related("checkpoint")[:15]],
        "checkpoints": [c.version for c in Checkpoint.objects.order_by("-created_at")[:50]],
        "pools": [
            {"id": p.pk, "name": p.name, "validation_mode": p.validation_mode} for p in TaskPool.objects.all()
        ],
        "job_kinds": JobKind.values,
        "unvalidated": Trajectory.objects.filter(validation__isnull=True).exclude(status="running").count(),
    }


def job_owner_names(ids: set[int]) -> dict[int, tuple[str, str | None]]:
    """The fleet page's names of the flywheel jobs holding leases (webapp.fleet.owners)."""
    rows = FlywheelJob.objects.filter(pk__in=ids).values_list("pk", "kind")
    return {pk: (f"flywheel job #{pk} ({kind})", "/flywheel/") for pk, kind in rows}
