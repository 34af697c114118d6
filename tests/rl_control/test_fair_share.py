"""Runs share the rollout workers and the trainer (rl_control.engine.share), on the real Redis and
PostgreSQL: a run launched while another holds every rollout worker gets one within a bounded
number of scheduling rounds, says why it waits meanwhile, and environments go to annotators before
runs. The rollout task body (`rollout_slot` → `slot_loop`) runs for real up to the point where it
would need a policy server."""

from __future__ import annotations

import uuid
from collections import deque
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import override_settings

from rl_control import fleet_selectors
from rl_control.engine import share, slots
from rl_control.engine.keys import rds
from rl_control.models import EngineState, Run
from rl_control.tasks import rollout_slot
from webapp.fleet import queues
from webapp.fleet import services as fleet


@pytest.fixture
def names() -> Iterator[dict[str, str]]:
    """Own Redis prefixes and queues (no worker consumes them); removed afterwards."""
    n = uuid.uuid4().hex[:8]
    names = {"RL_REDIS_PREFIX": f"test:share:{n}", "FLEET_REDIS_PREFIX": f"test:sharefleet:{n}",
             "RL_ROLLOUT_QUEUE": f"rollout.share.{n}", "RL_TRAIN_QUEUE": f"train.share.{n}"}  # fmt: skip
    with override_settings(**names, RL_SHARE_REFUSED_PAUSE_S=0.0):
        fleet.registry.cache_clear()
        yield names
        r = rds()
        stale = [
            *r.scan_iter(match=f"{names['RL_REDIS_PREFIX']}:*"),
            *r.scan_iter(match=f"{names['FLEET_REDIS_PREFIX']}:*"),
        ]
        r.delete(names["RL_ROLLOUT_QUEUE"], names["RL_TRAIN_QUEUE"], *stale)
    fleet.registry.cache_clear()


def _running(make_run: Any, name: str, parallel: int = 4, priority: int = 1) -> Run:
    run = make_run(name=name, config={"env": {"parallel_envs": parallel, "priority": priority}})
    Run.objects.filter(pk=run.pk).update(status="running")
    run.refresh_from_db()
    EngineState.objects.create(run=run)
    return run


def _workers(n: int) -> None:
    queues.worker_announce(queue=share.queue_of(share.ROLLOUT), worker="rollout@test", concurrency=n)


def _rounds(
    tasks: deque[tuple[int, int]], held: dict[int, tuple[int, int] | None], caps: dict[int, int]
) -> None:
    """One scheduling round of Celery's FIFO queue and the workers: every holder reaches an episode
    boundary (and yields if it must: its task goes to the back), then every free worker takes the
    next task (admitted, or refused and sent to the back)."""
    for worker, task in list(held.items()):
        if task is not None and share.should_yield(
            pool=share.ROLLOUT, run_id=task[0], member=str(task[1]), ttl_s=60
        ):
            share.release(pool=share.ROLLOUT, run_id=task[0], member=str(task[1]))
            tasks.append(task)
            held[worker] = None
    for worker in held:
        for _ in range(len(tasks)):
            if held[worker] is not None:
                break
            run_id, slot = tasks.popleft()
            if share.admit(pool=share.ROLLOUT, run_id=run_id, member=str(slot), cap=caps[run_id], ttl_s=60):
                held[worker] = (run_id, slot)
            else:
                tasks.append((run_id, slot))


@pytest.mark.django_db
def test_a_second_run_gets_a_rollout_worker_within_two_rounds_and_says_why_it_waits(make_run, names) -> None:
    _workers(2)
    first = _running(make_run, "first")
    tasks: deque[tuple[int, int]] = deque((first.pk, k) for k in range(4))
    held: dict[int, tuple[int, int] | None] = {0: None, 1: None}
    caps = {first.pk: 4}
    _rounds(tasks, held, caps)
    assert sorted(h for h in held.values() if h) == [(first.pk, 0), (first.pk, 1)]
    for _ in range(3):  # alone, it keeps both workers: nothing makes it yield
        _rounds(tasks, held, caps)
        assert all(h and h[0] == first.pk for h in held.values())

    second = _running(make_run, "second")
    caps[second.pk] = 4
    slots.slots_supervise(second.pk, 4)  # queues its 4 slot tasks, behind the first run's, and wants workers
    tasks.extend((second.pk, k) for k in range(4))
    assert fleet_selectors.run_wait_reason(run=second) == "starting its policy servers"  # no servers yet
    assert share.wait_reason(pool=share.ROLLOUT, run_id=second.pk, what="a rollout slot") == (
        f"waiting for a rollout slot: run #{first.pk} holds 2 of 2; position 1"
    )
    rounds = 0
    while not any(h and h[0] == second.pk for h in held.values()):
        _rounds(tasks, held, caps)
        rounds += 1
        assert rounds <= 2, f"the second run got no worker in {rounds} rounds: {held}"
    for _ in range(3):  # then they keep one each
        _rounds(tasks, held, caps)
        assert sorted(h[0] for h in held.values() if h) == sorted([first.pk, second.pk])
    assert share.wait_reason(pool=share.ROLLOUT, run_id=second.pk, what="a rollout slot") is None


def test_shares_follow_priority_and_rotate_when_runs_outnumber_workers() -> None:
    state = share.PoolState(pool="rollout", capacity=4, announced=True, held={1: 4}, wanting={2: 10.0},
                            weight={1: 1, 2: 3}, cap={1: 8, 2: 8})  # fmt: skip
    assert state.shares() == {1: 1, 2: 3}
    assert state.starved() == [2]
    state = share.PoolState(pool="rollout", capacity=1, announced=True, held={1: 1}, wanting={1: 5.0, 2: 9.0},
                            weight={}, cap={1: 4, 2: 4})  # fmt: skip
    assert state.shares() == {2: 1, 1: 0}  # one unit, two runs: the one holding nothing is owed it next
    assert state.waiting() == [2]


@pytest.mark.django_db
def test_the_rollout_task_waits_yields_and_requeues_for_real(make_run, names) -> None:
    """`rollout_slot` itself: a slot of a run that is owed nothing is refused and goes back to the
    queue; a holder of a run above its share yields its worker to the run that is owed one."""
    _workers(1)
    first, second = _running(make_run, "first", parallel=2), _running(make_run, "second", parallel=2)
    slots.slots_supervise(first.pk, 2)
    slots.slots_supervise(second.pk, 2)
    r = rds()
    assert r.llen(names["RL_ROLLOUT_QUEUE"]) == 4
    gen = {
        (run.pk, k): int(slots.slot_read(run.pk, k)["generation"])
        for run in (first, second)
        for k in range(2)
    }
    assert share.admit(pool=share.ROLLOUT, run_id=first.pk, member="0", cap=2, ttl_s=60)
    # the second run is owed the worker: the first run's other slot is refused and queued again
    with override_settings(RL_ROLLOUT_CHUNK_S=0.2):
        assert rollout_slot(first.pk, 1, gen[(first.pk, 1)]) == "waiting"
    assert r.llen(names["RL_ROLLOUT_QUEUE"]) == 5 and slots.slot_read(first.pk, 1)["state"] == "queued"
    # the holder yields at its next boundary (after its minimum hold), releasing the worker
    with override_settings(RL_ROLLOUT_CHUNK_S=30.0, RL_ROLLOUT_SHARE_S=0.0):
        assert rollout_slot(first.pk, 0, gen[(first.pk, 0)]) == "yielded"
    assert share.pool_read(share.ROLLOUT).held == {}
    # the second run's slot is admitted and runs until its chunk ends (no policy server: it idles)
    with override_settings(RL_ROLLOUT_CHUNK_S=0.2):
        assert rollout_slot(second.pk, 0, gen[(second.pk, 0)]) == "continue"
    assert slots.slot_read(second.pk, 0)["state"] == "queued"
    # a stale task of a fenced generation does nothing
    assert rollout_slot(second.pk, 0, gen[(second.pk, 0)] - 1) == "fenced"


@pytest.mark.django_db
def test_the_run_page_says_why_a_run_waits(make_run, names, api, django_capture_on_commit_callbacks) -> None:
    _workers(2)
    first, second = _running(make_run, "first"), _running(make_run, "second")
    EngineState.objects.filter(run__in=[first, second]).update(servers=[{"url": "http://127.0.0.1:9/v1"}])
    for k in range(2):
        assert share.admit(pool=share.ROLLOUT, run_id=first.pk, member=str(k), cap=4, ttl_s=60)
    share.want(pool=share.ROLLOUT, run_id=second.pk, cap=4)
    body = api("researcher").get(f"/api/rl/runs/{second.pk}/").json()
    assert body["wait_reason"] == f"waiting for a rollout slot: run #{first.pk} holds 2 of 2; position 1"
    assert api("researcher").get(f"/api/rl/runs/{first.pk}/").json()["wait_reason"] is None
    # paused runs leave the share: nobody waits for them, nothing is owed to them
    from rl_control import services

    with django_capture_on_commit_callbacks(execute=True):
        services.run_pause(run=second)
    assert second.pk not in share.pool_read(share.ROLLOUT).wanting


def test_annotation_gets_environments_before_runs(names) -> None:
    reg = fleet.registry()
    for k in range(3):
        reg.register_env(env_id=f"browser-{k}", kind="browser", worker="h1", boot_s=0.1)
    with override_settings(
        FLEET_INTERACTIVE_RESERVE=1, FLEET_INTERACTIVE_WAIT_S=0.0
    ):  # no wait here: the refusal itself is what this test looks at
        rl = [fleet.lease_acquire(kind="browser", owner=f"rl:1:{k}:1", background=True) for k in range(2)]
        with pytest.raises(fleet.NoEnvironmentAvailable):  # the last idle one is kept for annotators
            fleet.lease_acquire(kind="browser", owner="rl:1:2:1", background=True)
        first = fleet.lease_acquire(kind="browser", owner="annotation:1")
        with pytest.raises(fleet.NoEnvironmentAvailable):  # a second annotator finds none...
            fleet.lease_acquire(kind="browser", owner="annotation:2")
        assert fleet.interactive_waiting(kind="browser")  # ...so the runs give theirs back
        fleet.lease_release(lease_id=rl[0].lease_id)
        fleet.lease_release(lease_id=first.lease_id)
        with pytest.raises(fleet.NoEnvironmentAvailable):  # an annotator is owed one: runs wait
            fleet.lease_acquire(kind="browser", owner="rl:1:0:1", background=True)
        second = fleet.lease_acquire(kind="browser", owner="annotation:2")
        assert not fleet.interactive_waiting(kind="browser")
        assert {second.env_id, rl[1].env_id} < {f"browser-{k}" for k in range(3)}
        # with two idle again, a run may take one (one stays for annotators)
        fleet.lease_release(lease_id=second.lease_id)
        assert fleet.lease_acquire(kind="browser", owner="rl:1:0:1", background=True)


@pytest.mark.django_db
def test_a_rollout_slot_gives_its_environment_to_a_waiting_annotator(make_run, names) -> None:
    _workers(1)
    run = _running(make_run, "run", parallel=1)
    reg = fleet.registry()
    for k in range(2):
        reg.register_env(env_id=f"browser-{k}", kind="browser", worker="h1", boot_s=0.1)
    slots.slots_supervise(run.pk, 1)
    gen = int(slots.slot_read(run.pk, 0)["generation"])
    lease = fleet.lease_acquire(kind="browser", owner=f"rl:{run.pk}:0:{gen}", background=True)
    slots.slot_set(run.pk, 0, gen, lease=lease.lease_id, env=lease.env_id, worker="h1", kind="browser")
    fleet.lease_acquire(kind="browser", owner="annotation:1")
    with pytest.raises(fleet.NoEnvironmentAvailable):
        fleet.lease_acquire(kind="browser", owner="annotation:2")
    with override_settings(RL_ROLLOUT_CHUNK_S=0.2):
        assert rollout_slot(run.pk, 0, gen) == "continue"
    assert reg.lease(lease.lease_id) == {}  # released at the episode boundary
    assert fleet.lease_acquire(kind="browser", owner="annotation:2").env_id == lease.env_id
