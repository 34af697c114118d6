"""The policy interface (SPEC §7): a policy proposes N candidate responses for an observation.

Context handling follows seed 000 §2.5.2: every history step's text (thought + action) is kept,
screenshots only for the last `max_screenshots` steps (default 5), plus an optional episodic summary
string for long episodes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from workers.actions.types import Convention, ParsedResponse
from workers.envs.base import Observation, TaskSpec

DEFAULT_MAX_SCREENSHOTS = 5


class PolicyError(RuntimeError):
    """A policy could not produce candidates (server down, bad checkpoint, bad request)."""


@dataclass(frozen=True)
class Candidate:
    """One proposed response.

    `parsed` comes from the action grammar (its `error` is set for malformed text, never raised);
    `logprob_sum` / `token_logprobs` are under the sampling distribution (None if the server gave
    none); coordinates inside `parsed` are raw model coordinates in `convention`, relative to an
    image of `image_size` (width, height) pixels.
    """

    thought: str
    action_text: str
    parsed: ParsedResponse
    logprob_sum: float | None
    token_logprobs: list[float] | None
    model_version: str
    raw_text: str
    convention: Convention = Convention.SCREEN
    image_size: tuple[int, int] | None = None
    token_ids: list[int] | None = None
    value: float | None = None


@dataclass(frozen=True)
class HistoryItem:
    """One earlier step as the policy saw and answered it."""

    thought: str
    action: str
    screenshot: bytes | None = None
    image_format: str = "jpeg"

    @property
    def text(self) -> str:
        return f"Thought: {self.thought}\nAction: {self.action}"


@dataclass(frozen=True)
class ContextStep:
    """A history step as it enters the prompt: its text always, its screenshot only if recent."""

    item: HistoryItem
    with_screenshot: bool


def select_context(
    history: list[HistoryItem], max_screenshots: int = DEFAULT_MAX_SCREENSHOTS
) -> list[ContextStep]:
    """All steps' text; screenshots for the last `max_screenshots - 1` steps (the current
    observation's screenshot is the K-th), so a prompt never carries more than K images."""
    if max_screenshots < 1:
        raise ValueError("max_screenshots must be >= 1 (the current screenshot)")
    first_with_image = len(history) - (max_screenshots - 1)
    return [
        ContextStep(item, with_screenshot=i >= first_with_image and item.screenshot is not None)
        for i, item in enumerate(history)
    ]


def instruction_of(observation: Observation, task: TaskSpec | None) -> str:
    """The observation's instruction wins: environments that generate it per episode (MiniWoB++)
    put the real one there, while the stored task only holds a placeholder; desktop and terminal
    observations carry the task's own instruction. Otherwise the task's."""
    if observation.instruction:
        return observation.instruction
    return task.instruction if task is not None else ""


def split_response(text: str) -> tuple[str, str]:
    """`Thought: t\\nAction: a` -> (t, a); text without an `Action:` marker is all action."""
    body = text.strip()
    thought, marker, action = body.partition("Action:")
    if not marker:
        return "", body
    thought = thought.strip()
    if thought.startswith("Thought:"):
        thought = thought[len("Thought:") :].strip()
    return thought, action.strip()


def parse_text(text: str, convention: Convention) -> ParsedResponse:
    """Parse through the shared action grammar; `convention` decides which coordinates are valid."""
    from workers.actions.parse import parse_response

    return parse_response(text, convention=convention)


@runtime_checkable
class Policy(Protocol):
    """Anything that proposes candidates: `OpenAIPolicy` (any vLLM-compatible server) or
    `EmbeddedPolicy` (the in-process torch model)."""

    def propose(
        self,
        observation: Observation,
        history: list[HistoryItem],
        task: TaskSpec | None = None,
        n: int = 4,
        temperature: float = 1.0,
    ) -> list[Candidate]: ...
