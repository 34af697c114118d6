"""Optional clean-up of a verbatim think-aloud into a first-person thought, via an OpenAI-compatible LLM.

Any server speaking `POST {base_url}/chat/completions` works (vLLM, llama.cpp server, OpenAI). The
verbatim words are always kept next to the refined text; the result says whether it was refined
and by which model. Transient failures (timeouts, connection errors, HTTP 429 and 5xx) are retried
with exponential backoff; anything else fails at once with RefineError.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

SYSTEM_PROMPT = (
    "You rewrite a person's spoken think-aloud, recorded while they operate a computer, into one clean "
    "first-person thought. Remove fillers, false starts and repetitions; fix grammar and punctuation. "
    "Do not add, drop or change any intention, object, name or number. Reply with the thought only."
)
_RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504})


class RefineError(RuntimeError):
    """The endpoint refused the request, answered nonsense, or kept failing after all retries."""


@dataclass(frozen=True)
class RefineConfig:
    """Where and how to call the chat endpoint."""

    base_url: str  # e.g. "http://127.0.0.1:8000/v1"
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
        self._sleep = sleep  # injectable so callers such as tests can observe the backoff schedule
        headers = {"Authorization": f"Bearer {config.api_key}"} if config.api_key else {}
        self._client = httpx.Client(
            base_url=config.base_url.rstrip("/"), headers=headers, timeout=config.timeout_s
        )

    def __enter__(self) -> Refiner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._client.close()

    def _post(self, payload: dict[str, Any]) -> Any:
        last_error = ""
        for attempt in range(self.config.max_retries + 1):
            if attempt:
                self._sleep(self.config.backoff_s * 2 ** (attempt - 1))
            try:
                response = self._client.post("/chat/completions", json=payload)
            except (httpx.TimeoutException, httpx.TransportError) as exc:
                last_error = f"{type(exc).__name__}: {exc}"
                continue
            if response.status_code in _RETRY_STATUS:
                last_error = f"HTTP {response.status_code}: {response.text[:200]}"
                continue
            if response.status_code >= 400:
                raise RefineError(f"HTTP {response.status_code}: {response.text[:200]}")
            try:
                return response.json()
            except ValueError as exc:
                raise RefineError(f"response is not JSON: {response.text[:200]}") from exc
        raise RefineError(f"gave up after {self.config.max_retries + 1} attempts: {last_error}")

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
