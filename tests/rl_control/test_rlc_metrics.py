"""Metrics store and series: bulk writes with one event, canonical names, min/max downsampling."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rl_control import selectors, services
from rl_control.metric_names import KEYED_PREFIXES, METRICS, metric_catalogue, metric_name_problem
from rl_control.models import Run, RunMetric
from workers.rl.stats import downsample_minmax

pytestmark = pytest.mark.django_db


def test_metric_names_are_grouped_and_described() -> None:
    groups = {"outcome", "policy", "value", "efficiency", "curation", "fleet"}
    assert {name.split("/")[0] for name in METRICS} == groups
    assert all(desc and "\n" not in desc for desc in METRICS.values())
    assert metric_name_problem("policy/entropy") is None
    assert metric_name_problem("outcome/success_rate/task/click-button") is None
    assert metric_name_problem("outcome/success_rate/task/") is not None
    assert metric_name_problem("losses/entropy") is not None
    assert len(metric_catalogue()) == len(METRICS) + len(KEYED_PREFIXES)


def test_record_writes_all_values_and_publishes_once(
    make_run, published, django_capture_on_commit_callbacks
) -> None:
    run = make_run()
    services.run_launch(run=run)
    published.clear()
    with django_capture_on_commit_callbacks(execute=True):
        rows = services.metrics_record(
            run=run, step=3, policy_version=2, samples=96, wall=12.5,
            values={"policy/entropy": 1.25, "value/explained_variance": math.nan,
                    "outcome/verified_success_rate": 0.375, "outcome/success_rate/task/click-test": 0.5},
        )  # fmt: skip
    assert len(rows) == 3  # NaN is not stored: the chart shows a gap
    stored = {m.name: (m.step, m.policy_version, m.samples, m.wall, m.value) for m in RunMetric.objects.all()}
    assert stored["policy/entropy"] == (3, 2, 96, 12.5, 1.25)
    assert "value/explained_variance" not in stored
    assert [e["type"] for e in published] == ["run.metrics"]
    assert published[0]["values"] == {
        "policy/entropy": 1.25, "outcome/verified_success_rate": 0.375, "outcome/success_rate/task/click-test": 0.5,
    }  # fmt: skip
    assert Run.objects.get(pk=run.pk).headline_success == 0.375


def test_record_refuses_unknown_names_and_stores_nothing(make_run) -> None:
    run = make_run()
    with pytest.raises(services.RunError, match="losses/pg"):
        services.metrics_record(
            run=run, step=0, policy_version=0, samples=0, values={"losses/pg": 1.0, "policy/kl": 0}
        )
    assert not RunMetric.objects.exists()


def test_wall_defaults_to_seconds_since_start(make_run) -> None:
    run = make_run()
    (row,) = services.metrics_record(run=run, step=0, policy_version=0, samples=0, values={"policy/kl": 0.1})
    assert row.wall == 0.0  # not started yet
    services.run_launch(run=run)
    (row,) = services.metrics_record(run=run, step=1, policy_version=1, samples=8, values={"policy/kl": 0.1})
    assert 0.0 <= row.wall < 60.0


def _bulk(run: Run, name: str, values: np.ndarray) -> None:
    RunMetric.objects.bulk_create(
        RunMetric(
            run=run, name=name, step=i, policy_version=i // 2, samples=8 * i, wall=0.5 * i, value=float(v)
        )
        for i, v in enumerate(values)
    )


def test_series_keeps_spikes_and_matches_the_pure_function(make_run) -> None:
    run = make_run()
    rng = np.random.default_rng(1)
    values = rng.standard_normal(20_000)
    values[12_345] = 50.0  # a single spike must survive downsampling
    values[777] = -50.0
    _bulk(run, "policy/grad_norm", values)
    _bulk(run, "policy/kl", np.zeros(10))
    out = selectors.metric_series(
        run_id=run.pk, names=["policy/grad_norm", "policy/kl", "value/loss"], points=400
    )
    grad, kl, missing = out["series"]
    assert grad["total"] == 20_000 and len(grad["x"]) <= 400 and len(grad["x"]) > 100
    assert max(grad["y"]) == 50.0 and min(grad["y"]) == -50.0 and 12_345 in grad["x"]
    ex, ey = downsample_minmax(np.arange(20_000), values, 100)
    assert grad["x"] == ex.tolist() and grad["y"] == ey.tolist()
    assert grad["last"] == {"x": 19_999.0, "y": values[-1]}
    assert kl["x"] == list(map(float, range(10))) and kl["total"] == 10
    assert missing == {"name": "value/loss", "x": [], "y": [], "total": 0, "last": None}


@pytest.mark.parametrize(("axis", "factor"), [("step", 1.0), ("samples", 8.0), ("wall", 0.5)])
def test_series_x_axes(make_run, axis: str, factor: float) -> None:
    run = make_run()
    _bulk(run, "policy/entropy", np.linspace(2, 1, 50))
    (series,) = selectors.metric_series(run_id=run.pk, names=["policy/entropy"], x=axis, points=1000)[
        "series"
    ]
    assert series["x"] == [factor * i for i in range(50)]
    (by_version,) = selectors.metric_series(run_id=run.pk, names=["policy/entropy"], x="version")["series"]
    assert by_version["x"][:4] == [0.0, 0.0, 1.0, 1.0]


def test_series_is_deterministic_live_and_finished(make_run) -> None:
    """Ties within a step come back in id order, so a live read equals a later one on the same rows."""
    run = make_run()
    services.run_launch(run=run)
    rng = np.random.default_rng(2)
    for step in range(300):
        for _ in range(3):  # three writers report the same step
            services.metrics_record(run=run, step=step, policy_version=step, samples=step,
                                    values={"fleet/boot_s": float(rng.uniform(1, 3))})  # fmt: skip
    live = selectors.metric_series(run_id=run.pk, names=["fleet/boot_s"], points=100)
    services.run_finish(run=run)
    assert selectors.metric_series(run_id=run.pk, names=["fleet/boot_s"], points=100) == live
    ids_order = list(RunMetric.objects.filter(run=run).order_by("step", "id").values_list("value", flat=True))
    xs, ys = downsample_minmax(np.repeat(np.arange(300), 3), ids_order, 25)
    assert live["series"][0]["x"] == xs.tolist() and live["series"][0]["y"] == ys.tolist()


def test_series_sorts_an_x_axis_that_steps_back(make_run) -> None:
    """After a resume from an older checkpoint the version may step back; the series stays plottable."""
    run = make_run()
    for step, version in enumerate([0, 1, 2, 1, 2, 3]):
        RunMetric.objects.create(
            run=run, name="policy/kl", step=step, policy_version=version, wall=step, value=step
        )
    (series,) = selectors.metric_series(run_id=run.pk, names=["policy/kl"], x="version")["series"]
    assert series["x"] == [0.0, 1.0, 1.0, 2.0, 2.0, 3.0] and series["y"] == [0.0, 1.0, 3.0, 2.0, 4.0, 5.0]


def test_recorded_names_of_a_run(make_run) -> None:
    run, other = make_run(name="a"), make_run(name="b")
    assert selectors.run_metric_names(run_id=run.pk) == []
    for name in ["value/loss", "fleet/live", "policy/kl", "fleet/live"]:
        RunMetric.objects.create(run=run, name=name, step=1, wall=0, value=1)
    RunMetric.objects.create(run=other, name="outcome/episodes", step=1, wall=0, value=1)
    assert selectors.run_metric_names(run_id=run.pk) == ["fleet/live", "policy/kl", "value/loss"]
