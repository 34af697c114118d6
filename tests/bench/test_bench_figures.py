"""The mechanics behind reported figures (SPEC §10, issue 24): Wilson intervals, seed ranges that
never overlap, the split a run reads, the SPEC keys of every benchmark's JSON."""

from __future__ import annotations

import importlib
import inspect

import pytest

from benchmarks.harness.config import (
    ASR_SEED_OFFSETS,
    LEARN_NEW_SET_EXCLUDED,
    LEARN_SEEDS,
    LEARN_STARTER_SETS,
    LEARN_TASK_SETS,
    AsrBenchConfig,
    LearnBenchConfig,
    RolloutBenchConfig,
    report_split,
)
from benchmarks.harness.stats import SeedRanges, bootstrap_ratio_interval, percentile, rate, wilson_interval
from benchmarks.management.commands.bench import BENCHES, SPEC_KEYS, missing_keys


@pytest.mark.parametrize(
    ("k", "n", "low", "high"),
    [(0, 10, 0.0, 0.2775), (5, 10, 0.2366, 0.7634), (10, 10, 0.7225, 1.0), (44, 120, 0.2858, 0.4558)],
)
def test_wilson_interval_matches_the_textbook_values(k: int, n: int, low: float, high: float) -> None:
    lo, hi = wilson_interval(k, n)
    assert lo == pytest.approx(low, abs=1e-4) and hi == pytest.approx(high, abs=1e-4)


def test_wilson_interval_refuses_impossible_counts_and_is_vacuous_without_data() -> None:
    with pytest.raises(ValueError):
        wilson_interval(3, 2)
    assert wilson_interval(0, 0) == (0.0, 1.0)
    assert rate(3, 4)["ci95"][0] < 0.75 < rate(3, 4)["ci95"][1]


def test_percentile_is_the_nearest_rank_and_a_measured_value() -> None:
    values = [float(v) for v in range(100, 0, -1)]  # 100 … 1, unsorted on purpose
    assert percentile(values, 0.95) == 95.0 and percentile(values, 0.5) == 50.0
    assert percentile(values, 0.0) == 1.0 and percentile(values, 1.0) == 100.0
    assert percentile([3.0, 1.0, 2.0], 0.5) == 2.0 and percentile([7.5], 0.95) == 7.5
    assert percentile([1.0, 2.0], 0.5) == 1.0  # no interpolation: 1.5 was never measured
    for bad in (-0.1, 1.1, float("nan")):
        with pytest.raises(ValueError, match="q must lie"):
            percentile(values, bad)
    with pytest.raises(ValueError, match="no values"):
        percentile([], 0.5)


def test_seed_ranges_never_overlap() -> None:
    with pytest.raises(ValueError, match="overlap"):
        SeedRanges(tuning=range(0, 10), validation=range(5, 15), final_test=range(100, 110))
    ranges = [LEARN_SEEDS.tuning, LEARN_SEEDS.validation, LEARN_SEEDS.final_test]
    assert all(set(a).isdisjoint(b) for i, a in enumerate(ranges) for b in ranges[i + 1 :])
    assert LEARN_SEEDS.first("final_test", 4) == range(110_000, 110_004)  # a quick subset stays inside


def test_a_full_run_reads_the_final_test_and_a_quick_run_never_does(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FLYWHEEL_BENCH_SPLIT", raising=False)
    assert report_split(quick=False) == "final_test" and report_split(quick=True) == "validation"
    full, quick = LearnBenchConfig.for_run(False), LearnBenchConfig.for_run(True)
    assert set(full.eval_range) <= set(LEARN_SEEDS.final_test)
    assert set(quick.eval_range) <= set(LEARN_SEEDS.validation)
    assert set(full.demo_range) <= set(LEARN_SEEDS.tuning)
    monkeypatch.setenv("FLYWHEEL_BENCH_SPLIT", "test")
    with pytest.raises(ValueError, match="FLYWHEEL_BENCH_SPLIT"):
        report_split(quick=False)


def test_asr_session_seeds_of_the_splits_are_disjoint() -> None:
    seeds = {
        s: {AsrBenchConfig(quick=False, split=s).session_seed(k) for k in range(200)}
        for s in ASR_SEED_OFFSETS
    }
    assert seeds["final_test"].isdisjoint(seeds["tuning"] | seeds["validation"])
    # the sessions the decoding options were tuned on (offsets 0 and 1000) are not the final test's
    assert seeds["final_test"].isdisjoint({7919 * k + 1001 for k in range(200)})


def test_learn_ablation_and_second_task_set_by_configuration(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLYWHEEL_LEARN_INJECTION", "none")
    monkeypatch.setenv("FLYWHEEL_LEARN_TASK_SET", "second")
    config = LearnBenchConfig.for_run(True)
    assert config.curation()["injection"] == "none"
    assert config.tasks == list(LEARN_TASK_SETS["second"])
    assert set(LEARN_TASK_SETS["first"]).isdisjoint(LEARN_TASK_SETS["second"])
    monkeypatch.setenv("FLYWHEEL_LEARN_INJECTION", "sometimes")
    with pytest.raises(ValueError, match="INJECTION"):
        LearnBenchConfig.for_run(True)


def test_the_new_set_is_its_stated_rule_and_has_no_expert() -> None:
    """issue 34 item 4: the "new" set is every shipped variant of a first-set task with no scripted
    expert, in no other set, within the step cap (config's comment), re-derived here from the wheel
    and the expert module; adding an expert for one of its tasks (to SUPPORTED_TASKS or to
    plan_episode) fails this test."""
    from workers.envs.base import Observation
    from workers.envs.browser.miniwob import list_miniwob_tasks
    from workers.policy.expert import SUPPORTED_TASKS, ExpertError, plan_episode

    new, others = LEARN_TASK_SETS["new"], set(LEARN_TASK_SETS["first"]) | set(LEARN_TASK_SETS["second"])
    assert len(new) >= 8 and len(set(new)) == len(new)
    assert others.isdisjoint(new)
    assert set(SUPPORTED_TASKS).isdisjoint(new)
    blank = Observation(screenshot=b"", width=160, height=210)
    for task in new:
        with pytest.raises(ExpertError, match="no scripted expert"):
            plan_episode(task, 'Click "x" #1 and click Submit.', blank)
    variants = {
        t for t in list_miniwob_tasks() for first in LEARN_TASK_SETS["first"] if t.startswith(f"{first}-")
    }
    rule = variants - set(SUPPORTED_TASKS) - others - set(LEARN_NEW_SET_EXCLUDED)
    assert set(new) == rule
    assert set(LEARN_NEW_SET_EXCLUDED) <= variants  # an exclusion names a real candidate
    assert LEARN_STARTER_SETS == {"new"}


def test_the_new_set_starts_from_the_starter_and_refuses_injection(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FLYWHEEL_LEARN_INJECTION", raising=False)
    monkeypatch.setenv("FLYWHEEL_LEARN_TASK_SET", "new")
    for quick in (True, False):
        config = LearnBenchConfig.for_run(quick)
        assert config.start == "starter" and config.injection == "none"
        assert config.sft_steps == 0 and config.demo_seeds == 0
        assert config.curation()["injection"] == "none"
        assert config.to_json()["start"] == "starter" and config.to_json()["demo_range"] is None
    assert set(LearnBenchConfig.for_run(False).eval_range) <= set(LEARN_SEEDS.final_test)
    monkeypatch.setenv("FLYWHEEL_LEARN_INJECTION", "none")
    assert LearnBenchConfig.for_run(True).injection == "none"
    monkeypatch.setenv("FLYWHEEL_LEARN_INJECTION", "experience_pool")
    with pytest.raises(ValueError, match="'new' task set learns without demonstrations"):
        LearnBenchConfig.for_run(True)
    with pytest.raises(ValueError, match="without demonstrations"):
        LearnBenchConfig(quick=True, task_set="new")  # the dataclass's own default injection
    # the other sets keep their SFT start and their default injection
    monkeypatch.delenv("FLYWHEEL_LEARN_INJECTION")
    for name in ("first", "second"):
        monkeypatch.setenv("FLYWHEEL_LEARN_TASK_SET", name)
        config = LearnBenchConfig.for_run(False)
        assert config.start == "sft" and config.injection == "experience_pool" and config.sft_steps == 120
        assert config.to_json()["demo_range"] == [0, 2]


def test_learn_anchor_weight_reaches_the_run_config(monkeypatch: pytest.MonkeyPatch) -> None:
    from workers.rl.run_config import run_config_build

    monkeypatch.delenv("FLYWHEEL_LEARN_ANCHOR_WEIGHT", raising=False)
    assert LearnBenchConfig.for_run(True).grpo()["anchor_weight"] == 0.0  # off: the figures so far
    monkeypatch.setenv("FLYWHEEL_LEARN_ANCHOR_WEIGHT", "1")
    config = LearnBenchConfig.for_run(True)
    built = run_config_build(algorithm="grpo", config={"grpo": config.grpo(), "curation": config.curation()})
    assert built["grpo"]["anchor_weight"] == 1.0 and built["grpo"]["anchor_gamma"] == 0.95


def test_bootstrap_interval_brackets_the_pooled_ratio() -> None:
    errors, words = [3, 10, 0, 5, 8], [100, 120, 90, 110, 100]
    low, high = bootstrap_ratio_interval(errors, words)
    assert low < sum(errors) / sum(words) < high
    assert bootstrap_ratio_interval(errors, words) == (low, high)  # seeded


def test_every_bench_has_its_spec_keys_declared() -> None:
    assert set(SPEC_KEYS) == set(BENCHES)
    assert missing_keys("rollout", {"async_over_sync": 2.0}) == [
        "async_actions_per_min", "sync_actions_per_min", "async_env_utilization", "sync_env_utilization", "workload"
    ]  # fmt: skip


@pytest.mark.parametrize("name", sorted(BENCHES))
def test_every_registry_entry_imports_a_runner_that_takes_quick(name: str) -> None:
    """`manage.py bench NAME` resolves: the module imports, the function exists and takes `quick`,
    and SPEC §10 names keys for it (the slow tests/bench/test_bench_quick.py runs each one)."""
    module, function = BENCHES[name].split(":")
    runner = getattr(importlib.import_module(module), function)
    assert "quick" in inspect.signature(runner).parameters
    assert SPEC_KEYS[name]


ASSEMBLED_FROM = {"envstep": ("benchmarks.envstep_desktop", "benchmarks.envstep_browser"),
                  "learn": ("benchmarks.learn",)}  # fmt: skip


@pytest.mark.parametrize("name", sorted(BENCHES))
def test_each_bench_module_writes_its_spec_keys(name: str) -> None:
    """Cheap guard against a renamed key: every SPEC key appears as a key in the bench's module (or
    the modules it assembles its figures from); the computed figures are checked by the tests below
    and by the command itself, which refuses a result without them."""
    modules = [BENCHES[name].split(":")[0], *ASSEMBLED_FROM.get(name, ())]
    sources = "".join(inspect.getsource(importlib.import_module(m)) for m in modules)
    for key in SPEC_KEYS[name]:
        assert f'"{key}"' in sources or f"{key}=" in sources, f"bench {name}: no {key}"


def test_rollout_figures_carry_the_spec_keys() -> None:
    from benchmarks.rollout import rollout_figures

    mode = {"usable_actions_per_min": 120.0, "env_utilization": 0.9}
    figures = rollout_figures(
        RolloutBenchConfig.for_run(True), {"async": mode, "sync": {**mode, "usable_actions_per_min": 60.0}}
    )
    assert missing_keys("rollout", figures) == []
    assert figures["async_over_sync"] == 2.0 and "starter model" in figures["workload"]
    assert figures["cpu_ceiling_async_over_sync"] is None  # no CPU figures measured
    # async ÷ sync = (cores used, ratio) × (usable actions per CPU-second, ratio)
    cpu = {"async": {"own_cores": 2.0, "cores": 2}, "sync": {"own_cores": 1.6, "cores": 2}}
    figures = rollout_figures(
        RolloutBenchConfig.for_run(True),
        {
            m: {**mode, "usable_actions_per_min": r, "cpu": cpu[m]}
            for m, r in (("async", 120.0), ("sync", 60.0))
        },
    )
    assert figures["cpu_ceiling_async_over_sync"] == 1.25 and figures["sync_cores_used"] == 1.6
    ratio = figures["async_usable_actions_per_cpu_s"] / figures["sync_usable_actions_per_cpu_s"]
    assert ratio * 2.0 / 1.6 == pytest.approx(figures["async_over_sync"], rel=1e-2)


def test_usable_counts_take_steps_within_the_bound_and_episodes_with_one() -> None:
    from benchmarks.rollout import usable_counts

    # three rollouts of one group consumed by the update at version 5, staleness bound 2: oldest 3
    assert usable_counts([["5", "4"], ["3", "2", "2"], ["1", "2"]], oldest=3) == (3, 2)
    assert usable_counts([["v1"], []], oldest=0) == (0, 0)  # not a version number: never usable


def test_async_over_sync_is_episodes_ratio_times_actions_per_episode_ratio() -> None:
    """The remote-VM quick run's puzzle: more episodes in async mode, a lower actions ratio. The
    actions ratio factors exactly into the two, so the JSON shows which one moved it."""
    from benchmarks.rollout import rollout_figures

    # async: 12 episodes (three groups of 4) of 1-2 steps; sync: 8 episodes, one group run to the cap
    modes = {
        "async": {"usable_by_group": [4, 6, 4], "usable_episodes_by_group": [4, 4, 4]},
        "sync": {"usable_by_group": [32, 4], "usable_episodes_by_group": [4, 4]},
    }
    for m in modes.values():  # a 240 s window, as the bench computes them
        m["usable_actions_per_min"] = round(60.0 * sum(m["usable_by_group"]) / 240.0, 2)
        m["usable_episodes_per_min"] = round(60.0 * sum(m["usable_episodes_by_group"]) / 240.0, 2)
        m["env_utilization"] = 0.9
    figures = rollout_figures(RolloutBenchConfig.for_run(True), modes)
    assert (figures["async_actions_per_min"], figures["sync_actions_per_min"]) == (3.5, 9.0)
    assert figures["async_over_sync"] == round(14 / 36, 3)
    assert figures["async_over_sync_episodes"] == 1.5
    assert (figures["async_actions_per_episode"], figures["sync_actions_per_episode"]) == (
        round(14 / 12, 3),
        4.5,
    )
    product = figures["async_over_sync_episodes"] * figures["actions_per_episode_ratio"]
    assert product == pytest.approx(figures["async_over_sync"], abs=2e-3)
    # every group N = 4 usable episodes: a bootstrap over groups cannot show a spread, so no interval
    assert figures["async_over_sync_episodes_ci95"] is None
    modes["sync"]["usable_episodes_by_group"] = [4, 3]  # one rollout lost
    modes["sync"]["usable_episodes_per_min"] = 1.75
    low, high = rollout_figures(RolloutBenchConfig.for_run(True), modes)["async_over_sync_episodes_ci95"]
    assert low <= 3.0 / 1.75 <= high
    assert "latency" not in figures  # only the remote-VM workload states a latency distribution


def test_the_remote_workload_states_its_latency_distribution(monkeypatch: pytest.MonkeyPatch) -> None:
    from benchmarks.rollout import rollout_figures

    monkeypatch.setenv("FLYWHEEL_ROLLOUT_WORKLOAD", "remote")
    mode = {"usable_actions_per_min": 10.0, "env_utilization": 0.9}
    figures = rollout_figures(RolloutBenchConfig.for_run(True), {"async": mode, "sync": mode})
    assert figures["latency"] == {"step_s": (1.0, 3.0), "reset_s": (5.0, 20.0), "tail_p": 0.05,
                                  "tail_factor": (1.5, 2.5)}  # fmt: skip
    assert "remote-VM latency" in figures["workload"]


def test_learn_figures_carry_the_spec_keys_and_intervals() -> None:
    from benchmarks.learn import learn_figures
    from workers.policy.evaluate import EpisodeResult, EvalReport

    def report(successes: int) -> EvalReport:
        return EvalReport([EpisodeResult("click-test", s, s < successes, 1) for s in range(10)])

    figures = learn_figures(
        LearnBenchConfig(quick=True), report(2), report(7), report(6), True, [0.1, 0.2, 0.4]
    )
    assert missing_keys("learn", figures) == []
    assert figures["gain_points"] == 50.0
    assert figures["success_after_ci95"] == [round(x, 4) for x in wilson_interval(7, 10)]
    assert figures["after_per_task"]["click-test"]["ci95"][0] > 0.39


def test_learn_headline_is_the_sum_of_its_per_task_table() -> None:
    """Issue 35 item 5: a reported "before" of 42.5 % whose per-task rates added up to 38.3 %. The
    JSON's headline, its interval and the gain are recomputed from its own per-task counts."""
    from benchmarks.learn import learn_figures
    from workers.policy.evaluate import EpisodeResult, EvalReport

    def report(wins: dict[str, int]) -> EvalReport:
        return EvalReport([EpisodeResult(t, s, s < k, 1) for t, k in wins.items() for s in range(15)])

    # the first set's reported per-task "before" (7, 3, 4, 13, 0, 7, 9, 3 of 15) and "after"
    tasks = ["click-test", "click-button", "click-link", "focus-text", "enter-text", "click-dialog", "click-tab",
             "click-checkboxes"]  # fmt: skip
    before = report(dict(zip(tasks, [7, 3, 4, 13, 0, 7, 9, 3], strict=True)))
    after = report(dict(zip(tasks, [15, 14, 11, 15, 0, 11, 15, 3], strict=True)))
    figures = learn_figures(LearnBenchConfig(quick=False), before, after, after, True, [])
    for side in ("before", "after"):
        table = figures[f"{side}_per_task"].values()
        k, n = sum(row["successes"] for row in table), sum(row["n"] for row in table)
        assert figures[f"success_{side}"] == round(k / n, 4)
        assert figures[f"success_{side}_ci95"] == [round(x, 4) for x in wilson_interval(k, n)]
    assert figures["success_before"] == 0.3833 and figures["success_after"] == 0.7
    assert (
        figures["gain_points"]
        == round(100 * (figures["success_after"] - figures["success_before"]), 1)
        == 31.7
    )


def test_env_utilization_is_time_inside_episodes_over_the_window() -> None:
    from benchmarks.harness.figures import env_utilization

    # two environments, a 10 s window: one busy 0-10, one busy 2-6 and from 8 on (unfinished)
    episodes = [(0.0, 10.0), (2.0, 6.0), (8.0, None), (-5.0, 1.0)]
    assert env_utilization(episodes, 0.0, 10.0, 2) == pytest.approx((10 + 4 + 2 + 1) / 20)
    assert env_utilization([], 0.0, 10.0, 2) == 0.0
