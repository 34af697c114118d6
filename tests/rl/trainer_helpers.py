"""Shared pieces of the trainer tests: a tiny embedded model, a one-screen bandit, samplers.

The bandit: one observation with two buttons; a response is rewarded when its action is a point
call (click / left_double / right_single / hover). Under a fresh model about 4 of the 11 call names
are drawn, so groups of 8 carry signal. Sampling uses the real `EmbeddedPolicy` (grammar-constrained
decoding), exactly as rollouts do.
"""

from __future__ import annotations

import io

import pytest
import torch
from PIL import Image

from workers.envs.base import Element, Observation
from workers.policy.base import Candidate, HistoryItem
from workers.policy.embedded.configuration import FlywheelPolicyConfig
from workers.policy.embedded.generation import constrained_logp
from workers.policy.embedded.grammar import NAME
from workers.policy.embedded.modeling import FlywheelPolicyModel
from workers.policy.embedded.policy import EmbeddedPolicy, new_model
from workers.policy.embedded.tokenizer import CALL_PREFIXES
from workers.rl.config import GRPOConfig, PPOConfig, RLConfig
from workers.rl.samples import StepSample, TrajectorySample, step_sample_from

POINT_PREFIXES = tuple(
    p for p in CALL_PREFIXES if p.split("(")[0] in ("click", "left_double", "right_single", "hover")
)


COLOURS = ((0, 100, 200), (230, 40, 40), (40, 200, 40))


def tiny_config() -> FlywheelPolicyConfig:
    return FlywheelPolicyConfig(
        d_model=32,
        n_layers=1,
        n_heads=2,
        d_ff=64,
        max_positions=256,
        image_width=16,
        image_height=16,
        patch_size=8,
        max_thought=3,
        max_text=3,
        max_prompt_tokens=160,
    )


def tiny_model(seed: int = 0) -> FlywheelPolicyModel:
    return new_model(tiny_config(), seed=seed)


def png(color: tuple[int, int, int], size: tuple[int, int] = (64, 40)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, color).save(out, format="PNG")
    return out.getvalue()


def observation(color: tuple[int, int, int] = (200, 30, 30)) -> Observation:
    return Observation(
        screenshot=png(color),
        width=64,
        height=40,
        image_format="png",
        instruction="Click the OK button.",
        elements=(
            Element(0, "button", "OK", 4, 4, 20, 10),
            Element(1, "button", "Cancel", 30, 4, 24, 10),
        ),
    )


def is_point_call(candidate: Candidate) -> bool:
    return candidate.action_text.startswith(tuple(p.split("(")[0] + "(" for p in POINT_PREFIXES))


def sample_steps(
    policy: EmbeddedPolicy,
    obs: Observation,
    history: list[HistoryItem],
    n: int,
    version: int,
) -> list[tuple[Candidate, StepSample]]:
    """n candidates for one observation and the StepSamples the engine would store for them."""
    out = []
    for c in policy.propose(obs, history, n=n, temperature=1.0):
        assert c.token_ids is not None and c.token_logprobs is not None
        step = step_sample_from(
            instruction=obs.instruction,
            observation_image=obs.screenshot,
            elements=obs.elements,
            history=history,
            token_ids=c.token_ids,
            rollout_logprobs=c.token_logprobs,
            policy_version=version,
        )
        out.append((c, step))
    return out


def bandit_batch(
    policy: EmbeddedPolicy, version: int, groups: int = 2, n: int = 8, tag: str = ""
) -> list[TrajectorySample]:
    """`groups` tasks × n one-step trajectories; reward 1 for a point call."""
    trajectories = []
    for g in range(groups):
        obs = observation(COLOURS[g % len(COLOURS)])
        for i, (cand, step) in enumerate(sample_steps(policy, obs, [], n, version)):
            reward = 1.0 if is_point_call(cand) else 0.0
            trajectories.append(
                TrajectorySample(
                    f"{tag}v{version}-g{g}-{i}", f"task{g}", f"task{g}@{version}", [step], reward, reward > 0
                )
            )
    return trajectories


def two_step_batch(policy: EmbeddedPolicy, version: int, n: int = 4) -> list[TrajectorySample]:
    """n two-step trajectories of one task: the second step's prompt carries the first action."""
    obs = observation()
    first = sample_steps(policy, obs, [], n, version)
    trajectories = []
    for i, (cand, step) in enumerate(first):
        history = [HistoryItem(cand.thought, cand.action_text)]
        cand2, step2 = sample_steps(policy, obs, history, 1, version)[0]
        step2.reward = -0.1 if cand2.action_text == cand.action_text else 0.0
        reward = float(is_point_call(cand2))
        trajectories.append(
            TrajectorySample(f"t{version}-{i}", "task", f"task@{version}", [step, step2], reward, reward > 0)
        )
    return trajectories


@torch.no_grad()
def point_call_probability(model: FlywheelPolicyModel, policy: EmbeddedPolicy, obs: Observation) -> float:
    """Exact probability that the call name after an empty thought is a point call."""
    grammar = policy.grammar
    batch = policy.batch([policy.inputs_for(obs, [], None)])
    response = torch.tensor([[grammar.tok.bos_id, grammar.thought_id, grammar.action_id]])
    logp, _ = model(batch.pixel_values, batch.prompt_ids, batch.prompt_mask, response)
    lp = constrained_logp(logp[:, -1], grammar.masks[NAME][None], 1.0)[0]
    ids = [grammar.tok.literal_ids[p] for p in POINT_PREFIXES]
    return float(lp[ids].exp().sum())


@pytest.fixture(autouse=True)
def one_thread():
    """2 shared cores: one intra-op thread is faster than two contending ones and deterministic."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def grpo_config(**kw) -> RLConfig:
    return RLConfig(
        algorithm="grpo", grpo=GRPOConfig(**{"lr": 3e-3, "beta_kl": 0.0, "minibatch_size": 16, **kw})
    )


def ppo_config(**kw) -> RLConfig:
    base = {"lr_policy": 3e-3, "lr_value": 1e-2, "lambda_policy": 1.0, "minibatch_size": 16}
    return RLConfig(algorithm="ppo", ppo=PPOConfig(**{**base, **kw}))
