"""`bench presets` (issue 34): the success curve it reads from a run's episodes, and its settings."""

from __future__ import annotations

import pytest

from benchmarks.harness.platform_config import PresetsBenchConfig
from benchmarks.presets import _version_number, curve
from rl_control.presets import PRESETS


def test_a_run_that_learned_rises_and_one_that_did_not_does_not() -> None:
    learned = curve([False] * 30 + [True] * 10 + [False] * 10 + [True] * 30, [0] * 40 + [1] * 40)
    assert (learned["first_half"]["rate"], learned["second_half"]["rate"]) == (0.25, 0.75)
    assert learned["gain_points"] == 50.0 and learned["rising"] and learned["rising_significant"]
    low, high = learned["gain_points_ci95"]
    assert 20 < low < 50 < high < 80
    assert learned["by_version"]["starter_weights"]["rate"] == 0.25
    assert learned["by_version"]["trained_weights"]["n"] == 40
    assert learned["above_starter_points"] == 50.0 and learned["above_starter_points_ci95"][0] > 0
    flat = curve([True, False] * 40, [0] * 80)
    assert flat["gain_points"] == 0.0 and not flat["rising"] and not flat["rising_significant"]
    assert flat["by_version"]["trained_weights"]["n"] == 0
    worse = curve([True] * 20 + [False] * 20, [0] * 20 + [2] * 20)
    assert worse["gain_points"] == -100.0 and not worse["rising"]
    # a dip made by the first updates, then a climb back: rising, but not above the starter
    dip = curve([True] * 24 + [False] * 66 + [False] * 45 + [True] * 45, [0] * 24 + [1] * 156)
    assert dip["rising_significant"] and dip["above_starter_points"] == -50.0


def test_differences_compare_tasks_with_themselves() -> None:
    # the starter's weights play the run's first tasks (easy: 80 %), trained weights the rest (hard:
    # 10 %) as well; nothing learned: raw version 0 against later versions is a dip, task by task none
    easy = [True] * 8 + [False] * 2
    hard = [True] + [False] * 9
    successes = easy * 2 + (hard + easy) * 8
    tasks = ["easy"] * 20 + (["hard"] * 10 + ["easy"] * 10) * 8
    versions = [0] * 20 + [1] * 160
    flat = curve(successes, versions, tasks)
    assert (
        flat["by_version"]["starter_weights"]["rate"] == 0.8 > flat["by_version"]["trained_weights"]["rate"]
    )
    assert flat["above_starter_points"] == 0.0 and flat["above_starter_tasks"] == ["easy"]
    low, high = flat["above_starter_points_ci95"]
    assert low < 0 < high
    # halves whose task mixes differ: the raw gain is the mix, the standardised gain what changed per task
    mixed = curve(
        easy * 6 + hard * 4 + hard * 6 + [True] * 10 * 4,
        [1] * 200,
        ["easy"] * 60 + ["hard"] * 100 + ["easy"] * 40,
    )
    assert mixed["gain_points_unadjusted"] < 0 < mixed["gain_points"]
    assert mixed["rising_significant"]


def test_too_few_episodes_for_a_curve_say_so() -> None:
    for successes in ([], [True]):
        few = curve(successes, [0] * len(successes))
        assert not few["rising"] and not few["rising_significant"]
        assert few["gain_points_ci95"] == [-100.0, 100.0]


def test_episode_versions_as_the_engine_writes_them() -> None:
    assert [_version_number(v) for v in ("v0", "v12", "run3-v4", "7", 5, "", None)] == [0, 12, 4, 7, 5, 0, 0]


def test_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    full = PresetsBenchConfig.for_run(False)
    assert full.presets == tuple(sorted(PRESETS)) and full.window_s == 600 and full.seed is None
    assert PresetsBenchConfig.for_run(True).presets == tuple(sorted(PRESETS))[:1]
    monkeypatch.setenv("FLYWHEEL_BENCH_PRESETS", "bepa, grpo-dart")
    monkeypatch.setenv("FLYWHEEL_PRESETS_SEED", "7")
    chosen = PresetsBenchConfig.for_run(False)
    assert (chosen.presets, chosen.seed) == (("bepa", "grpo-dart"), 7)
    monkeypatch.setenv("FLYWHEEL_BENCH_PRESETS", "bepa,nope")
    with pytest.raises(ValueError, match="nope"):
        PresetsBenchConfig.for_run(False)


def test_a_few_starter_episodes_that_all_failed_leave_a_wide_interval() -> None:
    # 4 starter episodes, all failed; 100 later ones at 50 %: +50 points, but 4 episodes cannot say more
    # than that the starter's rate is somewhere below ~50 %
    few = curve([False] * 4 + [True, False] * 50, [0] * 4 + [1] * 100, ["t"] * 104)
    low, high = few["above_starter_points_ci95"]
    assert few["above_starter_points"] == 50.0 and low < 30 and high >= 50
