"""GroupCurator: staleness, dynamic N, step limit, injection per mode, no-signal groups, checkpoints."""

import json

import pytest

from workers.rl.config import CurationConfig
from workers.rl.curator import GroupCurator, RolloutOutcome, staleness, within_staleness_bound


def outcomes(
    rewards: list[float], steps: int = 5, version: int = 3, prefix: str = "r"
) -> list[RolloutOutcome]:
    return [RolloutOutcome(f"{prefix}{i}", r, steps, version) for i, r in enumerate(rewards)]


def test_staleness() -> None:
    assert staleness(3, 5) == 2
    assert within_staleness_bound(4, 5, 1) and not within_staleness_bound(3, 5, 1)
    assert within_staleness_bound(5, 5, 0)
    with pytest.raises(ValueError, match="newer"):
        staleness(6, 5)


def test_mixed_group_trains_and_updates_limits() -> None:
    cur = GroupCurator(CurationConfig(success_window=8))
    group = [*outcomes([1.0, 0.0, 0.0, 1.0], steps=7), RolloutOutcome("late", 1.0, 12, 3)]
    plan = cur.process_group("t", group, current_version=3)
    assert plan.train_ids == ["r0", "r1", "r2", "r3", "late"]
    assert plan.successes == [True, False, False, True, True]
    assert plan.injections == [] and not plan.no_signal
    assert plan.step_limit == 12  # longest success so far
    # 3/5 = 0.6 is not above the threshold: N stays 8; bucket 50-75
    assert plan.next_rollouts == 8 and plan.curriculum == "50-75"
    assert len(cur.pool) == 3


def test_stale_rollouts_are_not_trained_on() -> None:
    cur = GroupCurator(CurationConfig(staleness_bound=1))
    group = [
        RolloutOutcome("old", 1.0, 3, 1),
        RolloutOutcome("ok", 0.0, 3, 4),
        RolloutOutcome("new", 1.0, 3, 5),
    ]
    plan = cur.process_group("t", group, current_version=5)
    assert plan.stale_ids == ["old"] and plan.train_ids == ["ok", "new"]
    assert cur.counters["stale_rollouts"] == 1
    only_stale = cur.process_group("t", [RolloutOutcome("x", 1.0, 3, 0)], current_version=5)
    assert only_stale.train_ids == [] and only_stale.no_signal


def test_all_failed_group_gets_a_stored_success_once_one_exists() -> None:
    cur = GroupCurator(CurationConfig())
    first = cur.process_group("t", outcomes([0.0] * 8), 3)
    assert first.injections == [] and first.no_signal  # nothing stored yet
    cur.process_group("t", outcomes([1.0, 0.0], prefix="win"), 3)
    plan = cur.process_group("t", outcomes([0.0] * 8, prefix="lose"), 3)
    assert [i.trajectory_id for i in plan.injections] == ["win0"]
    assert plan.injections[0].source == "experience_pool" and not plan.no_signal
    assert cur.counters["injections/experience_pool"] == 1
    assert cur.counters["no_signal_groups"] == 1 and cur.counters["groups"] == 3


@pytest.mark.parametrize(("mode", "replace_index"), [("bepa_cache", 0), ("replay", None)])
def test_other_injection_modes(mode: str, replace_index: int | None) -> None:
    cur = GroupCurator(CurationConfig(injection=mode))  # type: ignore[arg-type]
    cur.process_group("t", outcomes([1.0, 0.0], prefix="win"), 3)
    plan = cur.process_group("t", outcomes([0.0] * 4), 3)
    assert len(plan.injections) == 1
    assert plan.injections[0].source == mode and plan.injections[0].replace_index == replace_index
    assert plan.injections[0].trajectory_id == "win0"


def test_injection_off_and_all_success_groups_carry_no_signal() -> None:
    cur = GroupCurator(CurationConfig(injection="none"))
    cur.process_group("t", outcomes([1.0, 0.0]), 3)
    assert cur.process_group("t", outcomes([0.0, 0.0]), 3).no_signal
    plan = cur.process_group("u", outcomes([1.0] * 8), 3)
    assert plan.no_signal and plan.next_rollouts == 2 and plan.curriculum == "75-100"


def test_with_step_credit_successes_of_different_lengths_carry_signal() -> None:
    """GiGPO's step credit (grpo.anchor_weight > 0) ranks a direct success over a detour: such a
    group is trained; equal lengths, all failures or step credit off stay without signal."""
    cur = GroupCurator(CurationConfig(injection="none"))
    detour = [*outcomes([1.0] * 3, steps=1), RolloutOutcome("long", 1.0, 3, 3)]
    assert not cur.process_group("t", detour, 3, step_credit=True).no_signal
    assert cur.process_group("t", detour, 3).no_signal
    assert cur.process_group("t", outcomes([1.0] * 4, steps=2), 3, step_credit=True).no_signal
    failed = [*outcomes([0.0] * 3, steps=1), RolloutOutcome("long", 0.0, 6, 3)]
    assert cur.process_group("t", failed, 3, step_credit=True).no_signal


def test_checkpoint_round_trip() -> None:
    cur = GroupCurator(CurationConfig(injection="bepa_cache"))
    cur.process_group("t", outcomes([1.0, 0.0, 1.0], steps=9), 3)
    restored = GroupCurator.from_dict(json.loads(json.dumps(cur.to_dict())))
    assert restored.to_dict() == cur.to_dict()
    a = cur.process_group("t", outcomes([0.0] * 3), 3)
    b = restored.process_group("t", outcomes([0.0] * 3), 3)
    assert a == b


def test_bad_input() -> None:
    cur = GroupCurator(CurationConfig())
    with pytest.raises(ValueError):
        cur.process_group("t", [], 3)
    with pytest.raises(ValueError):
        cur.process_group("t", [RolloutOutcome("a", float("nan"), 3, 3)], 3)
    with pytest.raises(ValueError, match="rollouts_min"):
        GroupCurator(CurationConfig(rollouts_min=1))
