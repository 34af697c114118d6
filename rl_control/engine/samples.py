"""The trainer's view of stored trajectories: a Trajectory's steps rebuilt into a TrajectorySample (prompts
from the stored observations, the sampled tokens) and its outcome for the curator. Used by the learner's
updates and by Entropulse's SFT phases."""

from __future__ import annotations

import logging
from typing import Any

from django.core.files.storage import default_storage

from webapp.store.models import Trajectory
from workers.policy.base import HistoryItem
from workers.policy.embedded.grammar import Grammar, GrammarError
from workers.policy.openai_client import ModelProfile
from workers.rl.curator import RolloutOutcome
from workers.rl.samples import TrajectorySample, chat_step_sample_from, step_sample_from

log = logging.getLogger(__name__)


def _image_format(name: str) -> str:
    return "png" if name.lower().endswith(".png") else "jpeg"


def _read(name: str) -> bytes | None:
    if not name:
        return None
    with default_storage.open(name, "rb") as fh:
        return fh.read()


def trajectory_sample(
    trajectory: Trajectory, group_id: str, *, sample_id: str | None = None, grammar: Grammar | None = None,
    profile: ModelProfile | None = None,
) -> TrajectorySample | None:  # fmt: skip
    """The trainer's view of a stored trajectory: every step's prompt rebuilt from its stored
    observation (instruction, elements, screenshot) and the earlier actions; None without tokens.
    With a chat `profile` (an HF VLM run, rollout.run_profile) the prompt is the chat the rollout
    sent: the UI-TARS template, earlier thoughts and actions as turns, the last screenshots.

    Rollout steps carry the sampled token ids and log-probs. Given a `grammar`, steps written by a
    person or a scripted expert (thought + action text, no tokens) are encoded with it instead,
    with zero log-probs: the caller recomputes them (experience-pool injection)."""
    steps = []
    history: list[str] = []
    chat_history: list[HistoryItem] = []
    for step in trajectory.steps.order_by("index"):
        rl = step.rl or {}
        token_ids: Any = rl.get("token_ids")  # JSON from the rollout: lists, or absent
        logprobs: Any = rl.get("logprobs")
        if (
            not token_ids
            and grammar is not None
            and step.action_text
            and isinstance(rl.get("elements"), list)
        ):
            try:
                token_ids = grammar.encode_response(f"Thought: {step.thought}\nAction: {step.action_text}")
            except GrammarError:
                return None  # the model cannot write this step: the trajectory cannot be trained on
            logprobs = [0.0] * len(token_ids)
        if token_ids and profile is not None:
            shot = _read(step.screenshot.name)
            steps.append(
                chat_step_sample_from(
                    profile=profile,
                    instruction=rl.get("instruction") or trajectory.task.instruction,
                    screenshot=shot or b"",
                    width=step.screen_width,
                    height=step.screen_height,
                    image_format=_image_format(step.screenshot.name),
                    history=list(chat_history),
                    token_ids=token_ids,
                    rollout_logprobs=logprobs,
                    policy_version=int(rl.get("version", 0)),
                )
            )
        elif token_ids:
            steps.append(
                step_sample_from(
                    instruction=rl.get("instruction") or trajectory.episode_instruction,
                    observation_image=_read(step.screenshot.name),
                    elements=rl.get("elements", []),
                    history=list(history),
                    token_ids=token_ids,
                    rollout_logprobs=logprobs,
                    policy_version=int(rl.get("version", 0)),
                )
            )
        history.append(step.action_text)
        if profile is not None:
            # as the rollout: history screenshots only with context > 1 (chat_messages keeps the last K-1)
            chat_history.append(HistoryItem(
                thought=step.thought, action=step.action_text,
                screenshot=_read(step.screenshot.name) if profile.max_screenshots > 1 else None,
                image_format=_image_format(step.screenshot.name),
            ))  # fmt: skip
    if not steps:
        return None
    engine = trajectory.metadata.get("engine", {})
    if engine.get("reward"):
        reward = float(engine["reward"].get("total", trajectory.final_reward or 0.0))
    elif trajectory.final_reward is not None:
        reward = float(trajectory.final_reward)
    else:  # validated by a person or a judge, no verifier reward
        reward = 1.0 if trajectory.validation == 1 else 0.0
    success = bool(engine.get("success")) if "success" in engine else trajectory.validation == 1 or reward > 0
    return TrajectorySample(
        trajectory_id=sample_id or str(trajectory.pk), task_key=trajectory.task.external_id,
        group_id=group_id, steps=steps, reward=reward, success=success,
    )  # fmt: skip


def rollout_outcome(t: Trajectory) -> RolloutOutcome:
    engine = t.metadata.get("engine", {})
    reward = float((engine.get("reward") or {}).get("total", t.final_reward or 0.0))
    version = engine.get("max_version")  # step-level staleness: see RolloutOutcome
    return RolloutOutcome(str(t.pk), reward, int(engine.get("steps") or t.num_steps), int(version or 0))
