"""What the engine records and runs besides the loss: Entropulse SFT phases when training plateaus
(seed 001 §3.3) on the run's own stored successes, and the figures declared in metric_names that
come from the curation plans, the finished episodes and the fleet."""

from __future__ import annotations

import io
import uuid
from typing import Any

import pytest
from django.test import override_settings
from PIL import Image

from rl_control.engine import measures
from rl_control.engine.entropulse import entropulse_after_update
from rl_control.metric_names import metric_name_problem
from webapp.fleet import services as fleet
from webapp.store import services as store
from webapp.store.models import Trajectory


def _success(task: Any, run: Any, thought: str = "I click OK.") -> Trajectory:
    png = io.BytesIO()
    Image.new("RGB", (160, 210), "white").save(png, "PNG")
    t = store.trajectory_create(task=task, source="rl", run_id=run.pk, policy_version="1")
    for i in range(2):
        store.step_append(
            trajectory=t, screenshot=png.getvalue(), image_format="png",
            fields={"index": i, "thought": thought + ("" if i else " Then OK again."),
                    "action_text": "click(start_box='(30,40)')", "screen_width": 160, "screen_height": 210,
                    "rl": {"instruction": "Click OK.", "elements": [
                        {"index": 0, "tag": "button", "text": "OK", "x": 10, "y": 30, "width": 40, "height": 20}]}},
        )  # fmt: skip
    store.trajectory_finish(trajectory=t, status="completed", final_reward=1.0, success=True)
    Trajectory.objects.filter(pk=t.pk).update(metadata={"engine": {"success": True, "group": 0}})
    return t


def _rollout_success(task: Any, run: Any, policy: Any) -> Trajectory:
    """A successful episode stored as the rollout stores it: the sampled token ids and log-probs."""
    from tests.rl.trainer_helpers import observation

    obs = observation()
    t = store.trajectory_create(task=task, source="rl", run_id=run.pk, policy_version="0")
    for i, c in enumerate(policy.propose(obs, [], n=2, temperature=1.0)):
        store.step_append(
            trajectory=t, screenshot=obs.screenshot, image_format=obs.image_format,
            fields={"index": i, "thought": c.thought, "action_text": c.action_text, "policy_version": "0",
                    "rl": {"version": 0, "token_ids": list(c.token_ids), "logprobs": list(c.token_logprobs),
                           "instruction": obs.instruction,
                           "elements": [{"index": e.index, "tag": e.tag, "text": e.text, "x": e.x, "y": e.y,
                                         "width": e.width, "height": e.height} for e in obs.elements]}},
        )  # fmt: skip
    store.trajectory_finish(trajectory=t, status="completed", final_reward=1.0, success=True)
    Trajectory.objects.filter(pk=t.pk).update(metadata={"engine": {"success": True, "group": 0}})
    return t


@pytest.mark.django_db
def test_entropulse_runs_an_sft_phase_when_training_plateaus(make_run, pool, tmp_path, settings) -> None:
    from tests.rl.trainer_helpers import tiny_model
    from workers.policy.embedded.policy import EmbeddedPolicy
    from workers.rl.config import RLConfig
    from workers.rl.trainer import PolicyTrainer

    settings.RL_CHECKPOINT_ROOT = str(tmp_path / "rl")  # not there yet: the phase makes it
    run = make_run(preset="grpo-entropulse", config={
        "curation": {"plateau_window": 2}, "entropulse": {"sft_steps": 3, "sft_batch_size": 4, "max_phases": 1}})  # fmt: skip
    assert run.config["entropulse"]["enabled"] is True
    trainer = PolicyTrainer(tiny_model(0), RLConfig.from_run_config(run.algorithm, run.config))
    task = pool.tasks.first()
    policy = EmbeddedPolicy(trainer.model, seed=1)
    for _ in range(3):
        _rollout_success(task, run, policy)
    assert entropulse_after_update(run, trainer) == {"policy/entropulse_phases": 0.0}  # no plateau yet
    for _ in range(4):
        trainer.plateau.record(0.0, 1.0)  # flat reward, flat entropy: a plateau
    assert trainer.plateaued
    figures = entropulse_after_update(run, trainer)
    assert figures["policy/entropulse_phases"] == 1.0 and trainer.entropulse_count == 1
    assert 1 <= figures["policy/entropulse_sft_examples"] <= 6 and figures["policy/entropulse_sft_loss"] > 0
    assert not trainer.plateaued  # the detector starts over after the phase
    for _ in range(4):
        trainer.plateau.record(0.0, 1.0)
    assert entropulse_after_update(run, trainer) == {"policy/entropulse_phases": 1.0}  # max_phases reached
    for name in figures:
        assert metric_name_problem(name) is None, name

    plain = make_run(preset="grpo-dart")
    assert entropulse_after_update(plain, trainer) == {}


def test_curation_figures_from_the_group_plans() -> None:
    plans = [
        {"task_id": "a", "next_rollouts": 8, "step_limit": 30, "curriculum": "0-25"},
        {"task_id": "b", "next_rollouts": 4, "step_limit": 12, "curriculum": "75-100"},
        {"skipped": "no completed rollout"},
    ]
    figures = measures.curation_figures(plans)
    assert figures["curation/rollouts_per_task_mean"] == 6.0 and figures["curation/step_limit_mean"] == 21.0
    assert figures["curation/rollouts_per_task/a"] == 8.0 and figures["curation/rollouts_per_task/b"] == 4.0
    assert figures["curation/bucket/0-25"] == 1.0 and figures["curation/bucket/25-50"] == 0.0
    assert measures.curation_figures([{"skipped": "x"}]) == {}
    for name in figures:
        assert metric_name_problem(name) is None, name


@pytest.mark.django_db
def test_episode_and_fleet_figures(make_run, pool) -> None:
    run = make_run()
    task = pool.tasks.first()
    task.tags = ["chrome"]
    task.save()
    done = [_success(task, run, thought="1234567890"), _success(task, run, thought="12345")]
    figures = measures.episode_figures(done, [True, False], "miniwob-8")
    # thoughts: 10 + 25, 5 + 20 characters over four steps
    assert figures["outcome/think_length_mean"] == pytest.approx((10 + 25 + 5 + 20) / 4)
    assert figures["outcome/success_rate/domain/chrome"] == 0.5
    prefix = f"test:meas:{uuid.uuid4().hex[:8]}"
    with override_settings(FLEET_REDIS_PREFIX=prefix):
        fleet.registry.cache_clear()
        reg = fleet.registry()
        try:
            for i in range(3):
                reg.register_env(env_id=f"e{i}", kind="browser", worker="w", boot_s=2.0 + i)
            reg.acquire(kind="browser", owner="x")
            fig = measures.fleet_figures("browser")
            assert fig == {"fleet/live": 3.0, "fleet/idle": 2.0, "fleet/boot_s": 3.0}
            assert measures.fleet_figures("desktop")["fleet/live"] == 0.0
        finally:
            reg.clear()
            fleet.registry.cache_clear()
    for name in [*figures, *fig]:
        assert metric_name_problem(name) is None, name
