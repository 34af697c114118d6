"""Issue 37 item 7: the remote-VM `bench rollout` final tests kept in benchmarks/results/
(rollout-remote-final-*.json) are what docs/benchmarks.md reports. Each JSON's `async_over_sync` is
recomputed from its per-group usable actions and its window, its interval from the same groups; the
row says the reported seed's figure with its interval, and the pooled figure over every kept final
seed, so a row copied wrong or a result edited by hand fails here."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.harness.stats import bootstrap_sum_ratio_interval
from tests.bench.reported import RESULTS as RESULTS_DIR
from tests.bench.reported import docs_row, load

RESULTS = sorted(RESULTS_DIR.glob("rollout-remote-final-*.json"))
REPORTED_SEED = 80005  # declared in benchmarks/HISTORY.md before it ran (SPEC's unit, usable actions/min)


def test_the_final_seeds_are_kept() -> None:
    seeds = [load(p)["config"]["seed"] for p in RESULTS]
    assert {80004, REPORTED_SEED} <= set(seeds) and len(seeds) == len(set(seeds))


@pytest.mark.parametrize("path", RESULTS, ids=lambda p: p.name)
def test_a_kept_final_run_is_its_groups(path: Path) -> None:
    figures = load(path)
    config = figures["config"]
    assert figures["split"] == "final_test" and config["workload"] == "remote" and not config["quick"]
    assert path.name == f"rollout-remote-final-{config['seed']}.json"
    for mode in ("async", "sync"):
        per_min = 60.0 * sum(figures[mode]["usable_by_group"]) / config["window_s"]
        assert figures[f"{mode}_actions_per_min"] == pytest.approx(per_min, abs=0.01)
    ratio = figures["async_actions_per_min"] / figures["sync_actions_per_min"]
    assert figures["async_over_sync"] == pytest.approx(ratio, abs=0.001)
    low, high = bootstrap_sum_ratio_interval(
        figures["async"]["usable_by_group"], figures["sync"]["usable_by_group"]
    )
    assert figures["async_over_sync_ci95"] == [round(low, 3), round(high, 3)]


def test_docs_report_the_declared_seed_and_the_pooled_figure() -> None:
    by_seed = {load(p)["config"]["seed"]: load(p) for p in RESULTS}
    figures = by_seed[REPORTED_SEED]
    row = docs_row("rollout, remote VMs")
    low, high = figures["async_over_sync_ci95"]
    assert f"{figures['async_over_sync']:.2f} [{low:.2f}, {high:.2f}] in usable actions/min" in row, row
    assert f"util {figures['async_env_utilization']:.3f} vs {figures['sync_env_utilization']:.3f}" in row, row
    assert f"seed {REPORTED_SEED}, read once" in row
    pooled = {
        mode: [g for f in by_seed.values() for g in f[mode]["usable_by_group"]] for mode in ("async", "sync")
    }
    p_low, p_high = bootstrap_sum_ratio_interval(pooled["async"], pooled["sync"])
    point = sum(pooled["async"]) / sum(pooled["sync"])
    assert f"{point:.2f} [{p_low:.2f}, {p_high:.2f}] in actions" in row, row
