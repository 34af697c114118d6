"""The data manager on the real PostgreSQL and Redis, without worker processes: claims (never a slot
twice, groups in order, the async staleness gate), which groups make a batch (stale ones ride
along), the sync barrier and its Redis wait, a task's own step budget."""

from __future__ import annotations

import time
from typing import Any

import pytest

from rl_control.engine.data import barrier_lift, barrier_mark, barrier_wait, groups_ready, rollout_claim
from rl_control.models import EngineState, RolloutGroup, Run
from tests.rl_control.engine_helpers import running_run
from webapp.store import services as store
from webapp.store.models import Trajectory


@pytest.mark.django_db
def test_claims_fill_groups_slot_by_slot_and_never_twice(make_run, engine_names) -> None:
    run = running_run(
        make_run, grpo={"rollouts_per_task": 2}, curation={"rollouts_max": 2, "rollouts_min": 2}
    )
    claims = [rollout_claim(run=run, env_slot=k % 2, generation=1) for k in range(5)]
    assert all(c is not None for c in claims)
    groups = list(RolloutGroup.objects.filter(run=run).order_by("id"))
    # async: a free environment never waits; groups of N = 2 fill in order, a new one opens as needed
    assert [(g.issued, g.size) for g in groups] == [(2, 2), (2, 2), (1, 2)]
    pairs = [(c.group.pk, c.slot) for c in claims if c]
    assert len(set(pairs)) == 5
    assert Trajectory.objects.filter(run=run, status="running").count() == 5
    # a group is ready only when none of its rollouts is still running
    assert groups_ready(run=run, batch=0) == []
    for c in claims[:2]:
        assert c is not None
        store.trajectory_finish(trajectory=c.trajectory, status="completed", final_reward=1.0)
    assert [g.pk for g in groups_ready(run=run, batch=0)] == [groups[0].pk]


@pytest.mark.django_db
def test_async_claims_wait_once_the_trainers_next_batches_are_out(make_run, engine_names) -> None:
    """Async: environments stop opening groups when the fresh rollouts out would fill the trainer's next
    staleness_bound + 1 batches (AReaL's staleness control); an update (a new version) lets them go on,
    and a crashed rollout holds no place."""
    from rl_control.engine.data import rollouts_ahead, rollouts_ahead_limit

    run = running_run(make_run, grpo={"rollouts_per_task": 2},
                   curation={"rollouts_max": 2, "rollouts_min": 2, "min_batch_trajectories": 2,
                             "staleness_bound": 1})  # fmt: skip
    assert rollouts_ahead_limit(run) == 4  # (1 + 1) batches of 2; more than the 2 environments
    claims = [rollout_claim(run=run, env_slot=k % 2, generation=1) for k in range(4)]
    assert all(c is not None for c in claims)
    assert rollout_claim(run=run, env_slot=0, generation=1) is None  # two batches out: wait
    assert RolloutGroup.objects.filter(run=run).count() == 2
    first = claims[0]
    assert first is not None
    store.trajectory_finish(trajectory=first.trajectory, status="crashed", final_reward=0.0)
    assert rollouts_ahead(run, EngineState.objects.get(run=run)) == 3
    assert rollout_claim(run=run, env_slot=0, generation=1) is not None  # the crashed one's place
    assert rollout_claim(run=run, env_slot=1, generation=1) is not None  # an open group's slot: always
    assert rollout_claim(run=run, env_slot=1, generation=1) is None
    EngineState.objects.filter(run=run).update(version=1, updates=1)
    assert rollout_claim(run=run, env_slot=1, generation=1) is None  # v0's rollouts are within the bound
    EngineState.objects.filter(run=run).update(version=2, updates=2)
    assert rollouts_ahead(run, EngineState.objects.get(run=run)) == 0  # all of v0: beyond it at v2
    assert all(rollout_claim(run=run, env_slot=0, generation=1) is not None for _ in range(4))
    assert rollout_claim(run=run, env_slot=0, generation=1) is None


@pytest.mark.django_db
def test_stale_groups_never_make_an_update_of_their_own(make_run, engine_names) -> None:
    """Groups that went beyond the staleness bound during a long update are closed by the next update
    that has fresh rollouts enough, not by updates of their own (each would count against max_updates
    and train on nothing)."""
    from rl_control.engine.learner import _collect

    run = running_run(make_run, grpo={"rollouts_per_task": 2},
                   curation={"rollouts_max": 2, "rollouts_min": 2, "min_batch_trajectories": 4,
                             "staleness_bound": 1})  # fmt: skip

    def finish(claims: list[Any], version: int) -> None:
        for c in claims:
            store.trajectory_finish(trajectory=c.trajectory, status="completed", final_reward=1.0)
            t = Trajectory.objects.get(pk=c.trajectory.pk)
            t.metadata["engine"]["max_version"] = version
            t.save(update_fields=["metadata"])

    old = [rollout_claim(run=run, env_slot=0, generation=1) for _ in range(4)]
    finish(old, 0)
    state = EngineState.objects.get(run=run)
    assert _collect(run, state) is not None  # at version 0 they are fresh: a batch
    EngineState.objects.filter(pk=state.pk).update(version=2, updates=2)
    state.refresh_from_db()
    assert _collect(run, state) is None  # four rollouts of version 0 at version 2: wait
    new = [rollout_claim(run=run, env_slot=0, generation=1) for _ in range(4)]
    finish(new[:2], 2)
    assert _collect(run, state) is None  # two fresh ones are not a batch of four
    finish(new[2:], 2)
    chosen = _collect(run, state)
    assert chosen is not None and len(chosen) == 4  # the stale groups close with this update


@pytest.mark.django_db
@pytest.mark.parametrize("anchor_weight", [0.0, 1.0])
def test_step_credit_trains_successes_of_different_lengths(make_run, engine_names, anchor_weight) -> None:
    """grpo.anchor_weight > 0: a group whose rollouts all succeeded, one by a detour, is trained
    (GiGPO's step credit ranks the shorter way); off, it is skipped as a group without signal."""
    from rl_control.engine.data import curator_of
    from rl_control.engine.learner import _batch
    from tests.rl.trainer_helpers import grpo_config, tiny_model
    from workers.rl.trainer import PolicyTrainer

    run = running_run(make_run, grpo={"rollouts_per_task": 2, "anchor_weight": anchor_weight},
                   curation={"rollouts_max": 2, "rollouts_min": 2, "injection": "none"})  # fmt: skip
    claims = [rollout_claim(run=run, env_slot=0, generation=1) for _ in range(2)]
    for c, steps in zip(claims, (1, 3), strict=True):
        assert c is not None
        store.trajectory_finish(trajectory=c.trajectory, status="completed", final_reward=1.0)
        t = Trajectory.objects.get(pk=c.trajectory.pk)
        t.metadata["engine"] = {**t.metadata.get("engine", {}), "steps": steps, "max_version": 0}
        t.save(update_fields=["metadata"])
    state = EngineState.objects.get(run=run)
    trainer = PolicyTrainer(tiny_model(0), grpo_config(anchor_weight=anchor_weight))
    group = RolloutGroup.objects.get(run=run)
    batch = _batch(run, state, trainer, curator_of(run, state), [group])
    assert batch.plans[group.pk]["no_signal"] is (anchor_weight == 0.0)


@pytest.mark.django_db
def test_sync_mode_waits_at_the_batch_barrier(make_run, engine_names) -> None:
    run = make_run(preset="sync-baseline", config={"env": {"parallel_envs": 2},
                   "grpo": {"rollouts_per_task": 2}, "curation": {"rollouts_max": 2, "rollouts_min": 2,
                   "min_batch_trajectories": 4}})  # fmt: skip
    Run.objects.filter(pk=run.pk).update(status="running")
    run.refresh_from_db()
    state = EngineState.objects.create(run=run)
    got = [rollout_claim(run=run, env_slot=0, generation=1) for _ in range(4)]
    assert all(got) and RolloutGroup.objects.filter(run=run, batch=0).count() == 2
    assert rollout_claim(run=run, env_slot=1, generation=1) is None  # batch handed out: wait
    # the trainer consumed batch 0 in an update that kept the policy version (PPO value pretraining)
    EngineState.objects.filter(pk=state.pk).update(updates=1)
    nxt = rollout_claim(run=run, env_slot=1, generation=1)
    assert nxt is not None and nxt.group.batch == 1


def test_a_slot_at_the_barrier_sleeps_until_an_update_is_committed(engine_names) -> None:
    """The barrier wait blocks on Redis (no claim polling), wakes on the learner's lift, and an update
    committed between the mark and the wait is not missed."""
    run_id = 424242
    mark = barrier_mark(run_id=run_id)
    started = time.monotonic()
    assert barrier_wait(run_id=run_id, mark=mark, timeout_s=0.3) == mark  # nothing committed: the timeout
    assert 0.25 <= time.monotonic() - started < 2.0
    barrier_lift(run_id=run_id, updates=1)  # committed after the mark, before the wait
    started = time.monotonic()
    woke = barrier_wait(run_id=run_id, mark=mark, timeout_s=5.0)
    assert woke != mark and time.monotonic() - started < 0.5
    assert barrier_mark(run_id=run_id) == woke  # the next claim's mark is past that update
    import threading

    threading.Timer(0.3, lambda: barrier_lift(run_id=run_id, updates=2)).start()
    started = time.monotonic()
    assert barrier_wait(run_id=run_id, mark=woke, timeout_s=10.0) != woke
    assert time.monotonic() - started < 3.0  # woken by the lift, not the 10 s timeout


@pytest.mark.django_db
def test_a_tasks_own_step_budget_caps_its_groups(make_run, engine_names, pool) -> None:
    run = running_run(make_run, grpo={"rollouts_per_task": 2},
                   curation={"step_cap": 12, "rollouts_max": 2, "rollouts_min": 2})  # fmt: skip
    tasks = list(pool.tasks.order_by("pk"))
    budgets = {tasks[0].pk: 3, tasks[1].pk: 40, tasks[2].pk: "many"}  # below, above the cap; not an int
    for task in tasks:
        task.setup = {**task.setup, "max_steps": budgets[task.pk]} if task.pk in budgets else task.setup
        task.save(update_fields=["setup"])
    limits = {}
    for _ in range(2 * len(tasks)):  # groups of 2: one group per task in the first pass
        claim = rollout_claim(run=run, env_slot=0, generation=1)
        assert claim is not None
        limits[claim.group.task_id] = claim.group.step_limit
    assert limits[tasks[0].pk] == 3 and limits[tasks[1].pk] == 12 and limits[tasks[2].pk] == 12
