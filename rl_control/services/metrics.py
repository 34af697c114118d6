"""Writes for run metrics: record a training step's scalars, pack long series into blocks."""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import partial

from django.db import IntegrityError, transaction
from django.utils import timezone

from rl_control.alerts import alerts_evaluate
from rl_control.events import RunMetricsEvent, publish_run_metrics
from rl_control.metric_names import metric_name_problem
from rl_control.models import Run, RunMetric, RunMetricBlock
from rl_control.selectors import binary_cursor, metric_columns, run_metric_names
from rl_control.services.state import RunError


@transaction.atomic
def metrics_record(
    *,
    run: Run,
    step: int,
    values: Mapping[str, float],
    policy_version: int,
    samples: int,
    wall: float | None = None,
) -> list[RunMetric]:
    """Store many scalars of one training step at once, publish one `run.metrics`, evaluate alerts.

    Names must be canonical (rl_control.metric_names), else `RunError` and nothing is stored.
    Non-finite values (an undefined statistic) are skipped: the chart shows a gap. `wall` defaults
    to the seconds since the run started. Returns the stored rows.
    """
    bad = {name: problem for name in values if (problem := metric_name_problem(name))}
    if bad:
        raise RunError("; ".join(f"{name!r}: {problem}" for name, problem in sorted(bad.items())))
    if step < 0 or policy_version < 0 or samples < 0:
        raise RunError("step, policy_version and samples must be ≥ 0")
    if wall is None:
        started = run.started_at or Run.objects.filter(pk=run.pk).values_list("started_at", flat=True).first()
        wall = (timezone.now() - started).total_seconds() if started else 0.0
    finite = {name: float(v) for name, v in values.items() if math.isfinite(float(v))}
    rows = RunMetric.objects.bulk_create(
        [
            RunMetric(
                run=run,
                name=name,
                step=step,
                policy_version=policy_version,
                samples=samples,
                wall=wall,
                value=v,
            )
            for name, v in finite.items()
        ]
    )
    if "outcome/verified_success_rate" in finite:
        Run.objects.filter(pk=run.pk).update(headline_success=finite["outcome/verified_success_rate"])
    payload: RunMetricsEvent = {
        "type": "run.metrics",
        "run_id": run.pk,
        "step": step,
        "policy_version": policy_version,
        "samples": samples,
        "wall": wall,
        "values": finite,
    }
    transaction.on_commit(partial(publish_run_metrics, payload))
    alerts_evaluate(run=run, step=step, values=finite)
    # Claim the packing for this step window: one recorder per window packs every series of the run.
    packed = Run.objects.filter(pk=run.pk, metrics_packed_step__lte=step - COMPACT_EVERY_STEPS)
    if packed.update(metrics_packed_step=step) == 1:
        for name in run_metric_names(run_id=run.pk):
            metrics_compact(run_id=run.pk, name=name, up_to_step=step)
    return rows


# Blocks are packed each time the recorded step has advanced this far since the last packing; rows of the last SETTLE_STEPS steps are never
# packed, so a point recorded a little late (another writer, a retried transaction) still lands in
# the unpacked tail that readers scan after the last block.
COMPACT_EVERY_STEPS = 256
SETTLE_STEPS = 64
_BLOCK_COLUMNS = ("step", "policy_version", "samples", "wall", "value")
BATCH_BLOCKS = 16


def metrics_compact(*, run_id: int, name: str, up_to_step: int) -> int:
    """Pack full blocks of `RunMetricBlock.BLOCK_POINTS` points of one series; returns blocks written.

    Only rows with step ≤ up_to_step − SETTLE_STEPS are packed. Precondition (what one trainer
    writing a run guarantees): no point is recorded later with a step below an already packed block.
    Idempotent and safe to race: the next block is fully determined by the last one, and the unique
    constraint turns a concurrent duplicate into a no-op.
    """
    size = RunMetricBlock.BLOCK_POINTS
    written = 0
    with binary_cursor() as cursor:
        while True:
            last = (
                RunMetricBlock.objects.filter(run_id=run_id, name=name)
                .order_by("-last_step", "-last_id")
                .values_list("last_step", "last_id")
                .first()
            )
            # Up to BATCH_BLOCKS blocks per read: one query per block would dominate the packing time.
            cols = metric_columns(
                cursor, run_id=run_id, name=name, columns=[*_BLOCK_COLUMNS, "id"],
                after=last, max_step=up_to_step - SETTLE_STEPS, limit=size * BATCH_BLOCKS,
            )  # fmt: skip
            full = cols["id"].size // size
            if full == 0:
                return written
            blocks = [
                RunMetricBlock(
                    run_id=run_id, name=name, last_step=int(cols["step"][end - 1]), last_id=int(cols["id"][end - 1]),
                    n=size, **{c: cols[c][end - size : end].astype("<f8").tobytes() for c in _BLOCK_COLUMNS},
                )
                for end in range(size, (full + 1) * size, size)
            ]  # fmt: skip
            try:
                with transaction.atomic():
                    RunMetricBlock.objects.bulk_create(blocks)
            except IntegrityError:  # another compaction wrote these blocks first
                return written
            written += full
            if full < BATCH_BLOCKS:
                return written
