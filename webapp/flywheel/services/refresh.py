"""Task-pool refresh (seed 000 §2.3, seed 004 §2.3.3): success statistics per task from RL,
rejection sampling and annotation; curriculum buckets; assignment weights shifted toward the tasks
the current model fails; one history row per refresh."""

from __future__ import annotations

from collections import Counter

from django.db import transaction
from django.db.models import Count, Q

from webapp.flywheel.models import FlywheelJob, PoolRefresh, TaskWeight
from webapp.store.models import Task, TaskPool, Trajectory, TrajectorySource, TrajectoryStatus
from workers.rl.curation import CURRICULUM_BUCKETS, curriculum_bucket

# Sources whose outcomes say what the current model can do (imports are other people's data).
STAT_SOURCES = (TrajectorySource.RL, TrajectorySource.REJECTION_SAMPLING, TrajectorySource.ANNOTATION)


def assignment_weight(base: float, success_rate: float, attempts: int, shift: float) -> float:
    """base × (1 + shift × (1 − success)): a task the model always fails gets (1 + shift)× its base
    weight, a mastered one keeps its base; an unseen task counts as failing (we know nothing)."""
    failing = 1.0 - success_rate if attempts else 1.0
    return round(base * (1.0 + shift * failing), 6)


# A success: V(s)=1 when validated, else a positive verifier reward.
_SUCCESS = Q(validation=1) | Q(validation__isnull=True, final_reward__gt=0)


def pool_refresh(
    *, pool: TaskPool, shift: float = 3.0, last_n: int | None = None, job: FlywheelJob | None = None
) -> PoolRefresh:
    """Recompute every enabled task's success rate from its finished RL / rejection-sampling /
    annotation trajectories (optionally only the newest `last_n` per task), bucket it, and set
    `Task.importance` (what annotation assignment orders by) to the shifted weight. The admin's
    importance is remembered in `TaskWeight.base_importance` the first time."""
    if shift < 0:
        raise ValueError(f"shift must be ≥ 0, got {shift}")
    tasks = list(pool.tasks.filter(enabled=True).order_by("external_id"))
    finished = Trajectory.objects.filter(source__in=STAT_SOURCES).exclude(status=TrajectoryStatus.RUNNING)
    rows = []
    with transaction.atomic():
        for task in tasks:
            qs = finished.filter(task=task)
            if last_n:
                qs = finished.filter(
                    pk__in=list(qs.order_by("-created_at").values_list("pk", flat=True)[:last_n])
                )
            by_source = {
                r["source"]: [r["ok"], r["n"]]
                for r in qs.values("source").annotate(n=Count("id"), ok=Count("id", filter=_SUCCESS))
            }
            attempts = sum(n for _, n in by_source.values())
            successes = sum(ok for ok, _ in by_source.values())
            rate = successes / attempts if attempts else 0.0
            bucket = curriculum_bucket(rate)
            weight_row = TaskWeight.objects.select_for_update().filter(task=task).first()
            base = weight_row.base_importance if weight_row else task.importance
            weight = assignment_weight(base, rate, attempts, shift)
            TaskWeight.objects.update_or_create(
                task=task,
                defaults={"bucket": bucket, "success_rate": rate, "attempts": attempts, "by_source": by_source,
                          "base_importance": base, "weight": weight},
            )  # fmt: skip
            Task.objects.filter(pk=task.pk).update(
                importance=weight, attempts=attempts, successes=successes, success_rate=rate
            )
            rows.append(
                {"task": task.pk, "external_id": task.external_id, "rate": round(rate, 4), "attempts": attempts,
                 "bucket": bucket, "weight": weight, "by_source": by_source}
            )  # fmt: skip
        buckets = Counter(r["bucket"] for r in rows)
        return PoolRefresh.objects.create(
            pool=pool,
            job=job,
            buckets={b: buckets.get(b, 0) for b in CURRICULUM_BUCKETS},
            mean_success=round(sum(r["rate"] for r in rows) / len(rows), 4) if rows else 0.0,
            tasks=rows,
        )
