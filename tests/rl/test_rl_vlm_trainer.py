"""The engine's trainer on an HF vision-language policy (issue 23): the tiny Qwen2.5-VL built here,
rollout steps sampled by the policy server's HF backend through the same chat messages the engine
sends; LoRA GRPO and full-fine-tuning PPO updates, ratio 1 at version 0, rewarded responses gain
probability, exact resume, servable merged checkpoints. No Django, no mocks."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import torch
from PIL import Image

from workers.envs.base import Observation
from workers.policy.base import HistoryItem
from workers.policy.hf_vlm import profile_for
from workers.policy.hf_vlm.model import HFVLMPolicy
from workers.policy.hf_vlm.tiny import build_tiny_checkpoint
from workers.policy.openai_client import chat_messages
from workers.policy.server import PolicyService
from workers.rl.config import RLConfig
from workers.rl.samples import TrajectorySample, chat_step_sample_from
from workers.rl.trainer import resume_trainer, trainer_for
from workers.rl.trainer.vlm import VLMPolicyTrainer


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_checkpoint(tmp_path_factory.mktemp("vlm") / "v0", seed=0)


def _shot(color: tuple[int, int, int]) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (160, 210), color).save(out, "JPEG")
    return out.getvalue()


def _rollouts(tiny: Path, n: int = 4, steps: int = 2) -> list[TrajectorySample]:
    """Two-step rollouts sampled over the server protocol (PolicyService), prompts as the engine sends them."""
    profile = profile_for(tiny, max_tokens=10, max_screenshots=2)
    service = PolicyService(HFVLMPolicy.from_pretrained(tiny, seed=1), "tiny", str(tiny))
    out = []
    for t in range(n):
        history: list[HistoryItem] = []
        samples = []
        for s in range(steps):
            obs = Observation(
                screenshot=_shot((60 * t, 100 * s, 40)), width=160, height=210, instruction="click OK"
            )
            messages, _ = chat_messages(profile, obs, history, None)
            body = service.chat({"messages": messages, "logprobs": True, "return_tokens_as_token_ids": True,
                                 "max_tokens": 10, "temperature": 1.0})  # fmt: skip
            content = body["choices"][0]["logprobs"]["content"]
            ids = [int(c["token"].split(":")[1]) for c in content]
            samples.append(chat_step_sample_from(
                profile=profile, instruction="click OK", screenshot=obs.screenshot, width=160, height=210,
                image_format="jpeg", history=list(history), token_ids=ids,
                rollout_logprobs=[c["logprob"] for c in content], policy_version=0,
            ))  # fmt: skip
            history.append(HistoryItem("", body["choices"][0]["message"]["content"], obs.screenshot))
        out.append(TrajectorySample(str(t), "click", "g0", samples, float(t % 2), bool(t % 2)))
    return out


@pytest.mark.slow
def test_trainer_logprobs_equal_served_and_lora_grpo_learns(tiny: Path, tmp_path: Path) -> None:
    rollouts = _rollouts(tiny)
    config = RLConfig.model_validate(
        {"algorithm": "grpo", "grpo": {"lr": 5e-3, "entropy_keep_fraction": 1.0}}
    )
    trainer = trainer_for(tiny, config, seed=0, vlm={"lora_rank": 4, "lora_alpha": 8})
    assert isinstance(trainer, VLMPolicyTrainer)
    trainable = {n for n, p in trainer.model.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n and "language_model" in n for n in trainable)
    for traj in rollouts:
        for step, lps in zip(traj.steps, trainer.recompute_logprobs(traj.steps), strict=True):
            assert max(abs(a - b) for a, b in zip(lps, step.rollout_logprobs, strict=True)) <= 1e-4

    def traj_logprob() -> list[float]:
        return [sum(sum(lp) for lp in trainer.recompute_logprobs(t.steps)) for t in rollouts]

    before = traj_logprob()
    metrics: dict[str, float] = {}
    for _ in range(3):
        metrics = trainer.update(rollouts)
    assert trainer.version == 3 and metrics["policy/entropy"] > 0
    gains = [a - b for a, b in zip(traj_logprob(), before, strict=True)]
    rewarded = sum(g for g, t in zip(gains, rollouts, strict=True) if t.reward > 0)
    unrewarded = sum(g for g, t in zip(gains, rollouts, strict=True) if t.reward == 0)
    assert rewarded > 0 > unrewarded, gains
    # exact resume from the saved state: base weights + adapter + optimizer
    trainer.save(tmp_path / "u3", trainer.version)
    assert (tmp_path / "u3" / "adapter" / "adapter_config.json").is_file()
    resumed = resume_trainer(tmp_path / "u3", config)
    assert resumed.version == 3
    trainer.update(rollouts)
    resumed.update(rollouts)
    a = trainer.recompute_logprobs(rollouts[0].steps)[0]
    b = resumed.recompute_logprobs(rollouts[0].steps)[0]
    assert max(abs(x - y) for x, y in zip(a, b, strict=True)) <= 1e-5
    served = HFVLMPolicy.from_pretrained(tmp_path / "u3")
    assert served.model_version == "3"


@pytest.mark.slow
def test_full_fine_tuning_ppo_with_a_value_head(tiny: Path, tmp_path: Path) -> None:
    rollouts = _rollouts(tiny, n=2)
    config = RLConfig.model_validate({"algorithm": "ppo", "ppo": {"lr_policy": 1e-3, "lr_value": 1e-2}})
    trainer = trainer_for(tiny, config, seed=0, vlm={"lora_rank": 0})
    assert all(p.requires_grad for p in trainer.model.parameters())
    first = trainer.update(rollouts)
    assert first["policy/ratio_mean"] == pytest.approx(1.0, abs=1e-4)
    assert first["value/loss"] > 0 and trainer.value_head.weight.abs().sum() > 0
    vision_before = {k: v.clone() for k, v in trainer.model.state_dict().items() if "visual" in k}
    trainer.update(rollouts)
    assert any(not torch.equal(v, trainer.model.state_dict()[k]) for k, v in vision_before.items())
    trainer.save(tmp_path / "ppo", trainer.version)
    resumed = resume_trainer(tmp_path / "ppo", config)
    assert torch.equal(resumed.value_head.weight, trainer.value_head.weight)


def test_vlm_trainer_refuses_the_embedded_only_thought_temperature(tiny: Path) -> None:
    config = RLConfig.model_validate({"algorithm": "grpo", "grpo": {"thought_temperature": 0.1}})
    with pytest.raises(ValueError, match=r"grpo\.thought_temperature: not available for HF VLM"):
        trainer_for(tiny, config)


def test_entropulse_phase_trains_the_sampled_tokens_of_successes_under_lora(tiny: Path) -> None:
    successes = [t for t in _rollouts(tiny, n=2, steps=1) if t.success] * 2
    config = RLConfig.model_validate({"algorithm": "grpo"})
    trainer = trainer_for(tiny, config, seed=0, vlm={"lora_rank": 4})
    steps = [s for t in successes for s in t.steps]
    before = sum(sum(lps) for lps in trainer.recompute_logprobs(steps))
    figures = trainer.entropulse(successes, steps=6, lr=5e-3, batch_size=2)
    after = sum(sum(lps) for lps in trainer.recompute_logprobs(steps))
    assert figures["examples"] == len(steps) and figures["steps"] == 6
    assert after > before and trainer.entropulse_count == 1
    assert trainer.reference is not None  # reset to the SFT'd policy
    assert all("lora_" in n for n, p in trainer.model.named_parameters() if p.requires_grad)
