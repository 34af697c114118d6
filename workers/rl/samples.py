"""What the trainer trains on: one policy call (`StepSample`), one finished rollout
(`TrajectorySample`), built with the prompt exactly as inference builds it; and SFT examples from
stored successes (Entropulse). Plain Python + torch-free data; no Django."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from workers.envs.base import Element
from workers.policy.base import HistoryItem
from workers.policy.embedded.grammar import Grammar, GrammarError
from workers.policy.embedded.tokenizer import FlywheelTokenizer
from workers.policy.prompts import ChatInputs, EmbeddedInputs, build_embedded_prompt, format_elements


@dataclass
class StepSample:
    """One policy call of a rollout.

    prompt: the embedded prompt inputs (flat text + the screenshot bytes the policy saw), or for an
        HF vision-language policy the chat messages it was sent (`chat_step_sample_from`);
    token_ids: the sampled response tokens as the server returned them (normally ending in <eos>);
    rollout_logprobs: one log-prob per token, under the sampling distribution;
    policy_version: the policy version that sampled it; reward: per-step shaped reward (optional).
    """

    prompt: EmbeddedInputs | ChatInputs
    token_ids: list[int]
    rollout_logprobs: list[float]
    policy_version: int
    reward: float = 0.0

    def __post_init__(self) -> None:
        if not self.token_ids:
            raise ValueError("a step needs at least one response token")
        if len(self.token_ids) != len(self.rollout_logprobs):
            raise ValueError(
                f"{len(self.token_ids)} token ids but {len(self.rollout_logprobs)} rollout log-probs"
            )
        if not all(math.isfinite(x) for x in self.rollout_logprobs):
            raise ValueError("rollout log-probs must be finite")


@dataclass
class TrajectorySample:
    """One finished rollout: its steps in order, the trajectory reward and whether it succeeded.

    group_id: the GRPO group (normally the task and the policy version it was sampled under).
    """

    trajectory_id: str
    task_key: str
    group_id: str
    steps: list[StepSample]
    reward: float
    success: bool

    def __post_init__(self) -> None:
        if not self.steps:
            raise ValueError(f"trajectory {self.trajectory_id} has no steps")


def state_key(step: StepSample) -> str | None:
    """What the environment showed at this step, as a key that two steps share exactly when they
    acted on the same state: the embedded prompt up to its history (instruction and element list)
    and the screenshot's bytes, hashed. None (no state) for a chat prompt, whose messages mix the
    screen with the history. Used by the step-level credit of workers.rl.advantages.anchor_step_advantages."""
    prompt = step.prompt
    if not isinstance(prompt, EmbeddedInputs):
        return None
    cut = min((i for i in (prompt.text.find("\nSummary: "), prompt.text.find("\nHistory:")) if i >= 0),
              default=len(prompt.text))  # fmt: skip
    digest = hashlib.sha256(prompt.text[:cut].encode())
    digest.update(b"\0" + (prompt.image or b""))
    return digest.hexdigest()


def _elements_text(elements: str | Sequence[Element | dict[str, Any]]) -> str:
    if isinstance(elements, str):
        return elements
    items = [el if isinstance(el, Element) else Element(**el) for el in elements]
    return format_elements(items)


def step_sample_from(
    *,
    instruction: str,
    observation_image: bytes | None,
    elements: str | Sequence[Element | dict[str, Any]],
    history: Sequence[HistoryItem | str],
    token_ids: list[int],
    rollout_logprobs: list[float],
    policy_version: int,
    reward: float = 0.0,
    summary: str | None = None,
) -> StepSample:
    """Build a `StepSample` with the prompt exactly as `EmbeddedPolicy.propose` builds it.

    elements: the observation's elements (Element objects or their field dicts) or the already
        formatted element text; history: earlier steps (HistoryItem or their action strings).
    observation_image must be the bytes the policy read (for the policy server: the image in the
    request) or the recomputed log-probs differ slightly; the truncated IS weight absorbs that.
    """
    actions = [h if isinstance(h, str) else h.action for h in history]
    text = build_embedded_prompt(instruction, _elements_text(elements), actions, summary)
    return StepSample(
        prompt=EmbeddedInputs(text, observation_image),
        token_ids=list(token_ids),
        rollout_logprobs=[float(x) for x in rollout_logprobs],
        policy_version=int(policy_version),
        reward=float(reward),
    )


def chat_step_sample_from(
    *,
    profile: Any,
    instruction: str,
    screenshot: bytes,
    width: int,
    height: int,
    image_format: str,
    history: Sequence[HistoryItem],
    token_ids: list[int],
    rollout_logprobs: list[float],
    policy_version: int,
    reward: float = 0.0,
) -> StepSample:
    """A `StepSample` of an HF VLM rollout step with the chat messages exactly as the rollout sent
    them (workers.policy.openai_client.chat_messages with the run's profile: UI-TARS template,
    the last `profile.max_screenshots` screenshots, history as assistant turns)."""
    from workers.envs.base import Observation
    from workers.policy.openai_client import chat_messages

    observation = Observation(
        screenshot=screenshot, width=width, height=height, image_format=image_format,  # type: ignore[arg-type]
        instruction=instruction,
    )  # fmt: skip
    messages, _ = chat_messages(profile, observation, list(history), None)
    return StepSample(
        prompt=ChatInputs(messages),
        token_ids=list(token_ids),
        rollout_logprobs=[float(x) for x in rollout_logprobs],
        policy_version=int(policy_version),
        reward=float(reward),
    )


def sft_examples_from(
    trajectories: Iterable[TrajectorySample], tokenizer: FlywheelTokenizer, grammar: Grammar
) -> list[Any]:
    """SFT examples (workers.policy.sft.SFTExample) from stored successes: the step's prompt and its
    decoded response as target. A response whose text does not re-encode inside `grammar` (cut by
    the token limit, or digits sampled as several tokens that re-encode longer) is skipped."""
    from workers.policy.sft import SFTExample

    examples = []
    for traj in trajectories:
        for step in traj.steps:
            text = tokenizer.decode([t for t in step.token_ids if t != tokenizer.eos_id])
            try:
                grammar.encode_response(text)
            except GrammarError:
                continue
            examples.append(SFTExample(cast(EmbeddedInputs, step.prompt), text))  # an embedded policy's step
    return examples
