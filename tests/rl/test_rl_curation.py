"""Curation state: dynamic N, step limits, pool / cache / replay injection, curriculum, plateau, checkpoints."""

import json
from typing import Any

import pytest

from workers.rl.curation import (
    BepaCache,
    DynamicRolloutCount,
    ExperiencePool,
    PlateauDetector,
    ReplayBuffer,
    StepLimit,
    curriculum_bucket,
    rollouts_for_success_rate,
)


def through_json(obj: Any) -> Any:
    """Checkpoint and restore through JSON, as a run would."""
    return type(obj).from_dict(json.loads(json.dumps(obj.to_dict())))


@pytest.mark.parametrize(
    ("rate", "n"),
    [(None, 8), (0.0, 8), (0.6, 8), (0.61, 7), (0.7, 6), (0.8, 5), (0.9, 3), (1.0, 2)],
)
def test_rollouts_for_success_rate(rate: float | None, n: int) -> None:
    # N = 8 − ceil((rate − 0.6) / 0.4 · 6): 0.61 → ceil(0.15) = 1, 0.7 → ceil(1.5) = 2, 0.8 → 3, 0.9 → ceil(4.5) = 5 removed
    assert rollouts_for_success_rate(rate) == n


def test_rollouts_for_success_rate_rejects_bad_values() -> None:
    for bad in (1.2, -0.1, float("nan")):
        with pytest.raises(ValueError):
            rollouts_for_success_rate(bad)
    with pytest.raises(ValueError):
        rollouts_for_success_rate(0.5, n_max=8, n_min=1)


def test_dynamic_rollout_count_uses_a_sliding_window() -> None:
    dyn = DynamicRolloutCount(window=4)
    assert dyn.n_for("t") == 8 and dyn.success_rate("t") is None
    dyn.record("t", [True, True, True, False])
    assert dyn.success_rate("t") == 0.75 and dyn.n_for("t") == 5  # 8 − ceil(2.25)
    dyn.record("t", [True])  # window now T T F T
    assert dyn.success_rate("t") == 0.75
    dyn.record("t", [True, True, True])  # window T T T T
    assert dyn.n_for("t") == 2
    restored = through_json(dyn)
    assert restored.n_for("t") == 2 and restored.success_rate("t") == 1.0
    restored.record("t", [False])
    assert restored.success_rate("t") == 0.75  # the window survived the checkpoint
    with pytest.raises(ValueError):
        dyn.record("", [True])


def test_step_limit() -> None:
    limit = StepLimit(cap=30)
    assert limit.limit_for("t") == 30
    limit.record_success("t", 12)
    limit.record_success("t", 8)
    assert limit.limit_for("t") == 12
    limit.record_success("u", 45)
    assert limit.limit_for("u") == 30
    assert through_json(limit).limit_for("t") == 12
    with pytest.raises(ValueError):
        limit.record_success("t", 0)


def test_experience_pool_injects_only_when_all_fail() -> None:
    pool = ExperiencePool(per_task=2, seed=3)
    pool.add("t", "a")
    pool.add("t", "b")
    pool.add("t", "a")  # duplicate ignored
    assert len(pool) == 2
    assert pool.draw_if_all_failed("t", [False, True]) is None
    assert pool.draw_if_all_failed("other", [False, False]) is None
    use = pool.draw_if_all_failed("t", [False] * 8)
    assert use is not None and use.trajectory_id in {"a", "b"}
    assert (use.source, use.task_id, use.replace_index, use.use_count) == ("experience_pool", "t", None, 1)
    assert pool.uses(use.trajectory_id) == 1 and pool.total_uses == 1
    pool.add("t", "c")  # per_task = 2: the oldest, "a", falls out
    picks = {pool.draw_if_all_failed("t", [False]).trajectory_id for _ in range(30)}  # type: ignore[union-attr]
    assert picks == {"b", "c"}
    assert pool.total_uses == 31
    with pytest.raises(ValueError):
        pool.draw_if_all_failed("t", [])


def test_experience_pool_resumes_the_same_random_sequence() -> None:
    pool = ExperiencePool(seed=7)
    for i in range(10):
        pool.add("t", f"s{i}")
    for _ in range(3):
        pool.draw_if_all_failed("t", [False])
    restored = through_json(pool)
    original = [pool.draw_if_all_failed("t", [False]).trajectory_id for _ in range(5)]  # type: ignore[union-attr]
    resumed = [restored.draw_if_all_failed("t", [False]).trajectory_id for _ in range(5)]  # type: ignore[union-attr]
    assert original == resumed
    assert restored.total_uses == pool.total_uses == 8


def test_bepa_cache() -> None:
    cache = BepaCache(seed=1)
    assert cache.inject_if_all_failed("t", [False, False]) is None  # nothing cached yet
    cache.seed_entry("t", "expert-rerolled")
    use = cache.inject_if_all_failed("t", [False, False])
    assert use is not None
    assert (use.trajectory_id, use.replace_index, use.recompute_logprobs) == ("expert-rerolled", 0, True)
    assert cache.inject_if_all_failed("t", [False, True]) is None  # the group has its own success
    cache.update("t", ["s1", "s2"])
    assert cache.get("t") in {"s1", "s2"} and cache.updates == 1
    cache.update("t", [])
    assert cache.updates == 1
    cache.update("t", ["s3"])  # any new success overwrites
    assert cache.get("t") == "s3"
    restored = through_json(cache)
    assert restored.get("t") == "s3" and restored.updates == 2 and restored.total_uses == 1


def test_replay_buffer_keeps_most_recent_eight() -> None:
    replay = ReplayBuffer(per_task=8, seed=0)
    for i in range(10):
        replay.add("t", f"s{i}")
    assert replay.recent("t") == [f"s{i}" for i in range(2, 10)]
    replay.add("t", "s3")  # re-added: becomes the most recent
    assert replay.recent("t")[-1] == "s3" and len(replay.recent("t")) == 8
    assert replay.sample_if_all_failed("t", [True, False], k=3) == []
    picks = replay.sample_if_all_failed("t", [False, False], k=3)
    assert len({p.trajectory_id for p in picks}) == 3
    assert all(p.trajectory_id in replay.recent("t") and p.source == "replay" for p in picks)
    assert len(replay.sample_if_all_failed("t", [False], k=20)) == 8
    assert replay.sample_if_all_failed("empty", [False]) == []
    assert through_json(replay).recent("t") == replay.recent("t")


@pytest.mark.parametrize(
    ("rate", "bucket"),
    [
        (0.0, "0-25"),
        (0.2499, "0-25"),
        (0.25, "25-50"),
        (0.5, "50-75"),
        (0.74, "50-75"),
        (0.75, "75-100"),
        (1.0, "75-100"),
    ],
)
def test_curriculum_bucket(rate: float, bucket: str) -> None:
    assert curriculum_bucket(rate) == bucket


def test_curriculum_bucket_rejects_out_of_range() -> None:
    for bad in (-0.1, 1.01, float("nan")):
        with pytest.raises(ValueError):
            curriculum_bucket(bad)


def test_plateau_detector() -> None:
    flat = PlateauDetector(window=3, reward_min_gain=0.01, entropy_max_rel_change=0.0)
    fired = [flat.record(0.5, 1.0 - 0.1 * i) for i in range(6)]
    assert fired == [False] * 5 + [True]  # needs 2·window points; then flat reward, falling entropy
    restored = through_json(flat)
    assert restored.plateaued
    flat.reset()
    assert not flat.plateaued

    rising_reward = PlateauDetector(window=3)
    assert not any(rising_reward.record(0.1 * i, 1.0) for i in range(6))  # windows 0.1 vs 0.4
    rising_entropy = PlateauDetector(window=3)
    assert not any(rising_entropy.record(0.5, 1.0 + 0.1 * i) for i in range(6))
    with pytest.raises(ValueError):
        rising_entropy.record(float("nan"), 1.0)
