"""Engine parts on the real PostgreSQL and Redis, without worker processes: slot reclaiming (exactly
once, fencing), run services, serving, episode seeds, actions, lost connections. The data manager's
claims and barrier: test_engine_claims.py."""

from __future__ import annotations

import json
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.utils import timezone

from rl_control import services
from rl_control.engine import slots
from rl_control.engine.data import rollout_claim
from rl_control.engine.keys import key, rds, version_of
from rl_control.models import EngineState, Run
from tests.rl_control.engine_helpers import running_run
from webapp.store import services as store
from webapp.store.models import Trajectory


@pytest.mark.django_db
def test_dead_slot_is_reclaimed_exactly_once_and_fenced(make_run, engine_names) -> None:
    run = running_run(make_run)
    claim = rollout_claim(run=run, env_slot=0, generation=1)
    assert claim is not None
    r = rds()
    r.hset(slots.slot_key(run.pk, 0), mapping={"generation": 1, "state": "running", "heartbeat": time.time() - 999,
                                               "trajectory": claim.trajectory.pk, "lease": ""})  # fmt: skip
    r.hset(slots.slot_key(run.pk, 1), mapping={"generation": 4, "state": "running", "heartbeat": time.time()})
    got = slots.slots_supervise(run.pk, 2, timeout_s=5.0)
    assert got == {"started": 1, "reclaimed": 1}
    claim.trajectory.refresh_from_db()
    assert claim.trajectory.status == "abandoned" and claim.trajectory.metadata["abandoned_reason"]
    assert slots.slot_read(run.pk, 0)["generation"] == "2"
    assert not slots.slot_beat(run.pk, 0, 1), "the old task must be fenced off"
    assert slots.slot_beat(run.pk, 0, 2)
    assert slots.slots_supervise(run.pk, 2, timeout_s=5.0) == {"started": 0, "reclaimed": 0}
    # the new task was queued on the run's rollout queue with the new generation
    assert r.llen(engine_names["RL_ROLLOUT_QUEUE"]) == 1
    assert r.hget(key(run.pk, "acct"), "reclaimed") == b"1"


@pytest.mark.django_db
def test_slots_lost_with_redis_restart_fresh_generations_and_orphans_close_once(
    make_run, engine_names
) -> None:
    """Redis restarted: the slot hashes are gone. The new tasks get generations the old ones never
    had (so those are fenced), and a running trajectory no slot owns is abandoned once it has been
    silent for the timeout — not before, and never one that a live slot owns."""
    run = running_run(make_run)
    old = [rollout_claim(run=run, env_slot=k, generation=1) for k in range(2)]
    assert all(old)
    r = rds()
    for k in range(2):
        r.hset(slots.slot_key(run.pk, k), mapping={"generation": 1, "state": "running", "heartbeat": time.time(),
                                                   "trajectory": old[k].trajectory.pk, "lease": ""})  # fmt: skip
    r.delete(slots.slot_key(run.pk, 0), slots.slot_key(run.pk, 1))  # the restart
    assert slots.slots_supervise(run.pk, 2, timeout_s=30.0) == {
        "started": 2,
        "reclaimed": 0,
    }  # not silent yet
    for k in range(2):
        assert int(slots.slot_read(run.pk, k)["generation"]) > 1
        assert not slots.slot_beat(run.pk, k, 1), "the task from before the restart must be fenced off"
    live = rollout_claim(run=run, env_slot=1, generation=int(slots.slot_read(run.pk, 1)["generation"]))
    assert live is not None
    slots.slot_set(run.pk, 1, int(slots.slot_read(run.pk, 1)["generation"]), trajectory=live.trajectory.pk)
    silent = timezone.now() - timedelta(seconds=60)
    Trajectory.objects.filter(pk__in=[c.trajectory.pk for c in (*old, live)]).update(created_at=silent)
    got = slots.slots_supervise(run.pk, 2, timeout_s=30.0)
    assert got == {"started": 0, "reclaimed": 2}
    for claim in old:
        claim.trajectory.refresh_from_db()
        assert claim.trajectory.status == "abandoned" and claim.trajectory.metadata["abandoned_reason"]
    live.trajectory.refresh_from_db()
    assert live.trajectory.status == "running"  # owned by a live slot
    assert slots.slots_supervise(run.pk, 2, timeout_s=30.0)["reclaimed"] == 0  # once
    assert not slots.abandon(old[0].trajectory.pk, "again")


def test_version_names() -> None:
    assert version_of(7, "run7-v12") == 12
    # bare digits could be any run's version; another run's label is not this run's
    assert version_of(7, "12") is None and version_of(7, "run8-v12") is None
    assert (
        version_of(7, "run7-v") is None
        and version_of(7, "run77-v1") is None
        and version_of(7, "init") is None
    )


@pytest.mark.django_db(transaction=True)
def test_launch_and_resume_start_a_fenced_trainer_chunk(make_run, engine_names) -> None:
    run = make_run(preset="grpo-dart")
    services.run_launch(run=run)
    state = EngineState.objects.get(run=run)
    assert state.chunk == 1
    services.run_pause(run=run)
    services.run_resume(run=run)
    state.refresh_from_db()
    assert state.chunk == 2  # any chunk still running from before the pause stops at its next beat
    assert rds().llen(engine_names["RL_TRAIN_QUEUE"]) == 2
    # and each start asks for the run's servers and slots at once, on a queue the trainer does not hold
    assert rds().llen(engine_names["RL_SERVING_START_QUEUE"]) == 2


@pytest.mark.django_db(transaction=True)
def test_a_launched_run_serves_and_rolls_out_before_its_trainer_runs(make_run, engine_names) -> None:
    """What `serving_start` does at launch, before any trainer chunk ran (another run may hold the
    train worker): the run's own policy server answers with the start weights as version 0, and its
    rollout slots are queued; asked again (the trainer's turn), nothing new is started."""
    from rl_control.engine.control import serving_start_run
    from rl_control.engine.serving import (
        serving_ensure,
        serving_key,
        serving_stop,
        serving_urls,
        version_label,
    )

    run = running_run(make_run)
    try:
        assert serving_start_run(run_id=run.pk) == "started"
        state = EngineState.objects.get(run=run)
        [url] = serving_urls(run)
        assert httpx.get(f"{url}/models", timeout=30).status_code == 401  # the run's key only
        key = serving_key(run.pk, url)
        models = httpx.get(f"{url}/models", headers={"Authorization": f"Bearer {key}"}, timeout=30).json()
        assert version_label(run.pk, 0) in json.dumps(models)
        assert rds().llen(engine_names["RL_ROLLOUT_QUEUE"]) == 2
        assert serving_ensure(run, state, Path(state.trainer_dir or "."), 0) == set()  # kept, none started
        assert serving_urls(run) == [url]
    finally:
        serving_stop(run.pk)


def _stored(
    task: Any, *, reward: float | None, validation: int | None = None, thought: str = "I click OK."
) -> Any:
    import io

    from PIL import Image

    png = io.BytesIO()
    Image.new("RGB", (160, 210), "white").save(png, "PNG")
    trajectory = store.trajectory_create(task=task, source="annotation", policy_version="scripted-expert")
    store.step_append(
        trajectory=trajectory, screenshot=png.getvalue(), image_format="png",
        fields={"thought": thought, "action_text": "click(start_box='(30,40)')", "screen_width": 160,
                "screen_height": 210, "rl": {"instruction": "Click OK.", "elements": [
                    {"index": 0, "tag": "button", "text": "OK", "x": 10, "y": 30, "width": 40, "height": 20}]}},
    )  # fmt: skip
    store.trajectory_finish(trajectory=trajectory, status="completed", final_reward=reward)
    if validation is not None:
        store.trajectory_validate(trajectory=trajectory, value=validation, validator="test")
    trajectory.refresh_from_db()
    return trajectory


@pytest.mark.django_db
def test_experience_pool_starts_with_stored_successes_and_injects_text_only_steps(
    make_run, engine_names, pool
) -> None:
    from rl_control.engine.data import curator_of
    from rl_control.engine.samples import trajectory_sample
    from workers.policy.embedded.grammar import Grammar
    from workers.policy.embedded.tokenizer import FlywheelTokenizer

    run = running_run(make_run, curation={"injection": "experience_pool"})
    first, second = list(pool.tasks.order_by("pk"))[:2]
    good = _stored(first, reward=1.0)
    judged = _stored(second, reward=None, validation=1)  # a reviewer's V(s) = 1, no verifier
    _stored(first, reward=0.0)  # a failure
    _stored(first, reward=1.0, validation=0)  # a verifier success a person rejected
    for state in ("needs_fix", "rejected", "superseded"):  # reviewers sent it back: never RL-start data
        Trajectory.objects.filter(pk=_stored(first, reward=1.0).pk).update(review_state=state)
    curator = curator_of(run, EngineState.objects.get(run=run))
    assert curator.pool.to_dict()["items"] == {
        first.external_id: [str(good.pk)],
        second.external_id: [str(judged.pk)],
    }

    grammar = Grammar(FlywheelTokenizer())
    sample = trajectory_sample(good, "g1", sample_id=f"{good.pk}@g1", grammar=grammar)
    assert sample is not None and sample.reward == 1.0 and sample.success
    expected = grammar.encode_response("Thought: I click OK.\nAction: click(start_box='(30,40)')")
    assert sample.steps[0].token_ids == expected and sample.steps[0].rollout_logprobs == [0.0] * len(expected)
    assert trajectory_sample(judged, "g1", grammar=grammar).reward == 1.0
    assert trajectory_sample(good, "g1") is None, "without a grammar a step without tokens is not trainable"
    unwritable = _stored(first, reward=1.0, thought="x" * 500)  # longer than the model may write
    assert trajectory_sample(unwritable, "g1", grammar=grammar) is None


def test_rollouts_of_a_group_share_one_task_instance_unless_configured_otherwise() -> None:
    from rl_control.engine.rollout import episode_seed

    shared = {"seed": 3, "env": {"shared_group_seed": True}}
    assert episode_seed(shared, 7, 0) == episode_seed(shared, 7, 1)  # one group, one instance
    assert episode_seed(shared, 7, 0) != episode_seed(shared, 8, 0)
    assert episode_seed(shared, 7, 0) != episode_seed({**shared, "seed": 4}, 7, 0)
    own = {"seed": 3, "env": {"shared_group_seed": False}}
    assert len({episode_seed(own, 7, i) for i in (0, 1, 2)}) == 3
    assert episode_seed(own, 7, 1) != episode_seed(own, 8, 1)


@pytest.mark.django_db
def test_a_runs_task_instances_follow_its_seed_not_the_database_ids(make_run, engine_names) -> None:
    """Two runs of one seed play the same instances in the same order (an async run and its sync
    baseline): the seed is keyed by the group's place in its run, whatever ids the rows got."""
    from rl_control.engine.rollout import episode_seed, group_ordinal

    one = {"grpo": {"rollouts_per_task": 2}, "curation": {"rollouts_max": 2, "rollouts_min": 2}, "seed": 11}
    first, second = running_run(make_run, **one), running_run(make_run, **one)
    claims: dict[int, list[Any]] = {first.pk: [], second.pk: []}
    for run in (first, second, first, second, first, second):  # the two runs' groups get interleaved ids
        claims[run.pk] += [rollout_claim(run=run, env_slot=0, generation=1) for _ in range(2)]

    def seeds(run: Run) -> list[int]:
        return [episode_seed(run.config, group_ordinal(c.group), c.slot) for c in claims[run.pk]]

    assert [group_ordinal(c.group) for c in claims[first.pk]] == [0, 0, 1, 1, 2, 2]
    assert [c.group.pk for c in claims[first.pk]] != [c.group.pk for c in claims[second.pk]]
    assert seeds(first) == seeds(second)
    assert len(set(seeds(first))) == 3  # one instance per group


def test_an_off_screen_policy_action_is_refused_not_clamped() -> None:
    """A rollout never executes (or trains on) a click moved onto the screen's edge."""
    from rl_control.engine.rollout import screen_action
    from workers.actions.parse import parse_response
    from workers.actions.types import Convention
    from workers.envs.base import Observation
    from workers.policy.base import Candidate

    obs = Observation(screenshot=b"", width=160, height=210)

    def candidate(text: str, convention: Convention) -> Candidate:
        parsed = parse_response(f"Thought: t\nAction: {text}", convention=convention)
        return Candidate(thought="t", action_text=text, parsed=parsed, logprob_sum=None, token_logprobs=None,
                         model_version="1", raw_text=text, convention=convention)  # fmt: skip

    far = candidate("click(start_box='(5000,5000)')", Convention.SCREEN)
    action, why = screen_action(far.parsed.actions[0], far, obs)
    assert action is None and why.startswith("off screen:") and "160x210" in why
    near = candidate("click(start_box='(500,500)')", Convention.RELATIVE_1000)
    action, why = screen_action(near.parsed.actions[0], near, obs)
    assert why == "" and (action.point.x, action.point.y) == (80, 105)


def test_a_step_stores_only_the_actions_that_ran() -> None:
    """What a rollout step records as its `action`: a refused (off-screen) action and those after it
    never ran, so they are not stored (a replay from the seed would run them). (A terminal action is
    sent to the environment and stored: tests/rl_control/test_rollout_osworld_terminal.py.)"""
    from rl_control.engine.rollout import _act
    from workers.actions.parse import parse_response
    from workers.actions.types import Convention
    from workers.envs.base import Observation
    from workers.policy.base import Candidate

    obs = Observation(screenshot=b"", width=160, height=210)

    def candidate(text: str) -> Candidate:
        parsed = parse_response(f"Thought: t\nAction: {text}", convention=Convention.SCREEN)
        return Candidate(thought="t", action_text=text, parsed=parsed, logprob_sum=None, token_logprobs=None,
                         model_version="1", raw_text=text, convention=Convention.SCREEN)  # fmt: skip

    refused = _act(candidate("click(start_box='(5000,5000)')\n\nclick(start_box='(5,5)')"), obs, lease=None)
    assert refused.ran == [] and not refused.parsed_ok and refused.env_error.startswith("off screen:")


@pytest.mark.django_db(transaction=True)
def test_serving_start_tries_again_when_its_database_connection_was_terminated(
    make_run, engine_names
) -> None:
    """PostgreSQL terminates the task's connection (a restart, pg_terminate_backend): the task asks
    Celery to run it again shortly instead of failing for good."""
    import psycopg
    from celery.exceptions import Retry
    from django.db import connection

    from rl_control.tasks import serving_start
    from webapp.settings.env import database_url

    assert serving_start.apply(args=[10**9]).result == "gone"
    run = running_run(make_run)
    connection.ensure_connection()
    with psycopg.connect(database_url(connection.settings_dict), autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [connection.connection.info.backend_pid])
    with pytest.raises(Retry):
        serving_start.apply(args=[run.pk], throw=True)
    connection.close()


@pytest.mark.django_db(transaction=True)
def test_a_rollout_task_that_lost_its_database_connection_logs_one_line_and_restarts_its_slot(
    make_run, engine_names, caplog
) -> None:
    """PostgreSQL terminates a rollout task's connection with an episode in flight: the task logs one
    WARNING line and no traceback, closes the episode (abandoned, once) and stops its slot for the
    supervisor to start again; the failed task does not fail in Celery. (End to end with real
    workers: tests/rl_control/test_engine.py, make test-slow.)"""
    import logging

    import psycopg
    from django.db import connection

    from rl_control.tasks import rollout_slot
    from webapp.settings.env import database_url

    run = running_run(make_run)
    claim = rollout_claim(run=run, env_slot=0, generation=7)
    assert claim is not None
    rds().hset(slots.slot_key(run.pk, 0), mapping={"generation": 7, "state": "running", "heartbeat": time.time(),
                                                   "trajectory": claim.trajectory.pk, "lease": ""})  # fmt: skip
    connection.ensure_connection()
    with psycopg.connect(database_url(connection.settings_dict), autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [connection.connection.info.backend_pid])
    with caplog.at_level(logging.INFO):
        assert rollout_slot.apply(args=[run.pk, 0, 7], throw=True).result == "connection lost"
    lines = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.name for r in lines] == ["rl_control.tasks"], [r.getMessage() for r in lines]
    assert "the database connection was lost (terminating connection" in lines[0].getMessage()
    assert "\n" not in lines[0].getMessage() and not any(r.exc_info for r in caplog.records)
    claim.trajectory.refresh_from_db()
    assert claim.trajectory.status == "abandoned"
    assert slots.slot_read(run.pk, 0)["state"] == "stopped"
