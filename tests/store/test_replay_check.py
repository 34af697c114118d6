"""`replay_check`: stored MiniWoB++ episodes (the scripted expert in Chromium, and an RL-shaped one
recorded the way the engine records it) replay from their seed to the same reward; one without a
seed is skipped with the reason; a tampered one is reported as differing."""

from __future__ import annotations

import json

import pytest
from django.core.management import CommandError, call_command

from webapp.store import services as store
from webapp.store.models import Step
from webapp.store.replay import trajectory_replay_check
from webapp.store.sft_jobs import demos_collect
from webapp.store.taskspec import task_spec_wire

pytestmark = pytest.mark.django_db


def test_expert_episodes_replay_to_their_reward_and_a_tampered_one_does_not(capsys) -> None:
    stored = demos_collect(task_names=["click-button", "click-test"], episodes=1, seed_start=31)
    assert stored and all(t.final_reward == 1.0 for t in stored)
    call_command("replay_check", "--ids", ",".join(str(t.pk) for t in stored))
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert lines[-1] == {"checked": len(stored), "same": len(stored), "differs": 0, "skipped": 0}

    # the same episode recorded as the engine records an RL one: the task on the wire + its seed
    demo = stored[0]
    rl = store.trajectory_create(task=demo.task, source="rl")
    store.trajectory_record_episode(
        trajectory=rl, task_spec=task_spec_wire(demo.task), seed=demo.metadata["seed"]
    )
    for step in demo.steps.order_by("index"):
        store.step_append(trajectory=rl, fields={
            "action": step.action, "coord_convention": step.coord_convention, "screen_width": step.screen_width,
            "screen_height": step.screen_height, "model_image_width": step.model_image_width,
            "model_image_height": step.model_image_height})  # fmt: skip
    store.trajectory_finish(trajectory=rl, status="completed", final_reward=1.0)
    assert store.trajectory_last_step_outcome(trajectory=rl, reward=1.0) == 1
    assert [s.done for s in rl.steps.order_by("index")][-1] is True
    assert trajectory_replay_check(trajectory=rl).verdict == "same"

    Step.objects.filter(trajectory=rl).update(action=[])  # nothing done: the task is not solved
    result = trajectory_replay_check(trajectory=rl)
    assert result.verdict == "differs" and result.replayed == 0.0 and result.stored == 1.0
    with pytest.raises(CommandError, match="1 trajectories replay to a different reward"):
        call_command("replay_check", "--ids", str(rl.pk))

    unseeded = store.trajectory_create(task=demo.task, source="rl")
    store.trajectory_finish(trajectory=unseeded, status="completed", final_reward=0.0)
    assert trajectory_replay_check(trajectory=unseeded).reason == "no seed recorded"
