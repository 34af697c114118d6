"""The RL engine end to end with real processes: an env host (Chromium + MiniWoB++), a rollout worker,
a trainer worker (Celery, own queues), the embedded policy server (its own process), PostgreSQL and
Redis. Runs are tiny (untrained model, 2 environments, step limit 2, a few updates) but go through
every real component: leases, env calls, policy sampling with token ids, the streaming pool,
curation, PolicyTrainer updates, checkpoints, weight pushes, metrics, pause/resume and kill -9.
"""

from __future__ import annotations

import signal
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from django.conf import settings
from django.test import override_settings
from django.utils import timezone

from rl_control import services
from rl_control.engine.slots import slot_read
from rl_control.engine.stack import LocalStack, stop_process, wait_for
from rl_control.models import EngineState, RolloutGroup, Run, RunMetric, RunStatus
from tests.service_urls import subprocess_database_url
from webapp.fleet import services as fleet
from webapp.store.models import Checkpoint, Step, Task, TaskPool, Trajectory

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture
def stack_factory(tmp_path: Path) -> Iterator[Callable[[float], LocalStack]]:
    """`make(slot_timeout_s)` → a started-later LocalStack on this test's database; the test process
    talks to it through the settings overrides (fleet registry, queues, Redis prefixes)."""
    made: list[tuple[LocalStack, Any]] = []

    def make(slot_timeout_s: float = 60.0, **extra_env: str) -> LocalStack:
        url = subprocess_database_url()
        stack = LocalStack(tmp_path / f"stack{len(made)}", url, settings_module="webapp.settings.test",
                           envs=2, slot_timeout_s=slot_timeout_s, updates_per_chunk=2,
                           extra_env=extra_env)  # fmt: skip
        overrides = override_settings(**stack.settings_overrides())
        overrides.enable()
        fleet.registry.cache_clear()
        made.append((stack, overrides))
        return stack

    yield make
    for stack, overrides in made:
        stack.stop()
        fleet.registry().clear()
        overrides.disable()
        fleet.registry.cache_clear()


def _miniwob_pool() -> TaskPool:
    pool = TaskPool.objects.create(name=f"miniwob-{uuid.uuid4().hex[:6]}")
    for name in ("click-test", "click-button"):
        Task.objects.create(pool=pool, external_id=name, instruction="", env_kind="browser", source="miniwob",
                            setup={"task": name})  # fmt: skip
    return pool


def _run(
    users: dict[str, Any], checkpoint: Checkpoint, *, max_updates: int, name: str = "engine", envs: int = 2
) -> Run:
    """PPO (one value-pretraining update, then PPO): every completed rollout is trained on, so even
    the untrained model's all-zero rewards give updates (GRPO would skip such groups: no signal)."""
    return services.run_create(
        user=users["researcher"], name=name, algorithm="ppo", pool=_miniwob_pool(), start_checkpoint=checkpoint,
        config={
            "env": {"parallel_envs": envs},
            "ppo": {"lr_policy": 1e-4, "value_pretrain_max_updates": 1, "minibatch_size": 4, "weight_ema": 0.9},
            "curation": {"step_cap": 2, "min_batch_trajectories": 2, "staleness_bound": 1},
            "budget": {"max_updates": max_updates, "max_minutes": 20},
        },
    )  # fmt: skip


def _wait_for_an_update_and_a_rollout_in_flight(run: Run) -> None:
    """Until the run has made an update and has an episode with a step done: the moment a fault hits
    both the trainer and the rollouts mid-work."""
    wait_for(
        "an update and a rollout in flight",
        lambda: (
            Run.objects.get(pk=run.pk).updates_done >= 1
            and Trajectory.objects.filter(run=run, status="running", num_steps__gte=1).exists()
        ),
        300,
    )


def launch_and_finish(run: Run, stack: LocalStack, timeout_s: float) -> Run:
    """Launch `run` on `stack`, wait until it stops running and return it, finished (the stack's
    logs are printed when it is not)."""
    services.run_launch(run=run)
    try:
        wait_for(
            "the run to finish", lambda: Run.objects.get(pk=run.pk).status != RunStatus.RUNNING, timeout_s
        )
    except TimeoutError:
        print(stack.logs())
        raise
    run.refresh_from_db()
    assert run.status == RunStatus.FINISHED, (run.status, run.error, stack.logs())
    return run


def _check_record(run: Run) -> None:
    """What every engine run must leave behind: no slot handed out twice, versions on every step,
    only completed, fresh trajectories trained on, one checkpoint per update."""
    trajectories = list(Trajectory.objects.filter(run=run))
    slots = Counter((t.metadata["engine"]["group"], t.metadata["engine"]["slot"]) for t in trajectories)
    assert max(slots.values()) == 1, "a group slot was rolled out twice"
    for group in RolloutGroup.objects.filter(run=run):
        assert group.issued <= group.size
    trained_ids: set[int] = set()
    policy_trained: set[int] = set()  # trained by a policy update (not the critic's pretraining)
    for group in RolloutGroup.objects.filter(run=run, state="trained"):
        trained_ids |= {int(i) for i in group.plan["train_ids"]}
        if not group.plan.get("value_pretraining"):
            policy_trained |= {int(i) for i in group.plan["train_ids"]}
    assert policy_trained
    by_id = {t.pk: t for t in trajectories}
    assert trained_ids, "nothing was trained on"
    for tid in trained_ids:
        t = by_id[tid]
        assert t.status == "completed" and t.source == "rl" and t.final_reward is not None
        steps = list(Step.objects.filter(trajectory=t).order_by("index"))
        assert steps and all(s.policy_version.isdigit() for s in steps)
        # what re-creates the episode, and where it ended with which reward (workers/envs/replay.py)
        assert isinstance(t.metadata["seed"], int) and t.metadata["episode"]["task"]["kind"] == "browser"
        assert (
            t.metadata["episode"]["env"]["kind"] == "browser"
            and "miniwob" in t.metadata["episode"]["env"]["version"]
        )
        assert [s.done for s in steps][-1] and not any(s.done for s in steps[:-1])
        assert steps[-1].reward == t.final_reward and all(s.reward == 0.0 for s in steps[:-1])
        assert all(s.rl["token_ids"] and len(s.rl["token_ids"]) == len(s.rl["logprobs"]) for s in steps)
        if tid in policy_trained:
            assert all({"advantage", "ratio", "clipped", "value"} <= set(s.rl) for s in steps), (
                "no replay stats"
            )
    # update 1 pretrains the critic (policy fixed, same version); every later update is a new version,
    # registered twice: the online weights and their average (ppo.weight_ema), a child of the online one
    online = Checkpoint.objects.filter(run=run).exclude(version__endswith="-ema")
    assert online.count() == run.updates_done - 1 == run.policy_version
    for checkpoint in online:
        averaged = Checkpoint.objects.get(run=run, version=f"{checkpoint.version}-ema")
        assert averaged.parent == checkpoint and averaged.path == f"{checkpoint.path}/ema"
        assert (Path(averaged.path) / "config.json").is_file() and averaged.metrics == {"weight_ema": 0.9}
    first = set(RunMetric.objects.filter(run=run, step=1).values_list("name", flat=True))
    assert {
        "value/loss",
        "value/pretraining",
        "outcome/reward_mean",
        "efficiency/env_utilization",
    } <= first, first
    last = set(RunMetric.objects.filter(run=run, step=run.updates_done).values_list("name", flat=True))
    assert {"outcome/reward_mean", "policy/entropy", "policy/clip_frac_high", "value/loss",
            "efficiency/env_utilization", "efficiency/trainer_idle_frac", "efficiency/weight_sync_s",
            "efficiency/staleness_mean"} <= last, last  # fmt: skip
    # Rates are over the whole time between updates (waiting and training): two browser environments
    # cannot finish ten episodes a second, whatever the moment the trainer found its batch ready.
    rates = RunMetric.objects.filter(run=run, name="efficiency/episodes_per_min").values_list(
        "value", flat=True
    )
    assert rates and max(rates) < 600, sorted(rates)
    for name in ("efficiency/trainer_idle_frac", "efficiency/env_utilization"):
        values = RunMetric.objects.filter(run=run, name=name).values_list("value", flat=True)
        assert all(0.0 <= v <= 1.0 for v in values), (name, list(values))


def test_engine_trains_pauses_resumes_and_finishes(users, stack_factory, start_checkpoint) -> None:
    stack = stack_factory(60.0)
    stack.start()
    run = _run(users, start_checkpoint, max_updates=3)
    services.run_launch(run=run)
    try:
        wait_for("the first update", lambda: Run.objects.get(pk=run.pk).updates_done >= 1, 300)
        run.refresh_from_db()
        services.run_pause(run=run)
        # Rollouts finish the episode in flight, then every slot stops and releases its environment.
        wait_for(
            "the slots to stop",
            lambda: all(slot_read(run.pk, k).get("state") == "stopped" for k in range(2)),
            120,
        )
        assert not Trajectory.objects.filter(run=run, status="running").exists()
        paused_at = Run.objects.get(pk=run.pk).updates_done
        episodes = Trajectory.objects.filter(run=run).count()
        time.sleep(3)
        assert Trajectory.objects.filter(run=run).count() == episodes, "rollouts went on while paused"
        assert Run.objects.get(pk=run.pk).updates_done == paused_at
        services.run_resume(run=Run.objects.get(pk=run.pk))
        wait_for("the run to finish", lambda: Run.objects.get(pk=run.pk).status != RunStatus.RUNNING, 400)
    except (AssertionError, TimeoutError):
        print(stack.logs())
        raise
    run.refresh_from_db()
    assert run.status == RunStatus.FINISHED, (run.status, run.error, stack.logs())
    assert run.updates_done == 3 and run.policy_version == EngineState.objects.get(run=run).version == 2
    _check_record(run)
    # Completed episodes from before the pause were trained after the resume: none was lost.
    open_completed = Trajectory.objects.filter(run=run, status="completed", metadata__engine__group__in=list(
        RolloutGroup.objects.filter(run=run, state="open").values_list("pk", flat=True)))  # fmt: skip
    consumed = set(RolloutGroup.objects.filter(run=run).exclude(state="open").values_list("pk", flat=True))
    for t in Trajectory.objects.filter(run=run, status="completed", created_at__lte=run.updated_at):
        assert t.metadata["engine"]["group"] in consumed or open_completed.filter(pk=t.pk).exists()
    wait_for(
        "every environment released",
        lambda: not Trajectory.objects.filter(run=run, status="running").exists(),
        60,
    )


def test_engine_survives_a_killed_rollout_worker(users, stack_factory, start_checkpoint) -> None:
    stack = stack_factory(10.0)
    stack.start()
    run = _run(users, start_checkpoint, max_updates=2, name="kill")
    services.run_launch(run=run)
    try:
        victim = wait_for(
            "a trajectory in flight",
            lambda: Trajectory.objects.filter(run=run, status="running", num_steps__gte=1).first(), 300,
        )  # fmt: skip
        assert stack.rollout is not None
        stop_process(stack.rollout, signal.SIGKILL)
        stack.rollout_worker()  # the fleet's other machine: same queue, takes the reclaimed slots
        wait_for("the run to finish", lambda: Run.objects.get(pk=run.pk).status != RunStatus.RUNNING, 400)
    except (AssertionError, TimeoutError):
        print(stack.logs())
        raise
    run.refresh_from_db()
    assert run.status == RunStatus.FINISHED, (run.status, run.error, stack.logs())
    victim.refresh_from_db()
    assert victim.status in ("abandoned", "completed")
    abandoned = Trajectory.objects.filter(run=run, status="abandoned")
    assert abandoned.exists(), "the killed worker's in-flight trajectory was not reclaimed"
    assert all(t.metadata.get("abandoned_reason") for t in abandoned)
    trained = {
        int(i) for g in RolloutGroup.objects.filter(run=run, state="trained") for i in g.plan["train_ids"]
    }
    assert not trained & set(abandoned.values_list("pk", flat=True)), "an abandoned trajectory was trained on"
    reclaimed = sum(RunMetric.objects.filter(run=run, name="fleet/reclaimed").values_list("value", flat=True))
    assert reclaimed >= 1
    _check_record(run)


def _terminate_connections(application_name: str) -> int:
    """pg_terminate_backend on every connection of the processes named `application_name` (what a
    PostgreSQL restart or an administrator does to them); returns how many were terminated."""
    import psycopg
    from django.db import connection

    from webapp.settings.env import database_url

    with psycopg.connect(database_url(connection.settings_dict), autocommit=True) as admin:
        row = admin.execute(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE application_name = %s",
            [application_name],
        ).fetchone()
    return int(row[0]) if row else 0


ROLLOUT_LOST = "the database connection was lost"
TRAINER_LOST = "lost its database connection"


def test_engine_takes_terminated_database_connections_as_expected_events(
    users, stack_factory, start_checkpoint
) -> None:
    """PostgreSQL terminates the rollout and trainer tasks' connections mid-run (pg_terminate_backend,
    as a restart does): each task logs one WARNING line (no traceback, no task failure), the slot
    or trainer chunk starts again, and the run trains to its end with a clean record."""
    name = f"flywheel-test-{uuid.uuid4().hex[:8]}"
    stack = stack_factory(10.0, DB_APPLICATION_NAME=name)
    stack.start()
    run = _run(users, start_checkpoint, max_updates=4, name="pgkill")
    services.run_launch(run=run)

    def logs() -> str:
        return "\n".join(p.read_text(errors="replace") for p in sorted(stack.workdir.glob("proc*.log")))

    try:
        _wait_for_an_update_and_a_rollout_in_flight(run)
        # A task holds its connection through an episode (rollout) or a wait for data (trainer); a
        # termination lands on whichever are checked out at that moment, so terminate until each
        # kind of task has met one.
        terminated = 0
        for _ in range(40):
            if ROLLOUT_LOST in logs() and TRAINER_LOST in logs():
                break
            assert Run.objects.get(pk=run.pk).status == RunStatus.RUNNING, "the run ended first"
            terminated += _terminate_connections(name)
            time.sleep(1.5)
        assert ROLLOUT_LOST in logs() and TRAINER_LOST in logs(), (terminated, logs())
        wait_for("the run to finish", lambda: Run.objects.get(pk=run.pk).status != RunStatus.RUNNING, 400)
    except (AssertionError, TimeoutError):
        print(stack.logs())
        raise
    run.refresh_from_db()
    assert run.status == RunStatus.FINISHED, (run.status, run.error, stack.logs())
    assert run.updates_done == 4
    _check_record(run)
    text = logs()
    warnings = [line for line in text.splitlines() if ROLLOUT_LOST in line or TRAINER_LOST in line]
    assert all("WARNING" in line for line in warnings), warnings
    # No traceback, no failed task, no second line from the pool: every loss was the one line above.
    assert "Traceback" not in text and "raised unexpected" not in text, text[-6000:]
    assert "discarding closed connection" not in text, text[-6000:]


def _redis_restart() -> None:
    """What restarting Redis (it keeps nothing on disk) does to the engine: every key of the tests'
    database is gone — slots, leases, the pool stream, Celery's queues and bindings — and every
    client of that database is cut off mid-command."""
    r = redis.Redis.from_url(settings.REDIS_URL)
    db = str(r.connection_pool.connection_kwargs.get("db", 0))
    r.flushdb()
    me = r.client_id()
    for client in r.client_list():
        if str(client.get("db")) == db and int(client["id"]) != me:
            r.client_kill_filter(_id=client["id"])
    r.close()


def test_engine_loses_no_completed_trajectory_when_redis_restarts(
    users, stack_factory, start_checkpoint
) -> None:
    stack = stack_factory(10.0)
    stack.start()
    run = _run(users, start_checkpoint, max_updates=4, name="redis")
    services.run_launch(run=run)
    try:
        _wait_for_an_update_and_a_rollout_in_flight(run)
        _redis_restart()
        restarted_at = timezone.now()
        completed = set(Trajectory.objects.filter(run=run, status="completed").values_list("pk", flat=True))
        wait_for("the run to finish", lambda: Run.objects.get(pk=run.pk).status != RunStatus.RUNNING, 400)
        wait_for(
            "every rollout closed",
            lambda: not Trajectory.objects.filter(run=run, status="running").exists(),
            120,
        )
    except (AssertionError, TimeoutError):
        print(stack.logs())
        raise
    run.refresh_from_db()
    assert run.status == RunStatus.FINISHED, (run.status, run.error, stack.logs())
    assert run.updates_done == 4
    _check_record(run)
    # Every trajectory completed before the restart went into an update (or was curated as stale).
    for group in RolloutGroup.objects.filter(run=run):
        ids = {int(i) for i in group.plan.get("train_ids", []) + group.plan.get("stale_ids", [])}
        completed -= ids
    assert not completed, f"completed before the restart and never consumed: {sorted(completed)}"
    # Rollouts kept going after it: trajectories were started and completed since.
    later = Trajectory.objects.filter(run=run, status="completed", finished_at__gt=restarted_at)
    assert later.exists()
    # What was in flight was closed once, readably, and never trained on.
    for t in Trajectory.objects.filter(run=run).exclude(status="completed"):
        assert t.status in ("abandoned", "crashed", "failed"), t.status
        assert t.metadata.get("abandoned_reason") or t.metadata.get("engine", {}).get("error"), t.metadata


def test_two_runs_at_once_keep_their_own_servers_versions_and_samples(
    users, stack_factory, start_checkpoint
) -> None:
    """Issue 19: two runs training at once on one engine stack (one trainer worker, one env host):
    each has its own policy server, and every sample of each carries only its own run's versions."""
    stack = stack_factory(60.0)
    stack.start()
    runs = [_run(users, start_checkpoint, max_updates=3, name=f"both-{k}", envs=1) for k in range(2)]
    for run in runs:
        services.run_launch(run=run)
    try:
        wait_for("both runs to finish", lambda: all(
            Run.objects.get(pk=r.pk).status != RunStatus.RUNNING for r in runs), 900)  # fmt: skip
    except TimeoutError:
        print(stack.logs())
        raise
    servers = []
    for run in runs:
        run.refresh_from_db()
        assert run.status == RunStatus.FINISHED, (run.status, run.error, stack.logs())
        steps = list(
            Step.objects.filter(trajectory__run=run).exclude(rl={}).values_list("rl", "policy_version")
        )
        assert steps
        for rl, version in steps:
            assert rl["served_by"] == f"run{run.pk}-v{version}", (run.pk, rl["served_by"], version)
            assert 0 <= int(version) <= run.policy_version
        other = next(r for r in runs if r.pk != run.pk)
        assert not Step.objects.filter(
            trajectory__run=run, rl__served_by__startswith=f"run{other.pk}-"
        ).exists()
        served = {c.version for c in Checkpoint.objects.filter(run=run)}
        assert served and all(v.startswith(f"run{run.pk}-v") for v in served)
        servers.append({(e["url"], e["pid"]) for e in EngineState.objects.get(run=run).servers})
    # finished: the servers are forgotten (and exit with their lifelines); while they ran they were distinct
    assert servers == [set(), set()]
    _check_record(runs[0])
    _check_record(runs[1])
