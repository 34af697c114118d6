"""PolicyTrainer on the real embedded model (tiny config, CPU): log-prob recomputation, learning on a
bandit, save → resume → identical next update, truncated IS, entropy filter, value pretraining,
Entropulse. No Django, no mocks: sampling goes through EmbeddedPolicy / PolicyService."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch

from tests.rl.trainer_helpers import (  # one_thread: autouse fixture
    bandit_batch,
    grpo_config,
    observation,
    one_thread,  # noqa: F401
    point_call_probability,
    ppo_config,
    sample_steps,
    tiny_model,
    two_step_batch,
)
from workers.policy.base import HistoryItem, PolicyError
from workers.policy.embedded.generation import score
from workers.policy.embedded.policy import EmbeddedPolicy
from workers.policy.openai_client import EMBEDDED, OpenAIPolicy
from workers.policy.prompts import embedded_prompt_from_messages
from workers.policy.server import PolicyService
from workers.rl.config import CurationConfig, RLConfig
from workers.rl.samples import StepSample, TrajectorySample, step_sample_from
from workers.rl.trainer import PolicyTrainer


# log-prob recomputation -------------------------------------------------------------------------
def test_recomputed_logprobs_equal_in_process_rollout_logprobs() -> None:
    trainer = PolicyTrainer(tiny_model(0), grpo_config())
    policy = EmbeddedPolicy(trainer.model, seed=3)
    obs = observation()
    history = [HistoryItem("look", "click(start_box='(14,9)')"), HistoryItem("", "type(content='ok')")]
    pairs = sample_steps(policy, obs, history, 6, version=0)
    steps = [s for _, s in pairs]
    # the prompt text is exactly the one EmbeddedPolicy built for the rollout
    assert {s.prompt for s in steps} == {policy.inputs_for(obs, history, None)}
    recomputed = trainer.recompute_logprobs(steps)
    for (_, step), lps in zip(pairs, recomputed, strict=True):
        assert len(lps) == len(step.rollout_logprobs) > 3
        assert max(abs(a - b) for a, b in zip(lps, step.rollout_logprobs, strict=True)) < 1e-4


@pytest.mark.parametrize("thought_temperature", [None, 0.3], ids=["one-temperature", "thought-temperature"])
def test_recomputed_logprobs_equal_policy_server_logprobs(thought_temperature: float | None) -> None:
    """The policy server path: chat messages -> PolicyService -> token ids + log-probs; the trainer
    rebuilds the prompt from the stored observation with step_sample_from and gets the same log-probs
    (also when the thought is sampled at its own temperature, sent as the `thought_temperature` field)."""
    trainer = PolicyTrainer(tiny_model(1), grpo_config(thought_temperature=thought_temperature))
    service = PolicyService(EmbeddedPolicy(trainer.model, seed=5), "flywheel", "mem")
    client = OpenAIPolicy("http://127.0.0.1:9", "flywheel", profile=EMBEDDED)
    obs = observation((10, 200, 10))
    history = [HistoryItem("first", "hover(start_box='(40,9)')")]
    messages, size = client.build_messages(obs, history, None)
    body = {"messages": messages, "n": 4, "temperature": 1.0, "logprobs": True, **EMBEDDED.extra_body}
    if thought_temperature is not None:
        body["thought_temperature"] = thought_temperature
    response = service.chat(body)
    candidates = [
        client._candidate(c, str(response.get("model_version", "0")), size) for c in response["choices"]
    ]
    server_text = embedded_prompt_from_messages(messages).text
    for cand in candidates:
        assert cand.token_ids and cand.token_logprobs
        step = step_sample_from(
            instruction=obs.instruction,
            observation_image=obs.screenshot,
            elements=[vars(e) for e in obs.elements],  # as stored in JSON
            history=[h.action for h in history],
            token_ids=cand.token_ids,
            rollout_logprobs=cand.token_logprobs,
            policy_version=0,
        )
        assert step.prompt.text == server_text
        (lps,) = trainer.recompute_logprobs([step])
        assert max(abs(a - b) for a, b in zip(lps, cand.token_logprobs, strict=True)) < 1e-4


@pytest.mark.parametrize("config", [ppo_config(), grpo_config()], ids=["ppo", "grpo"])
def test_first_update_at_version_zero_has_ratio_one(config: RLConfig) -> None:
    trainer = PolicyTrainer(tiny_model(0), config)
    policy = EmbeddedPolicy(trainer.model, seed=1)
    batch = bandit_batch(policy, 0)
    metrics = trainer.update(batch)
    # one minibatch: the gradient step is taken at θ = θ_old = θ_rollout
    assert metrics["policy/ratio_mean"] == pytest.approx(1.0, abs=1e-4)
    assert metrics["policy/is_weight_mean"] == pytest.approx(1.0, abs=1e-4)
    assert metrics["policy/clip_frac_low"] == metrics["policy/clip_frac_high"] == 0.0
    assert metrics["efficiency/staleness_max"] == 0.0
    assert trainer.version == 1
    stats = trainer.last_step_stats
    assert set(stats) == {t.trajectory_id for t in batch}
    for rows in stats.values():
        assert rows[0]["clipped"] is False and rows[0]["policy_version"] == 0
        if rows[0]["kept"]:  # GRPO's entropy filter drops 20 %: those carry no ratio
            assert rows[0]["ratio"] == pytest.approx(1.0, abs=1e-4)
        else:
            assert rows[0]["ratio"] is None


# learning ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("config", [ppo_config(), grpo_config()], ids=["ppo", "grpo"])
def test_updates_raise_probability_of_rewarded_action(config: RLConfig) -> None:
    trainer = PolicyTrainer(tiny_model(0), config)
    policy = EmbeddedPolicy(trainer.model, seed=1)
    probe = observation((0, 100, 200))
    before = point_call_probability(trainer.model, policy, probe)
    rewards = []
    for _ in range(8):
        batch = bandit_batch(policy, trainer.version)
        rewards.append(sum(t.reward for t in batch) / len(batch))
        trainer.update(batch)
    after = point_call_probability(trainer.model, policy, probe)
    assert 0.2 < before < 0.5
    assert after > before + 0.15, (before, after, rewards)


def test_ppo_multi_step_uses_length_adaptive_lambda_and_token_level_gae() -> None:
    trainer = PolicyTrainer(tiny_model(2), ppo_config(lambda_policy=None, length_adaptive_alpha=0.05))
    policy = EmbeddedPolicy(trainer.model, seed=2)
    batch = two_step_batch(policy, 0, n=4)
    metrics = trainer.update(batch)
    for traj in batch:
        rows = trainer.last_step_stats[traj.trajectory_id]
        assert len(rows) == 2
        length = sum(len(s.token_ids) for s in traj.steps)
        expected = min(1.0, max(0.0, 1.0 - 1.0 / (0.05 * length)))
        assert rows[0]["lambda_policy"] == pytest.approx(expected)
        assert all(isinstance(r["value"], float) for r in rows)
    assert {"value/loss", "value/mean", "policy/entropy", "policy/grad_norm"} <= set(metrics)
    assert all(math.isfinite(v) for v in metrics.values())


# save / resume ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "config",
    [ppo_config(epochs=2, minibatch_size=2), grpo_config(beta_kl=0.1, epochs=2, minibatch_size=3)],
    ids=["ppo", "grpo-kl"],
)
def test_save_resume_gives_identical_next_update(tmp_path, config: RLConfig) -> None:
    trainer = PolicyTrainer(tiny_model(4), config, seed=7)
    policy = EmbeddedPolicy(trainer.model, seed=4)
    first = two_step_batch(policy, 0, n=4)
    trainer.update(first)
    second = two_step_batch(policy, 1, n=4)
    trainer.save(tmp_path / "ckpt", version=trainer.version, curation_state={"bepa": {"task": "t0-1"}})

    expected = trainer.update(second)
    expected_params = {k: v.clone() for k, v in trainer.model.state_dict().items()}

    resumed = PolicyTrainer.resume(tmp_path / "ckpt", config)
    assert resumed.version == 1 and resumed.steps_done == 1
    assert resumed.curation_state == {"bepa": {"task": "t0-1"}}
    got = resumed.update(second)
    expected.pop("efficiency/update_s")
    got.pop("efficiency/update_s")
    assert got == expected
    for name, value in resumed.model.state_dict().items():
        assert torch.equal(value, expected_params[name]), name
    assert resumed.last_step_stats == trainer.last_step_stats


def test_saved_checkpoint_loads_as_embedded_policy_with_version(tmp_path) -> None:
    trainer = PolicyTrainer(tiny_model(0), grpo_config())
    trainer.update(bandit_batch(EmbeddedPolicy(trainer.model, seed=1), 0))
    trainer.save(tmp_path / "v1", version=trainer.version)
    loaded = EmbeddedPolicy.from_pretrained(tmp_path / "v1", seed=0)
    assert loaded.model_version == "1"
    for name, value in loaded.model.state_dict().items():
        assert torch.equal(value, trainer.model.state_dict()[name])
    # a second trainer built from the plain directory starts at that version
    assert PolicyTrainer(tmp_path / "v1", grpo_config()).version == 1


# truncated IS and the entropy filter ------------------------------------------------------------
def _shift_rollout(batch: list[TrajectorySample], delta: float) -> list[TrajectorySample]:
    return [
        replace(
            t, steps=[replace(s, rollout_logprobs=[x + delta for x in s.rollout_logprobs]) for s in t.steps]
        )
        for t in batch
    ]


def test_truncated_is_weights_are_capped() -> None:
    trainer = PolicyTrainer(tiny_model(0), grpo_config(is_cap=1.0))
    batch = bandit_batch(EmbeddedPolicy(trainer.model, seed=1), 0)
    # the rollout engine reported each token 1 nat less likely than the trainer computes:
    # π_old / π_rollout = e per token, truncated to C = 1
    metrics = trainer.update(_shift_rollout(batch, -1.0))
    assert metrics["policy/is_weight_max"] == pytest.approx(math.e, rel=1e-3)
    assert metrics["policy/is_weight_mean"] == pytest.approx(1.0, abs=1e-6)
    assert metrics["policy/is_truncated_frac"] == 1.0

    trainer = PolicyTrainer(tiny_model(0), grpo_config(is_cap=1.0))
    metrics = trainer.update(_shift_rollout(batch, +0.5))  # rollout more confident: weight e^-0.5
    assert metrics["policy/is_weight_mean"] == pytest.approx(math.exp(-0.5), rel=1e-3)
    assert metrics["policy/is_truncated_frac"] == 0.0

    trainer = PolicyTrainer(tiny_model(0), grpo_config(is_cap=2.0, is_level="sequence"))
    metrics = trainer.update(_shift_rollout(batch, -1.0))  # product over ≥ 5 tokens: e^T capped at 2
    assert metrics["policy/is_weight_mean"] == pytest.approx(2.0, rel=1e-5)
    assert metrics["policy/is_truncated_frac"] == 1.0


def test_entropy_filter_keeps_top_80_percent_of_each_group() -> None:
    trainer = PolicyTrainer(tiny_model(0), grpo_config(entropy_keep_fraction=0.8))
    policy = EmbeddedPolicy(trainer.model, seed=9)
    batch = bandit_batch(policy, 0, groups=2, n=10)
    steps = [t.steps[0] for t in batch]
    batch_inputs = policy.batch([s.prompt for s in steps])
    with torch.no_grad():
        scored = score(trainer.model, trainer.grammar, batch_inputs, [s.token_ids for s in steps])
    mean_entropy = (scored.entropies.sum(1) / scored.mask.sum(1)).tolist()
    metrics = trainer.update(batch)
    assert metrics["policy/steps_kept_frac"] == pytest.approx(0.8)
    for g in range(2):
        members = [i for i, t in enumerate(batch) if t.group_id.startswith(f"task{g}@")]
        kept = [i for i in members if trainer.last_step_stats[batch[i].trajectory_id][0]["kept"]]
        assert len(kept) == 8
        dropped = set(members) - set(kept)
        assert max(mean_entropy[i] for i in dropped) <= min(mean_entropy[i] for i in kept) + 1e-6


def test_group_without_reward_variance_is_counted_and_gets_zero_advantage() -> None:
    trainer = PolicyTrainer(tiny_model(0), grpo_config())
    batch = bandit_batch(EmbeddedPolicy(trainer.model, seed=1), 0, groups=1, n=4)
    same = [replace(t, reward=1.0) for t in batch]
    metrics = trainer.update(same)
    assert metrics["curation/no_signal_groups"] == 1.0
    assert all(rows[0]["advantage"] == 0.0 for rows in trainer.last_step_stats.values())


def test_anchor_weight_credits_the_shorter_way_from_a_shared_state() -> None:
    """GiGPO step credit (grpo.anchor_weight): two successes from the same page, one direct and one
    after a step that left the page as it was. Step-wise GRPO sees no spread (both rewards 1); the
    step credit ranks the direct step over the wasted one, and nothing when it is off."""
    obs = observation()
    policy = EmbeddedPolicy(tiny_model(0), seed=1)
    (_, a0), (c1, b0) = sample_steps(policy, obs, [], 2, 0)
    _, b1 = sample_steps(policy, obs, [HistoryItem(c1.thought, c1.action_text)], 1, 0)[0]
    batch = [TrajectorySample("direct", "task", "task@0", [a0], 1.0, True),
             TrajectorySample("detour", "task", "task@0", [b0, b1], 1.0, True)]  # fmt: skip
    stats = {}
    for weight in (0.0, 1.0):
        trainer = PolicyTrainer(tiny_model(0), grpo_config(anchor_weight=weight, entropy_keep_fraction=1.0))
        metrics = trainer.update(batch)
        stats[weight] = {k: [row["advantage"] for row in v] for k, v in trainer.last_step_stats.items()}
    assert stats[0.0] == {"direct": [0.0], "detour": [0.0, 0.0]}
    (direct,), (wasted, last) = stats[1.0]["direct"], stats[1.0]["detour"]
    assert direct > 0 and last > 0 > wasted  # returns 1, 1 and 0.95 on one page
    assert metrics["policy/anchor_steps_frac"] == 1.0 and metrics["policy/anchor_groups"] == 1.0


# value pretraining and Entropulse ---------------------------------------------------------------
def test_value_pretraining_trains_only_the_critic_until_done() -> None:
    config = ppo_config(lr_value=3e-2, value_pretrain_max_updates=20, value_pretrain_target_ev=0.9)
    trainer = PolicyTrainer(tiny_model(0), config)
    batch = bandit_batch(EmbeddedPolicy(trainer.model, seed=1), 0)
    # the return is predictable from the screen: task 0 (one colour) always pays 1, task 1 pays 0
    batch = [replace(t, reward=float(t.task_key == "task0")) for t in batch]
    steps = [t.steps[0] for t in batch]
    logprobs_before = trainer.recompute_logprobs(steps)
    losses, evs = [], []
    counted = []
    while trainer.value_pretrain_done is None:
        metrics = trainer.pretrain_value(batch)
        losses.append(metrics["value/loss"])
        evs.append(metrics.get("value/explained_variance", 0.0))
        counted.append(metrics["value/pretrain_updates"])  # the run page's "value pre-training 7/20"
    assert trainer.value_pretrain_done == "max_updates" and len(losses) == 20
    assert metrics["value/pretraining"] == 0.0 and counted == [float(i) for i in range(1, 21)]
    assert losses[-1] < 0.6 * losses[0]
    assert evs[-1] > evs[0] + 0.05
    assert trainer.recompute_logprobs(steps) == logprobs_before  # the policy did not move


def test_plateau_then_entropulse_sft_on_successes_and_reference_reset() -> None:
    config = grpo_config(beta_kl=0.1).model_copy(update={"curation": CurationConfig(plateau_window=2)})
    trainer = PolicyTrainer(tiny_model(0), config)
    policy = EmbeddedPolicy(trainer.model, seed=1)
    batch = bandit_batch(policy, 0)
    flat = [replace(t, reward=0.0) for t in batch]  # reward stays flat ...
    for _ in range(4):
        trainer.update(flat)  # ... no signal, entropy unchanged: a plateau
    assert trainer.plateaued
    successes = [t for t in batch if t.success]
    assert successes
    probe = observation((0, 100, 200))
    before = point_call_probability(trainer.model, policy, probe)
    success_steps = [t.steps[0] for t in successes]
    nll_before = -sum(sum(lp) for lp in trainer.recompute_logprobs(success_steps)) / len(success_steps)
    result = trainer.entropulse(successes, steps=40, lr=5e-3, batch_size=8)
    assert 1 <= result["examples"] <= len(successes) and result["loss_last"] < result["loss_first"]
    nll_after = -sum(sum(lp) for lp in trainer.recompute_logprobs(success_steps)) / len(success_steps)
    assert nll_after < nll_before - 2.0  # the stored successes became much more likely
    assert point_call_probability(trainer.model, policy, probe) > before + 0.1
    assert not trainer.plateaued
    assert trainer.reference is not None
    for name, value in trainer.reference.state_dict().items():
        assert torch.equal(value, trainer.model.state_dict()[name]), name
    metrics = trainer.update(bandit_batch(policy, trainer.version))  # RL resumes
    assert metrics["policy/kl"] == pytest.approx(0.0, abs=1e-6)  # fresh reference = current policy


# contract guards --------------------------------------------------------------------------------
def test_samples_and_config_are_validated() -> None:
    with pytest.raises(ValueError, match="log-probs"):
        StepSample(prompt=None, token_ids=[1, 2], rollout_logprobs=[0.0], policy_version=0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="no steps"):
        TrajectorySample("t", "task", "g", [], 0.0, False)
    config = RLConfig.from_run_config(
        "grpo", {"grpo": {"beta_kl": 0.0}, "seed": 3, "env": {"kind": "browser"}}
    )
    assert (config.algorithm, config.grpo.beta_kl, config.seed) == ("grpo", 0.0, 3)
    trainer = PolicyTrainer(tiny_model(0), config)
    assert trainer.reference is None  # β = 0 drops the reference model
    with pytest.raises(ValueError, match="unique"):
        batch = bandit_batch(EmbeddedPolicy(trainer.model, seed=1), 0, groups=1, n=2)
        trainer.update([batch[0], batch[0]])


# PPO here is a single pass (one epoch, one minibatch): the dropped rows were in its scoring graph
@pytest.mark.parametrize("config", [grpo_config(), ppo_config()], ids=["grpo", "ppo-single-pass"])
def test_trajectories_that_are_not_policy_samples_are_dropped_not_fatal(config: RLConfig) -> None:
    trainer = PolicyTrainer(tiny_model(0), config)
    batch = bandit_batch(EmbeddedPolicy(trainer.model, seed=1), 0, groups=1, n=4)
    eos = trainer.tokenizer.eos_id
    forbidden = replace(
        batch[0],
        trajectory_id="forbidden",
        steps=[replace(batch[0].steps[0], token_ids=[eos], rollout_logprobs=[0.0])],
    )
    alien = replace(
        batch[1],
        trajectory_id="alien",
        steps=[replace(batch[1].steps[0], token_ids=[10**6], rollout_logprobs=[-1.0])],
    )
    metrics = trainer.update([forbidden, *batch, alien])
    assert sorted(trainer.last_dropped) == ["alien", "forbidden"]
    assert set(trainer.last_step_stats) == {t.trajectory_id for t in batch}
    assert math.isfinite(metrics["policy/loss"])
    with pytest.raises(PolicyError, match="no trainable trajectory"):
        trainer.update([forbidden])


@pytest.mark.parametrize(
    "config",
    [ppo_config(), grpo_config(beta_kl=0.1), grpo_config(anchor_weight=1.0)],
    ids=["ppo", "grpo", "grpo-anchor"],
)
def test_update_metrics_are_canonical_dashboard_names(config: RLConfig) -> None:
    from rl_control.metric_names import metric_name_problem  # plain Python, no Django

    trainer = PolicyTrainer(tiny_model(0), config)
    batch = bandit_batch(EmbeddedPolicy(trainer.model, seed=1), 0)
    metrics = trainer.update(batch)
    if config.algorithm == "ppo":
        metrics.update(trainer.pretrain_value(batch))
        expected = {"value/loss", "value/explained_variance", "value/mean", "policy/clip_frac_low"}
    else:
        expected = {
            "policy/kl",
            "policy/steps_kept_frac",
            "policy/is_truncated_frac",
            "curation/no_signal_groups",
        }
        expected = (expected - {"policy/kl"}) if config.grpo.beta_kl == 0 else expected
        if config.grpo.anchor_weight:
            expected |= {"policy/anchor_steps_frac", "policy/anchor_groups"}
    assert expected | {"policy/entropy", "policy/is_weight_mean", "policy/is_weight_max"} <= set(metrics)
    assert {name: metric_name_problem(name) for name in metrics if metric_name_problem(name)} == {}
    assert all(math.isfinite(v) for v in metrics.values())


def test_steps_beyond_the_staleness_bound_carry_no_loss() -> None:
    """A long async rollout spans versions: its old steps are masked, its fresh ones trained."""
    config = grpo_config()
    assert config.curation.staleness_bound == 1
    trainer = PolicyTrainer(tiny_model(0), config)
    trainer.version = 5
    batch = two_step_batch(EmbeddedPolicy(trainer.model, seed=3), 5)
    # first step sampled at version 2 (3 behind: stale), second at version 5 (fresh)
    aged = [replace(t, steps=[replace(t.steps[0], policy_version=2), t.steps[1]]) for t in batch]
    metrics = trainer.update(aged)
    assert metrics["efficiency/stale_steps_frac"] == 0.5
    assert all(trainer.last_step_stats[t.trajectory_id][0]["kept"] is False for t in aged)
    assert any(trainer.last_step_stats[t.trajectory_id][1]["kept"] for t in aged)
