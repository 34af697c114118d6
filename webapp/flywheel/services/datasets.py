"""Versioned dataset iterations (seed 000 §2.3): every validated trajectory matching the filters joins
the next iteration, V(s)=1 in the SFT split and V(s)=0 in the CT split, so nothing is discarded. A
judge-marked correct prefix of a failure also feeds SFT. Cards count per task, source and length;
export reuses the store's export jobs with the `dataset` filter."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone

from webapp.flywheel.models import DatasetIteration, DatasetMembership, Split
from webapp.store.job_services import export_job_create
from webapp.store.models import (
    ExportJob,
    ReviewState,
    Trajectory,
    TrajectorySource,
    TrajectoryStatus,
)


class DatasetError(ValueError):
    """The dataset cannot be built or exported as asked."""


def _filtered(filters: dict[str, Any]) -> Any:
    qs = (
        Trajectory.objects.filter(validation__isnull=False)
        .exclude(status=TrajectoryStatus.RUNNING)
        # Rejected trajectories stay (V(s)=0, the CT split); sent back or replaced ones never join.
        .exclude(review_state__in=[ReviewState.NEEDS_FIX, ReviewState.SUPERSEDED])
    )
    sources = filters.get("sources") or []
    unknown = set(sources) - set(TrajectorySource.values)
    if unknown:
        raise DatasetError(f"unknown sources {sorted(unknown)}; expected some of {TrajectorySource.values}")
    if sources:
        qs = qs.filter(source__in=sources)
    if filters.get("pool"):
        qs = qs.filter(task__pool_id=int(filters["pool"]))
    for key, lookup in (("created_after", "created_at__gte"), ("created_before", "created_at__lt")):
        if filters.get(key):
            try:
                moment = datetime.fromisoformat(str(filters[key]))
            except ValueError as exc:
                raise DatasetError(f"{key} must be an ISO date/time, got {filters[key]!r}") from exc
            if timezone.is_naive(moment):
                moment = timezone.make_aware(moment, UTC)
            qs = qs.filter(**{lookup: moment})
    return qs


def _prefix_steps(trajectory: Trajectory) -> int | None:
    judge = (trajectory.metadata or {}).get("judge") or {}
    prefix = judge.get("correct_prefix")
    if trajectory.validation == 0 and isinstance(prefix, int) and prefix > 0:
        return min(prefix, trajectory.num_steps)
    return None


def dataset_card(*, dataset: DatasetIteration) -> dict[str, Any]:
    """Counts per split, task, source and trajectory length (steps)."""
    rows = dataset.members.values_list(
        "split", "sft_prefix_steps", "trajectory__task__external_id", "trajectory__source",
        "trajectory__num_steps",
    )  # fmt: skip
    per_task: dict[str, Counter[str]] = {}
    per_source: dict[str, Counter[str]] = {}
    lengths: dict[str, Counter[int]] = {Split.SFT: Counter(), Split.CT: Counter()}
    steps = Counter[str]()
    for split, prefix, task, source, num_steps in rows:
        per_task.setdefault(task, Counter())[split] += 1
        per_source.setdefault(source, Counter())[split] += 1
        lengths[split][num_steps] += 1
        steps[split] += num_steps
        if prefix:
            steps["sft_prefix"] += prefix
    total = sum(sum(c.values()) for c in per_source.values())
    sft = sum(c[Split.SFT] for c in per_source.values())

    def mean_len(split: str) -> float | None:
        n = sum(lengths[split].values())
        return round(sum(k * v for k, v in lengths[split].items()) / n, 3) if n else None

    return {
        "trajectories": total,
        "sft": sft,
        "ct": total - sft,
        "v1_rate": round(sft / total, 4) if total else None,
        "steps": dict(steps),
        "per_task": {t: dict(c) for t, c in sorted(per_task.items())},
        "per_source": {s: dict(c) for s, c in sorted(per_source.items())},
        "length": {
            split: {
                "mean": mean_len(split),
                "histogram": {str(k): v for k, v in sorted(lengths[split].items())},
            }
            for split in (Split.SFT, Split.CT)
        },
    }


def dataset_build(
    *, filters: dict[str, Any] | None = None, name: str = "", user: Any = None
) -> DatasetIteration:
    """Snapshot every validated trajectory matching `filters` (sources, pool, created_after,
    created_before) as the next version. The version number comes from a unique constraint, so two
    concurrent builds never share one; an empty selection is refused."""
    filters = dict(filters or {})
    trajectories = list(_filtered(filters).only("id", "validation", "metadata", "num_steps"))
    if not trajectories:
        raise DatasetError("no validated trajectories match these filters")
    for _ in range(5):
        try:
            with transaction.atomic():
                version = (DatasetIteration.objects.aggregate(v=Max("version"))["v"] or 0) + 1
                dataset = DatasetIteration.objects.create(
                    version=version, name=name or f"iteration {version}", filters=filters, created_by=user
                )
                members = [
                    DatasetMembership(
                        dataset=dataset,
                        trajectory_id=t.pk,
                        split=Split.SFT if t.validation == 1 else Split.CT,
                        sft_prefix_steps=_prefix_steps(t),
                    )
                    for t in trajectories
                ]
                DatasetMembership.objects.bulk_create(members, batch_size=1000)
                card = dataset_card(dataset=dataset)
                dataset.card = card
                dataset.sft_count, dataset.ct_count = card["sft"], card["ct"]
                dataset.prefix_count = sum(1 for m in members if m.sft_prefix_steps)
                dataset.save(update_fields=["card", "sft_count", "ct_count", "prefix_count"])
                return dataset
        except IntegrityError:
            continue  # another build took this version number; take the next
    raise DatasetError("could not allocate a dataset version (too many concurrent builds)")


def dataset_export(*, dataset: DatasetIteration, format: str, user: Any, split: str = "") -> ExportJob:
    """An export job (any store format) over the dataset's members, optionally one split."""
    if split and split not in Split.values:
        raise DatasetError(f"unknown split {split!r}; expected one of {Split.values}")
    value = f"{dataset.pk}:{split}" if split else str(dataset.pk)
    return export_job_create(user=user, format=format, filters={"dataset": value})
