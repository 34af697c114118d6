"""Optional clean-up of a verbatim think-aloud into a first-person thought, via an OpenAI-compatible LLM.

Any server speaking `POST /v1/chat/completions` works (vLLM, llama.cpp server, OpenAI); the call goes
through the platform's one OpenAI-compatible client (`workers.policy.openai_client.OpenAIClient`).
The verbatim words are always kept next to the refined text; the result says whether it was refined
and by which model. Transient failures (timeouts, connection errors, HTTP 429 and 5xx) are retried
with exponential backoff; anything else fails at once with RefineError.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from workers.policy.base import PolicyError
from workers.policy.openai_client import OpenAIClient, OpenAIUnavailable

SYSTEM_PROMPT = (
    "You rewrite a person's spoken think-aloud, recorded while they operate a computer, into one clean "
    "first-person thought. Remove fillers, false starts and repetitions; fix grammar and punctuation. "
    "Do not add, drop or change any intention, object, name or number. Reply with the thought only."
)


class RefineError(RuntimeError):
    """The endpoint refused the request, answered nonsense, or kept failing after all retries."""


@dataclass(frozen=True)
class RefineConfig:
    """Where and how to call the chat endpoint."""

    base_url: str  # e.g. "http://127.0.0.1:8000/v1" (or the server root)
    model: str
    api_key: str | None = None
    timeout_s: float = 20.0  # per attempt
    max_retries: int = 3  # extra attempts after the first, for transient failures only
    backoff_s: float = 0.5  # wait before retry k is backoff_s * 2**k
    temperature: float = 0.0  # deterministic: a thought is rewritten, not invented


@dataclass(frozen=True)
class Thought:
    """A step's thought: verbatim ASR text, the text to use, and its provenance."""

    verbatim: str
    text: str
    refined: bool
    model: str | None = None
    error: str | None = None  # why refinement was skipped, when it failed


def build_messages(verbatim: str, context: str | None = None) -> list[dict[str, str]]:
    """Chat messages for one refinement; `context` (e.g. the task instruction) helps the model."""
    user = f"Task: {context}\nThink-aloud: {verbatim}" if context else f"Think-aloud: {verbatim}"
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


def parse_reply(body: Any) -> str:
    """The assistant text of a chat-completions response body; RefineError when it has none."""
    try:
        content = body["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError) as exc:
        raise RefineError(f"response has no choices[0].message.content: {str(body)[:200]}") from exc
    if not isinstance(content, str) or not content.strip():
        raise RefineError("endpoint returned an empty thought")
    return content.strip()


class Refiner:
    """Calls the endpoint; one instance holds one HTTP connection pool (close it, or use `with`)."""

    def __init__(self, config: RefineConfig, *, sleep: Callable[[float], None] = time.sleep) -> None:
        self.config = config
        self._client = OpenAIClient(
            config.base_url, api_key=config.api_key, timeout_s=config.timeout_s,
            max_retries=config.max_retries, backoff_s=config.backoff_s, max_backoff_s=float("inf"), sleep=sleep,
        )  # fmt: skip

    def __enter__(self) -> Refiner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._client.close()

    def _post(self, payload: dict[str, Any]) -> Any:
        try:
            response, _ = self._client.request("POST", "/v1/chat/completions", payload)
        except OpenAIUnavailable as exc:
            raise RefineError(f"gave up after {exc.attempts} attempts: {exc.last}") from exc
        except PolicyError as exc:
            raise RefineError(str(exc)) from exc
        try:
            return response.json()
        except ValueError as exc:
            raise RefineError(f"response is not JSON: {response.text[:200]}") from exc

    def refine(self, verbatim: str, *, context: str | None = None) -> Thought:
        """Refine one verbatim text; an empty one is returned as is without a call.

        Raises RefineError when the endpoint fails (see module docstring).
        """
        if not verbatim.strip():
            return Thought(verbatim=verbatim, text=verbatim, refined=False)
        payload = {
            "model": self.config.model,
            "messages": build_messages(verbatim, context),
            "temperature": self.config.temperature,
        }
        text = parse_reply(self._post(payload))
        return Thought(verbatim=verbatim, text=text, refined=True, model=self.config.model)

    def refine_or_verbatim(self, verbatim: str, *, context: str | None = None) -> Thought:
        """Like `refine`, but a failure yields the verbatim text, unrefined, with the error kept."""
        try:
            return self.refine(verbatim, context=context)
        except RefineError as exc:
            return Thought(verbatim=verbatim, text=verbatim, refined=False, error=str(exc))
