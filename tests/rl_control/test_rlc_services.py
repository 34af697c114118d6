"""Run services on the real PostgreSQL: create, the control state machine, progress, budget, fork."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from rl_control import services
from rl_control.models import Run
from rl_control.services import RunConfigError
from rl_control.tasks import runs_enforce_budgets
from tests.factories import TaskFactory
from webapp.store.models import Checkpoint

pytestmark = pytest.mark.django_db


def test_create_from_preset_with_overrides(make_run, pool) -> None:
    run = make_run(preset="grpo-dart", config={"grpo": {"beta_kl": 0.0}, "budget": {"max_updates": 5}})
    run.refresh_from_db()
    assert (run.status, run.algorithm, run.mode, run.preset, run.variant) == (
        "created", "grpo", "async", "grpo-dart", "grpo",
    )  # fmt: skip
    assert run.config["grpo"]["beta_kl"] == 0.0 and run.config["grpo"]["entropy_keep_fraction"] == 0.8
    assert run.config["budget"]["max_updates"] == 5 and run.pool == pool


def test_variants(make_run) -> None:
    assert make_run(preset="bepa").variant == "bepa"
    assert make_run(preset="sync-baseline").variant == "sync baseline"
    assert make_run(preset="ppo-uitars2").variant == "ppo"


def test_create_reports_all_errors(users, pool) -> None:
    other = TaskFactory(env_kind="browser")  # a task of another pool
    with pytest.raises(RunConfigError) as err:
        services.run_create(
            user=users["researcher"], name=" ", preset="grpo-dart", algorithm="ppo", pool=pool,
            config={"grpo": {"lr": 0}, "task_ids": [other.pk, 999_999]},
        )  # fmt: skip
    errors = err.value.errors
    assert set(errors) == {"name", "algorithm", "grpo.lr"}  # task_ids are checked once the config is valid
    with pytest.raises(RunConfigError) as err:
        services.run_create(
            user=users["researcher"], name="x", config={"task_ids": [other.pk, 999_999]}, pool=pool
        )
    assert err.value.errors == {"task_ids": ["no such task: 999999"]}
    with pytest.raises(RunConfigError) as err:
        services.run_create(user=users["researcher"], name="x", config={"task_ids": [other.pk]}, pool=pool)
    assert "not in pool" in err.value.errors["task_ids"][0]
    with pytest.raises(RunConfigError) as err:
        services.run_create(user=users["researcher"], name="x", config={})
    assert err.value.errors == {"pool": ["choose a task pool or list task_ids"]}
    desktop = TaskFactory(env_kind="desktop")
    with pytest.raises(RunConfigError) as err:
        services.run_create(
            user=users["researcher"], name="x", config={"env": {"kind": "browser"}, "task_ids": [desktop.pk]}
        )
    assert "env kind desktop" in err.value.errors["task_ids"][0]
    with pytest.raises(RunConfigError) as err:
        services.run_create(user=users["researcher"], name="x", preset="nope", pool=pool)
    assert list(err.value.errors) == ["preset"]
    assert not Run.objects.exists()
    # env.kind left open: the kind of the listed tasks
    run = services.run_create(user=users["researcher"], name="x", config={"task_ids": [desktop.pk]})
    assert run.config["env"]["kind"] == "desktop"


def test_full_lifecycle_publishes_status(make_run, published, django_capture_on_commit_callbacks) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        run = make_run()
        services.run_launch(run=run)
        assert run.status == "running" and run.started_at and run.resumed_at
        services.run_pause(run=run)
        assert run.status == "paused" and run.resumed_at is None and run.running_seconds >= 0
        services.run_resume(run=run)
        services.run_stop(run=run)
    assert run.status == "stopped" and run.finished_at
    assert [e["status"] for e in published] == ["created", "running", "paused", "running", "stopped"]
    assert all(e["type"] == "run.status" and e["run_id"] == run.pk for e in published)


@pytest.mark.parametrize(
    ("status", "action"),
    [
        ("created", "pause"), ("created", "resume"), ("created", "finish"),
        ("running", "launch"), ("running", "resume"),
        ("paused", "pause"), ("paused", "launch"),
        ("stopped", "resume"), ("stopped", "stop"), ("finished", "pause"), ("failed", "launch"),
    ],
)  # fmt: skip
def test_illegal_transitions_raise_and_change_nothing(make_run, status: str, action: str) -> None:
    run = make_run()
    Run.objects.filter(pk=run.pk).update(status=status, error="boom" if status == "failed" else "")
    with pytest.raises(services.RunTransitionError, match=f"cannot {action} run {run.pk}: it is {status}"):
        getattr(services, f"run_{action}")(run=run)
    run.refresh_from_db()
    assert run.status == status


def test_stale_object_cannot_transition_twice(make_run) -> None:
    run = make_run()
    services.run_launch(run=run)
    stale = Run.objects.get(pk=run.pk)
    services.run_stop(run=run)
    with pytest.raises(services.RunTransitionError):
        services.run_pause(run=stale)  # the UPDATE is conditional on the status in the database
    assert Run.objects.get(pk=run.pk).status == "stopped"


def test_fail_needs_a_readable_error(make_run) -> None:
    run = make_run()
    services.run_launch(run=run)
    with pytest.raises(services.RunError):
        services.run_fail(run=run, error="  ")
    services.run_fail(run=run, error="trainer: CUDA out of memory" + "x" * 6000)
    assert run.status == "failed" and run.error.startswith("trainer: CUDA") and len(run.error) == 5000
    with pytest.raises(IntegrityError), transaction.atomic():
        Run.objects.filter(pk=run.pk).update(error="")  # the database refuses a failed run without error


def test_running_time_excludes_pauses(make_run) -> None:
    run = make_run()
    services.run_launch(run=run)
    Run.objects.filter(pk=run.pk).update(resumed_at=timezone.now() - timedelta(seconds=90))
    services.run_pause(run=run)
    assert 89 < run.running_seconds < 120
    assert services.run_elapsed_seconds(run) == run.running_seconds  # paused: the clock stands still


def test_progress_finishes_the_run_at_its_update_budget(
    make_run, published, django_capture_on_commit_callbacks
) -> None:
    run = make_run(config={"budget": {"max_updates": 3, "max_minutes": None}})
    with pytest.raises(services.RunTransitionError):
        services.run_progress(run=run, updates_done=1, episodes_done=4, policy_version=1, samples=40)
    services.run_launch(run=run)
    with django_capture_on_commit_callbacks(execute=True):
        services.run_progress(run=run, updates_done=2, episodes_done=8, policy_version=2, samples=80)
        assert run.status == "running"
        services.run_progress(run=run, updates_done=3, episodes_done=12, policy_version=3, samples=120)
    run.refresh_from_db()
    assert run.status == "finished" and (run.updates_done, run.samples) == (3, 120)
    assert [(e["status"], e["updates_done"]) for e in published] == [
        ("running", 2), ("running", 3), ("finished", 3),
    ]  # fmt: skip


def test_each_finished_episode_counts_at_once_and_spends_the_episode_budget(
    make_run, published, django_capture_on_commit_callbacks
) -> None:
    run = make_run(config={"budget": {"max_updates": None, "max_minutes": None, "max_episodes": 2}})
    services.run_episode_done(run_id=run.pk)  # not running yet: nothing counts
    services.run_launch(run=run)
    with django_capture_on_commit_callbacks(execute=True):
        services.run_episode_done(run_id=run.pk)
        run.refresh_from_db()
        assert (run.status, run.episodes_done) == ("running", 1)
        services.run_episode_done(run_id=run.pk)
    run.refresh_from_db()
    assert (run.status, run.episodes_done) == ("finished", 2)
    assert [(e["status"], e["episodes_done"]) for e in published][-2:] == [("running", 2), ("finished", 2)]
    services.run_episode_done(run_id=run.pk)  # a rollout closing after the end counts nowhere
    run.refresh_from_db()
    assert run.episodes_done == 2


def test_budget_sweep_finishes_runs_out_of_minutes(make_run) -> None:
    over = make_run(name="over", config={"budget": {"max_minutes": 1}})
    under = make_run(name="under", config={"budget": {"max_minutes": 10}})
    paused = make_run(name="paused", config={"budget": {"max_minutes": 1}})
    for run in (over, under, paused):
        services.run_launch(run=run)
    services.run_pause(run=paused)
    Run.objects.filter(pk__in=[over.pk, under.pk]).update(resumed_at=timezone.now() - timedelta(minutes=2))
    assert runs_enforce_budgets() == [over.pk]
    statuses = dict(Run.objects.values_list("name", "status"))
    assert statuses == {"over": "finished", "under": "running", "paused": "paused"}


def test_budget_fraction_is_the_most_spent_limit(make_run) -> None:
    run = make_run(config={"budget": {"max_updates": 40, "max_episodes": None, "max_minutes": 10}})
    assert services.run_budget_fraction(run) == 0.0  # not launched: no time has run
    services.run_launch(run=run)
    Run.objects.filter(pk=run.pk).update(updates_done=10, resumed_at=timezone.now() - timedelta(minutes=5))
    run.refresh_from_db()
    assert services.run_budget_fraction(run) == pytest.approx(0.5, abs=0.01)  # minutes lead updates
    Run.objects.filter(pk=run.pk).update(updates_done=60)
    run.refresh_from_db()
    assert services.run_budget_fraction(run) == 1.0
    unbounded = make_run(name="unbounded", config={"budget": {"max_updates": None, "max_minutes": None,
                                                                "max_episodes": 100}})  # fmt: skip
    assert services.run_budget_fraction(unbounded) == 0.0


def test_fork_starts_from_a_checkpoint_of_the_parent(make_run, users) -> None:
    parent = make_run(config={"grpo": {"beta_kl": 0.05}})
    old = Checkpoint.objects.create(version="run-v1", path="ckpt/1", run=parent)
    new = Checkpoint.objects.create(version="run-v2", path="ckpt/2", run=parent)
    foreign = Checkpoint.objects.create(version="other", path="ckpt/x")

    fork = services.run_fork(run=parent, user=users["admin"], checkpoint=old, config={"grpo": {"lr": 2e-6}})
    assert (fork.parent, fork.start_checkpoint, fork.status, fork.created_by) == (
        parent,
        old,
        "created",
        users["admin"],
    )
    assert fork.config["grpo"]["beta_kl"] == 0.05 and fork.config["grpo"]["lr"] == 2e-6
    assert fork.name == "run (fork)" and fork.pool == parent.pool

    assert services.run_fork(run=parent, user=users["admin"]).start_checkpoint == new  # newest by default
    with pytest.raises(RunConfigError) as err:
        services.run_fork(run=parent, user=users["admin"], checkpoint=foreign)
    assert "does not belong" in err.value.errors["checkpoint"][0]
    with pytest.raises(RunConfigError):
        services.run_fork(run=parent, user=users["admin"], config={"grpo": {"clip_low": 2}})
