"""Packed metric blocks: a read cache that must never change what a series reads."""

from __future__ import annotations

import numpy as np
import pytest
from django.db import IntegrityError, transaction

from rl_control import selectors, services
from rl_control.models import RunMetric, RunMetricBlock

pytestmark = pytest.mark.django_db


@pytest.fixture
def small_blocks(monkeypatch) -> int:
    monkeypatch.setattr(RunMetricBlock, "BLOCK_POINTS", 1000)
    return 1000


def _points(run_id: int, name: str, x: str = "step") -> tuple[np.ndarray, np.ndarray]:
    with selectors.binary_cursor() as cursor:
        return selectors.metric_points(cursor, run_id=run_id, name=name, x=x)


def _fill(run, name: str, n: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    steps = np.sort(rng.integers(0, n // 2, size=n))  # ties: several points per step
    RunMetric.objects.bulk_create(
        RunMetric(run=run, name=name, step=int(s), policy_version=int(s) // 3, samples=8 * int(s), wall=s * 0.25,
                  value=float(v))
        for s, v in zip(steps, rng.standard_normal(n), strict=True)
    )  # fmt: skip


@pytest.mark.parametrize("batch", [2, 16])  # several reads per packing, or one
def test_blocks_read_exactly_like_rows(make_run, small_blocks, monkeypatch, batch: int) -> None:
    monkeypatch.setattr(services.metrics, "BATCH_BLOCKS", batch)
    run = make_run()
    _fill(run, "policy/grad_norm", 5500)
    _fill(run, "policy/kl", 300, seed=1)
    before = {x: _points(run.pk, "policy/grad_norm", x) for x in selectors.X_AXES}
    series_before = selectors.metric_series(run_id=run.pk, names=["policy/grad_norm"], points=200)

    written = services.metrics_compact(run_id=run.pk, name="policy/grad_norm", up_to_step=10_000)
    assert written == 5 and RunMetricBlock.objects.filter(run=run).count() == 5  # 500 points stay in the tail
    ends = list(
        RunMetricBlock.objects.filter(run=run)
        .order_by("last_step", "last_id")
        .values_list("last_id", flat=True)
    )
    ordered_ids = list(
        RunMetric.objects.filter(run=run, name="policy/grad_norm")
        .order_by("step", "id")
        .values_list("id", flat=True)
    )
    assert ends == [ordered_ids[k * 1000 - 1] for k in range(1, 6)]
    assert (
        services.metrics_compact(run_id=run.pk, name="policy/grad_norm", up_to_step=10_000) == 0
    )  # idempotent
    for x, (bx, by) in before.items():
        ax, ay = _points(run.pk, "policy/grad_norm", x)
        assert np.array_equal(ax, bx) and np.array_equal(ay, by), x
    assert selectors.metric_series(run_id=run.pk, names=["policy/grad_norm"], points=200) == series_before
    assert _points(run.pk, "policy/kl")[0].size == 300  # other series untouched


def test_recent_steps_are_never_packed(make_run, small_blocks) -> None:
    run = make_run()
    RunMetric.objects.bulk_create(
        RunMetric(run=run, name="policy/kl", step=i, wall=i, value=i) for i in range(1100)
    )
    # steps ≤ 1063 − 64 = 999 are eligible: exactly one block of 1000
    assert services.metrics_compact(run_id=run.pk, name="policy/kl", up_to_step=1063) == 1
    block = RunMetricBlock.objects.get(run=run)
    assert (block.last_step, block.n) == (999, 1000)
    assert np.array_equal(np.frombuffer(block.value, dtype="<f8"), np.arange(1000.0))
    xs, ys = _points(run.pk, "policy/kl")
    assert np.array_equal(xs, np.arange(1100.0)) and np.array_equal(ys, np.arange(1100.0))


def test_a_duplicate_block_is_refused(make_run, small_blocks) -> None:
    run = make_run()
    RunMetric.objects.bulk_create(
        RunMetric(run=run, name="policy/kl", step=i, wall=i, value=i) for i in range(1000)
    )
    services.metrics_compact(run_id=run.pk, name="policy/kl", up_to_step=5000)
    block = RunMetricBlock.objects.get(run=run)
    block.pk = None
    with pytest.raises(IntegrityError), transaction.atomic():
        block.save()


def test_metrics_record_packs_every_256_steps(make_run, monkeypatch) -> None:
    monkeypatch.setattr(RunMetricBlock, "BLOCK_POINTS", 100)
    run = make_run()
    for step in range(257):
        services.metrics_record(
            run=run, step=step, policy_version=step, samples=step, values={"policy/kl": step / 10}
        )
    # at step 256 the rows of steps 0..192 were eligible: one block of 100 points
    assert list(RunMetricBlock.objects.filter(run=run).values_list("n", "last_step")) == [(100, 99)]
    xs, ys = _points(run.pk, "policy/kl")
    assert np.array_equal(xs, np.arange(257.0)) and np.allclose(ys, np.arange(257) / 10)


def test_packing_follows_the_step_whatever_the_recording_cadence(make_run, monkeypatch) -> None:
    """Metrics every 7 steps never land on a multiple of 256; packing still happens once per window."""
    monkeypatch.setattr(RunMetricBlock, "BLOCK_POINTS", 20)
    run = make_run()
    for step in range(0, 600, 7):
        services.metrics_record(
            run=run, step=step, policy_version=step, samples=step, values={"fleet/live": 4}
        )
        if step == 252:
            assert not RunMetricBlock.objects.exists()
    run.refresh_from_db()
    assert run.metrics_packed_step == 518  # claimed at 259, then at the first step ≥ 259 + 256
    # at 518: steps ≤ 454 are eligible, 65 points → three blocks of 20
    assert RunMetricBlock.objects.filter(run=run).count() == 3
    xs, _ = _points(run.pk, "fleet/live")
    assert np.array_equal(xs, np.arange(0, 600, 7, dtype=float))
