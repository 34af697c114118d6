"""PolicyTrainer options on the real embedded model (tiny config, CPU): learning-rate schedule,
weight averaging (weight_ema), the thought's own sampling temperature and leaving the thought out
of the loss. No Django, no mocks."""

from __future__ import annotations

import math

import pytest
import torch
from pydantic import ValidationError

from tests.rl.trainer_helpers import (  # one_thread: autouse fixture
    bandit_batch,
    grpo_config,
    observation,
    one_thread,  # noqa: F401
    ppo_config,
    tiny_model,
)
from workers.policy.embedded.generation import grammar_keys, score
from workers.policy.embedded.grammar import THOUGHT_TEXT
from workers.policy.embedded.policy import EmbeddedPolicy
from workers.rl.config import RLConfig
from workers.rl.trainer import EMA_DIR, PolicyTrainer
from workers.rl.trainer.batch import rows_tensors


# learning-rate schedule -------------------------------------------------------------------------
def test_lr_warms_up_over_the_first_trained_updates_and_survives_a_resume(tmp_path) -> None:
    config = grpo_config(lr=1e-3, lr_warmup_updates=4)
    trainer = PolicyTrainer(tiny_model(4), config, seed=7)
    policy = EmbeddedPolicy(trainer.model, seed=4)
    lrs = []
    for k in range(3):
        assert trainer.set_progress(0.0) == pytest.approx((k + 1) / 4)
        lrs.append(trainer.update(bandit_batch(policy, k, n=4, tag=f"w{k}"))["policy/lr"])
    assert lrs == pytest.approx([2.5e-4, 5e-4, 7.5e-4])
    trainer.save(tmp_path / "ckpt", version=trainer.version)
    resumed = PolicyTrainer.resume(tmp_path / "ckpt", config)  # three updates done: the fourth is at full lr
    assert resumed.set_progress(0.0) == 1.0 and resumed.optimizer.param_groups[0]["lr"] == pytest.approx(1e-3)
    annealed = PolicyTrainer(
        tiny_model(4), grpo_config(lr=1e-3, lr_warmup_updates=2, lr_schedule="linear"), seed=7
    )
    assert annealed.set_progress(0.5) == pytest.approx(0.25)  # both multipliers: (1 / 2) · (1 − 0.5)
    assert PolicyTrainer(tiny_model(4), ppo_config(lr_warmup_updates=0), seed=7).set_progress(0.0) == 1.0


def test_lr_schedule_anneals_over_the_budget_and_resume_keeps_the_config_lr(tmp_path) -> None:
    config = grpo_config(lr=1e-3, lr_schedule="linear", lr_decay_start=0.5)
    trainer = PolicyTrainer(tiny_model(4), config, seed=7)
    assert trainer.set_progress(0.25) == 1.0
    assert trainer.optimizer.param_groups[0]["lr"] == pytest.approx(1e-3)
    assert trainer.set_progress(0.75) == pytest.approx(0.5)
    policy = EmbeddedPolicy(trainer.model, seed=4)
    metrics = trainer.update(bandit_batch(policy, 0, n=4))
    assert metrics["policy/lr"] == pytest.approx(5e-4)
    assert trainer.set_progress(1.0) == 0.0
    before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    trainer.update(bandit_batch(policy, 1, n=4, tag="b"))  # lr 0 at the end of the budget: nothing moves
    assert all(torch.equal(v, before[k]) for k, v in trainer.model.state_dict().items())

    trainer.save(tmp_path / "ckpt", version=trainer.version)
    faster = grpo_config(lr=2e-3, lr_schedule="cosine")
    resumed = PolicyTrainer.resume(tmp_path / "ckpt", faster)
    assert resumed.set_progress(0.5) == pytest.approx(0.5)  # cosine from the start, halfway
    assert resumed.optimizer.param_groups[0]["lr"] == pytest.approx(1e-3)  # the new config's base lr
    constant = PolicyTrainer(tiny_model(4), ppo_config(), seed=7)
    assert constant.set_progress(0.9) == 1.0
    assert [g["lr"] for g in constant.optimizer.param_groups] == [3e-3, 1e-2]
    with pytest.raises(ValidationError, match="lr_decay_start"):
        grpo_config(lr_decay_start=1.0)
    with pytest.raises(ValidationError, match="lr_schedule"):
        RLConfig.model_validate({"algorithm": "grpo", "grpo": {"lr_schedule": "step"}})


@pytest.mark.parametrize(
    "config", [ppo_config(weight_ema=0.75), grpo_config(weight_ema=0.75)], ids=["ppo", "grpo"]
)
def test_weight_ema_averages_updates_and_is_saved_loaded_and_resumed(tmp_path, config: RLConfig) -> None:
    trainer = PolicyTrainer(tiny_model(4), config, seed=7)
    policy = EmbeddedPolicy(trainer.model, seed=4)
    start = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    trainer.update(bandit_batch(policy, 0, n=4))
    first = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    trainer.update(bandit_batch(policy, 1, n=4, tag="b"))
    second = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    assert trainer.ema is not None
    moved = [k for k, v in start.items() if v.is_floating_point() and not torch.equal(v, second[k])]
    assert moved  # the updates changed weights, so the average is a real mix of three states
    for name in moved:  # θ̄₂ = d²·θ₀ + d(1 − d)·θ₁ + (1 − d)·θ₂
        expected = 0.5625 * start[name] + 0.1875 * first[name] + 0.25 * second[name]
        assert torch.allclose(trainer.ema[name], expected, atol=1e-6), name

    trainer.save(tmp_path / "ckpt", version=trainer.version)
    averaged = EmbeddedPolicy.from_pretrained(tmp_path / "ckpt" / EMA_DIR, seed=0)
    assert averaged.model_version == "2"
    for name, value in averaged.model.state_dict().items():
        assert torch.equal(value, trainer.ema[name]), name
    online = EmbeddedPolicy.from_pretrained(
        tmp_path / "ckpt", seed=0
    )  # the directory keeps the online weights
    assert all(torch.equal(v, second[k]) for k, v in online.model.state_dict().items())

    third = bandit_batch(policy, 2, n=4, tag="c")
    expected_next = trainer.update(third)
    resumed = PolicyTrainer.resume(tmp_path / "ckpt", config)
    got_next = resumed.update(third)
    assert got_next["policy/entropy"] == expected_next["policy/entropy"]
    for name, value in resumed.ema.items():
        assert torch.equal(value, trainer.ema[name]), name


def test_weight_ema_off_saves_no_average_and_is_validated(tmp_path) -> None:
    trainer = PolicyTrainer(tiny_model(0), grpo_config())
    assert trainer.ema is None and trainer.averaged_model() is None
    trainer.update(bandit_batch(EmbeddedPolicy(trainer.model, seed=1), 0))
    trainer.save(tmp_path / "v1", version=trainer.version)
    assert not (tmp_path / "v1" / EMA_DIR).exists()
    with pytest.raises(ValidationError, match="weight_ema"):
        grpo_config(weight_ema=1.0)
    with pytest.raises(ValidationError, match="weight_ema"):
        RLConfig.model_validate({"algorithm": "ppo", "ppo": {"weight_ema": -0.1}})


def test_thought_temperature_applies_to_the_thought_only_in_sampling_and_scoring() -> None:
    model = tiny_model(2)
    policy = EmbeddedPolicy(model, seed=3)
    grammar = policy.grammar
    inputs = policy.inputs_for(observation(), [], None)
    rows, _ = policy.generate([inputs], n=6, temperature=1.0, thought_temperature=0.5)
    responses = [g.token_ids for g in rows[0]]
    batch = policy.batch([inputs] * len(responses))
    with torch.no_grad():
        split = score(model, grammar, batch, responses, 1.0, 0.5)
        thought_scale = score(model, grammar, batch, responses, 0.5)
        action_scale = score(model, grammar, batch, responses, 1.0)
    keys = grammar_keys(grammar, responses, split.mask.shape[1])
    thought = (keys == THOUGHT_TEXT) & split.mask
    assert thought.any() and (~thought & split.mask).any()
    assert torch.allclose(split.logprobs[thought], thought_scale.logprobs[thought], atol=1e-5)
    assert torch.allclose(split.logprobs[~thought], action_scale.logprobs[~thought], atol=1e-5)
    for generated, row in zip(rows[0], split.logprobs, strict=True):  # sampled under the same split
        assert torch.allclose(torch.tensor(generated.logprobs), row[: len(generated.logprobs)], atol=1e-4)
    with pytest.raises(ValidationError, match="thought_temperature"):
        RLConfig.model_validate({"algorithm": "grpo", "grpo": {"thought_temperature": 0}})


def test_untrained_thought_carries_no_policy_loss() -> None:
    config = grpo_config(train_thought=False, thought_temperature=0.3)
    trainer = PolicyTrainer(tiny_model(2), config, seed=1)
    policy = EmbeddedPolicy(trainer.model, seed=3)
    batch = bandit_batch(policy, 0, n=4)
    _, rows = trainer.prepare(batch, with_reference=False)
    mask = rows_tensors(rows)["mask"]
    thought_tokens = 0
    for i, row in enumerate(rows):
        keys = grammar_keys(trainer.grammar, [row.step.token_ids], len(row.step.token_ids))[0]
        thought = keys == THOUGHT_TEXT
        thought_tokens += int(thought.sum())
        assert torch.equal(mask[i, : len(keys)], (~thought).float())  # the action's tokens only
    assert thought_tokens > 0
    metrics = trainer.update(batch)
    assert math.isfinite(metrics["policy/loss"]) and trainer.version == 1
    assert PolicyTrainer(tiny_model(2), grpo_config()).config.train_thought  # trained by default
