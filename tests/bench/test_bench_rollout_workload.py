"""How `bench rollout` builds its "mix" workload (issue 24): one pool over MiniWoB++, desktop and game
tasks, one "mixed" run over all of them, each rollout leasing its task's own kind; seeds from the
split; the figures that say where a synchronous run's time goes. Real PostgreSQL and Redis, no
worker processes, not timed."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import override_settings

from benchmarks.harness.config import ROLLOUT_SEEDS, ROLLOUT_TASKS, RolloutBenchConfig
from benchmarks.harness.figures import kind_figures, sync_phases
from benchmarks.harness.stats import bootstrap_sum_ratio_interval
from benchmarks.rollout import mix_pool, pool_kinds, workload_text
from demo.setup import osworld_examples_dir
from rl_control import services
from rl_control.engine.data import rollout_claim, run_tasks
from rl_control.engine.keys import rds
from rl_control.engine.preflight import run_env_kinds
from rl_control.engine.worker import _lease_for_claim
from rl_control.models import EngineState, Run
from webapp.fleet import services as fleet
from workers.envs.games.env import list_games


@pytest.fixture
def names() -> Iterator[None]:
    """Own Redis prefixes for the engine and the fleet registry; removed afterwards."""
    name = uuid.uuid4().hex[:8]
    prefixes = {"RL_REDIS_PREFIX": f"test:rlw:{name}", "FLEET_REDIS_PREFIX": f"test:flw:{name}"}
    with override_settings(**prefixes):
        fleet.registry.cache_clear()
        yield
        r = rds()
        stale = [k for p in prefixes.values() for k in r.scan_iter(match=f"{p}:*")]
        if stale:
            r.delete(*stale)
    fleet.registry.cache_clear()


def _mixed_run(users: Any, pool: Any, **env: Any) -> Run:
    return services.run_create(
        user=users["researcher"], name=f"run-{env['kind']}", preset="grpo-dart", pool=pool,
        config={"env": {"parallel_envs": 2, **env}, "seed": 5000},
    )  # fmt: skip


@pytest.mark.django_db
def test_the_mix_pool_holds_every_shipped_task_of_three_kinds(users: Any) -> None:
    pool = mix_pool("bench-mix")
    kinds = pool_kinds(pool)
    desktop_files = sorted(osworld_examples_dir().rglob("*.json"))
    assert kinds["browser"] == sorted(ROLLOUT_TASKS)
    assert len(kinds["desktop"]) == len(desktop_files) > 0
    assert kinds["game"] == [f"games/{g}" for g in list_games()] and len(kinds["game"]) == 3
    mixed = _mixed_run(users, pool, kind="mixed")
    assert {t.env_kind for t in run_tasks(mixed)} == {"browser", "desktop", "game"}
    assert run_env_kinds(mixed) == ["browser", "desktop", "game"]
    # a run of one kind over the same pool plays only that kind's tasks
    browser = _mixed_run(users, pool, kind="browser")
    assert {t.external_id for t in run_tasks(browser)} == set(ROLLOUT_TASKS)
    text = workload_text(RolloutBenchConfig.for_run(True), kinds)
    for task in [*ROLLOUT_TASKS, *kinds["desktop"], *kinds["game"]]:
        assert task in text
    assert "run seed 5000 (validation range)" in text


@pytest.mark.django_db
def test_a_mixed_run_leases_each_claimed_tasks_kind_and_keeps_a_matching_lease(
    users: Any, names: None, settings: Any
) -> None:
    from rl_control.engine import slots

    # one environment per kind here: none kept idle for annotators (that reserve has its own tests,
    # tests/rl_control/test_fair_share.py), or RL could lease none of them
    settings.FLEET_INTERACTIVE_RESERVE = 0

    run = services.run_create(
        user=users["researcher"], name="mix", preset="grpo-dart", pool=mix_pool("bench-mix"),
        # 40 claims none of which the trainer takes: a batch of 64 keeps the staleness gate
        # (data.rollouts_ahead_limit) open for all of them
        config={"env": {"parallel_envs": 1, "kind": "mixed"}, "seed": 5000,
                "curation": {"rollouts_min": 2, "rollouts_max": 2, "min_batch_trajectories": 64}},
    )  # fmt: skip
    Run.objects.filter(pk=run.pk).update(status="running")
    run.refresh_from_db()
    EngineState.objects.create(run=run)
    registry = fleet.registry()
    for kind in ("browser", "desktop", "game"):  # one idle environment of each kind
        registry.register_env(env_id=f"{kind}-1", kind=kind, worker="host-x", boot_s=0.1)
    # the slot's record as slot_start writes it (without enqueueing its Celery task)
    rds().hset(slots.slot_key(run.pk, 0), mapping={"generation": 7, "state": "running", "heartbeat": 0})
    lease, switched, kept = None, 0, 0
    for _ in range(40):
        claim = rollout_claim(run=run, env_slot=0, generation=7)
        assert claim is not None
        before = lease
        lease = _lease_for_claim(run.pk, 0, 7, lease, claim)
        want = claim.group.task.env_kind
        assert lease is not None and lease.kind == want and lease.env_id == f"{want}-1"
        assert slots.slot_read(run.pk, 0)["kind"] == want
        claim.trajectory.refresh_from_db()
        if before is not None and before.kind == want:
            kept += 1
            assert lease.lease_id == before.lease_id  # kept, not leased again
            assert "lease_wait_s" not in claim.trajectory.metadata["engine"]
        else:
            switched += before is not None
            assert claim.trajectory.metadata["engine"]["lease_wait_s"] >= 0.0
        # the previous kind's environment went back: only the slot's own is leased
        leased = {k: c.get("leased", 0) for k, c in registry.metrics()["envs"].items()}
        assert leased == {k: int(k == want) for k in ("browser", "desktop", "game")}
    assert switched >= 2 and kept >= 1


def test_quick_reads_the_validation_seed_and_a_full_run_the_final_test(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("FLYWHEEL_BENCH_SPLIT", raising=False)
    quick, full = RolloutBenchConfig.for_run(True), RolloutBenchConfig.for_run(False)
    assert quick.workload == full.workload == "mix"
    assert quick.seed in ROLLOUT_SEEDS.validation and full.seed in ROLLOUT_SEEDS.final_test
    assert 0 in ROLLOUT_SEEDS.tuning  # the seed of every figure before the split existed
    assert full.to_json()["seed"] == full.seed and "seeds" not in full.to_json()
    # each reported figure reads the next final-test seed, once: FLYWHEEL_ROLLOUT_SEED_INDEX
    monkeypatch.setenv("FLYWHEEL_ROLLOUT_SEED_INDEX", "1")
    assert RolloutBenchConfig.for_run(False).seed == ROLLOUT_SEEDS.final_test[1]
    monkeypatch.setenv("FLYWHEEL_ROLLOUT_SEED_INDEX", str(len(ROLLOUT_SEEDS.final_test)))
    with pytest.raises(ValueError, match="FLYWHEEL_ROLLOUT_SEED_INDEX"):
        RolloutBenchConfig.for_run(False)


def _episode(
    kind: str, batch: int | None, start: float, end: float | None, steps: int = 2, reward: float = 0.0
) -> dict[str, Any]:
    return {
        "kind": kind,
        "status": "completed",
        "steps": steps,
        "reward": reward,
        "batch": batch,
        "start": start,
        "end": end,
    }


def test_sync_phases_split_each_batch_into_its_rollout_phase_and_the_train_gap() -> None:
    # two environments; batch 0: episodes 0-4 and 0-10, train gap 10-13; batch 1: 13-15 and 13-19,
    # gap 19-20; batch 2 still running (not counted)
    episodes = [_episode("browser", 0, 0, 4), _episode("desktop", 0, 0, 10), _episode("browser", 1, 13, 15),
                _episode("game", 1, 13, 19), _episode("browser", 2, 20, 22), _episode("browser", 2, 20, None)]  # fmt: skip
    phases = sync_phases(episodes, envs=2)
    assert phases["batches"] == 1  # only batch 0 has a finished next batch after it
    assert phases["rollout_phase_s_mean"] == 10.0 and phases["train_gap_s_mean"] == 3.0
    assert phases["train_gap_frac"] == round(3 / 13, 3)
    assert phases["env_utilization_in_rollout_phase"] == round(14 / 20, 3)
    assert sync_phases([_episode("browser", None, 0, 1)], envs=1) == {"batches": 0}


def test_kind_figures_and_the_ratio_interval() -> None:
    episodes = [_episode("browser", None, 0, 2, steps=1, reward=1.0), _episode("browser", None, 0, 6, steps=3),
                _episode("desktop", None, 0, 16, steps=8), {**_episode("desktop", None, 0, 1), "status": "crashed"}]  # fmt: skip
    figures = kind_figures(episodes)
    assert figures["browser"] == {"episodes": 2, "steps_p50": 3, "steps_max": 3, "success_rate": 0.5,
                                  "s_per_step": 2.0, "episode_s_mean": 4.0, "lost": 0}  # fmt: skip
    assert figures["desktop"]["s_per_step"] == 2.0 and figures["desktop"]["success_rate"] == 0.0
    assert figures["desktop"]["episodes"] == 1 and figures["desktop"]["lost"] == 1
    low, high = bootstrap_sum_ratio_interval([4, 6, 5, 5], [2, 3, 2, 3])
    assert low < 20 / 10 < high
    assert bootstrap_sum_ratio_interval([3, 3], [1, 1]) == (3.0, 3.0)
