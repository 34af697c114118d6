"""A client for OpenAI-compatible chat servers (vLLM, or our own policy server) and `OpenAIPolicy`.

Retries (tenacity): connect/read errors, 429 and 5xx are retried with exponential backoff
(`backoff_s · 2^k`, or the server's Retry-After when given, capped at `max_backoff_s`); any other
4xx raises `OpenAIHTTPError` at once with the server's own message.
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from PIL import Image
from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from workers.actions.types import Convention
from workers.envs.base import Observation, TaskSpec
from workers.policy.base import (
    DEFAULT_MAX_SCREENSHOTS,
    Candidate,
    HistoryItem,
    PolicyError,
    instruction_of,
    parse_text,
    select_context,
    split_response,
)
from workers.policy.prompts import ELEMENTS_HEADER, SUMMARY_HEADER, data_url, format_elements, render_template

RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})


class OpenAIHTTPError(PolicyError):
    """The server answered with an error status; `message` is the server's own explanation."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.message = message


class OpenAIUnavailable(PolicyError):
    """Transient failures (connection, timeouts, 429/5xx) persisted through every retry; `last`
    is the last one, `attempts` how many were made."""

    def __init__(self, message: str, *, last: str, attempts: int) -> None:
        super().__init__(message)
        self.last = last
        self.attempts = attempts


class _Transient(Exception):
    """One failed attempt worth retrying; `retry_after` is the server's Retry-After header."""

    def __init__(self, message: str, retry_after: str | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


@dataclass(frozen=True)
class ChatResult:
    """A chat completion's JSON and the model version the server reported (header or body)."""

    body: dict[str, Any]
    model_version: str
    attempts: int


def server_root(base_url: str) -> str:
    """The server root of an OpenAI-style base URL: settings and checkpoints name `…/v1` (as vLLM
    documents it) or the root; the client adds `/v1/...` itself."""
    return base_url.rstrip("/").removesuffix("/v1")


def _server_message(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:500] or response.reason_phrase
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and "message" in error:
        return str(error["message"])
    if isinstance(error, str):
        return error
    return str(body)[:500]


def _body(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return {"message": response.text[:500]}
    return body if isinstance(body, dict) else {"message": str(body)[:500]}


class OpenAIClient:
    """Thin synchronous client; one `httpx.Client` (connection pooling) per instance. `base_url` is
    the server root or its `/v1` URL."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        timeout_s: float = 60.0,
        max_retries: int = 3,
        backoff_s: float = 0.5,
        max_backoff_s: float = 8.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.http = httpx.Client(base_url=server_root(base_url), headers=headers, timeout=timeout_s)
        self.max_retries = max_retries
        self.max_backoff_s = max_backoff_s
        self._backoff = wait_exponential(multiplier=backoff_s, max=max_backoff_s)
        self._sleep = sleep  # injectable so callers such as tests can observe the backoff schedule

    def close(self) -> None:
        self.http.close()

    def request(
        self, method: str, path: str, body: dict[str, Any] | None = None
    ) -> tuple[httpx.Response, int]:
        """Send with retries; returns the successful response and how many attempts it took."""
        retrying = Retrying(
            stop=stop_after_attempt(self.max_retries + 1),
            wait=self._delay,
            retry=retry_if_exception_type(_Transient),
            sleep=self._sleep,
            reraise=True,
        )
        try:
            for attempt in retrying:  # ends after the first success; raises the last failure
                with attempt:
                    response = self._send(method, path, body)
        except _Transient as exc:
            raise OpenAIUnavailable(
                f"{method} {path} failed after {self.max_retries + 1} attempts: {exc}",
                last=str(exc), attempts=self.max_retries + 1,
            ) from exc  # fmt: skip
        return response, attempt.retry_state.attempt_number

    def _send(self, method: str, path: str, body: dict[str, Any] | None) -> httpx.Response:
        """One attempt: the response, `_Transient` to retry, `OpenAIHTTPError` to stop."""
        try:
            response = self.http.request(method, path, json=body)
        except (httpx.TransportError, httpx.TimeoutException) as exc:
            raise _Transient(f"{type(exc).__name__}: {exc}") from exc
        if response.status_code < 400:
            return response
        if response.status_code not in RETRY_STATUSES:
            raise OpenAIHTTPError(response.status_code, _server_message(response))
        message = f"HTTP {response.status_code}: {_server_message(response)}"
        raise _Transient(message, response.headers.get("Retry-After"))

    def _delay(self, state: RetryCallState) -> float:
        """The server's Retry-After when it gave one (capped), else exponential backoff."""
        failure = state.outcome.exception() if state.outcome is not None else None
        retry_after = failure.retry_after if isinstance(failure, _Transient) else None
        if retry_after is not None:
            try:
                return min(float(retry_after), self.max_backoff_s)
            except ValueError:
                pass
        return float(self._backoff(state))

    def models(self) -> list[dict[str, Any]]:
        response, _ = self.request("GET", "/v1/models")
        return list(response.json().get("data", []))

    def load_weights(self, path: str, version: str | None = None) -> dict[str, Any]:
        """Our server's hot swap (vLLM builds expose other endpoints for this); the client's api_key
        must be the server's weights secret. `version`: the label the weights are served under."""
        body: dict[str, Any] = {"path": path}
        if version is not None:
            body["version"] = version
        response, _ = self.request("POST", "/v1/load_weights", body)
        return dict(response.json())

    def load_lora_adapter(self, name: str, path: str) -> dict[str, Any]:
        """vLLM's runtime LoRA load (`VLLM_ALLOW_RUNTIME_LORA_UPDATING=True`, `--enable-lora`), which
        our server speaks too: the adapter at `path` is served as model `name`. vLLM answers plain
        text, our server JSON; either comes back as a dict (`message` for text)."""
        response, _ = self.request("POST", "/v1/load_lora_adapter", {"lora_name": name, "lora_path": path})
        return _body(response)

    def unload_lora_adapter(self, name: str) -> dict[str, Any]:
        response, _ = self.request("POST", "/v1/unload_lora_adapter", {"lora_name": name})
        return _body(response)

    def chat(
        self,
        messages: list[dict[str, Any]],
        model: str,
        n: int = 1,
        temperature: float = 1.0,
        max_tokens: int | None = None,
        logprobs: bool = True,
        top_logprobs: int | None = None,
        **extra: Any,
    ) -> ChatResult:
        body: dict[str, Any] = {"model": model, "messages": messages, "n": n, "temperature": temperature}
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        if logprobs:
            body["logprobs"] = True
            if top_logprobs:
                body["top_logprobs"] = top_logprobs
        body.update(extra)
        response, attempts = self.request("POST", "/v1/chat/completions", body)
        try:
            payload = response.json()
        except ValueError as exc:
            raise PolicyError(f"server returned non-JSON: {response.text[:200]!r}") from exc
        if not isinstance(payload, dict) or not isinstance(payload.get("choices"), list):
            raise PolicyError(f"server reply has no choices: {str(payload)[:200]}")
        version = (
            response.headers.get("X-Model-Version")
            or payload.get("model_version")
            or payload.get("system_fingerprint")
            or str(payload.get("model", ""))
        )
        return ChatResult(payload, str(version), attempts)


@dataclass(frozen=True)
class ModelProfile:
    """How to talk to one model: prompt kind, coordinate convention, image resizing, extras.

    - convention: how the model writes coordinates (UI-TARS 1.5: ABSOLUTE_RESIZED; 1.0: RELATIVE_1000;
      the embedded model: SCREEN)
    - smart_resize: send the screenshot resized by Qwen2.5-VL's smart_resize (the model then answers
      in that image's pixels); otherwise the original image is sent
    - include_elements: add the "Elements:" text part (required by the embedded model)
    - max_pixels: smart_resize's pixel cap, the checkpoint's image processor's (UI-TARS-1.5:
      16384·28·28; the tiny HF VLM: workers.policy.hf_vlm.tiny.TINY_MAX_PIXELS)
    - ranks: the server gives the greedy answer and the n most probable ones in one request
      (`use_beam_search` with this platform's `greedy_first`; the embedded model's policy server)
    """

    prompt: str = "computer"
    convention: Convention = Convention.ABSOLUTE_RESIZED
    smart_resize: bool = True
    include_elements: bool = False
    language: str = "English"
    max_screenshots: int = DEFAULT_MAX_SCREENSHOTS
    max_pixels: int | None = None
    max_tokens: int | None = 512
    top_logprobs: int | None = None
    extra_body: dict[str, Any] = field(default_factory=dict)
    ranks: bool = False  # the server answers `use_beam_search` + `greedy_first` (our policy server)


UI_TARS_15 = ModelProfile()
EMBEDDED = ModelProfile(
    convention=Convention.SCREEN,
    smart_resize=False,
    include_elements=True,
    # the embedded model reads the current screenshot only (prompts.embedded_prompt_from_messages):
    # earlier ones would be encoded, sent and decoded for nothing
    max_screenshots=1,
    max_tokens=None,
    extra_body={"return_tokens_as_token_ids": True},
    ranks=True,
)


def _resize(
    image: bytes, width: int, height: int, image_format: str, max_pixels: int | None = None
) -> tuple[bytes, tuple[int, int]]:
    """The screenshot as the model sees it after smart_resize, and that size (width, height)."""
    from workers.actions.coords import MAX_PIXELS, smart_resize

    new_h, new_w = smart_resize(height, width, max_pixels=max_pixels or MAX_PIXELS)
    if (new_w, new_h) == (width, height):
        return image, (width, height)
    img = Image.open(io.BytesIO(image)).convert("RGB").resize((new_w, new_h), Image.Resampling.BICUBIC)
    out = io.BytesIO()
    img.save(out, format="PNG" if image_format == "png" else "JPEG", quality=90)
    return out.getvalue(), (new_w, new_h)


def _image(
    profile: ModelProfile, image: bytes, width: int, height: int, image_format: str
) -> tuple[str, tuple[int, int]]:
    if profile.smart_resize:
        image, size = _resize(image, width, height, image_format, profile.max_pixels)
    else:
        size = (width, height)
    return data_url(image, image_format), size


def chat_messages(
    profile: ModelProfile,
    observation: Observation,
    history: list[HistoryItem],
    task: TaskSpec | None,
    summary: str | None = None,
) -> tuple[list[dict[str, Any]], tuple[int, int]]:
    """Chat messages in the UI-TARS layout (see prompts.py) and the image size the model sees; the RL
    trainer rebuilds a stored step's prompt with this same function (workers.rl.samples)."""
    system = render_template(profile.prompt, instruction_of(observation, task), profile.language)
    if summary:
        system = f"{system.rstrip()}\n{SUMMARY_HEADER}{summary}\n"
    messages: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": system}]}]
    w, h = observation.width, observation.height
    for step in select_context(history, profile.max_screenshots):
        if step.with_screenshot and step.item.screenshot is not None:
            url, _ = _image(profile, step.item.screenshot, w, h, step.item.image_format)
            messages.append({"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}]})
        messages.append({"role": "assistant", "content": step.item.text})
    url, size = _image(profile, observation.screenshot, w, h, observation.image_format)
    current: list[dict[str, Any]] = [{"type": "image_url", "image_url": {"url": url}}]
    if profile.include_elements:
        current.append({"type": "text", "text": ELEMENTS_HEADER + format_elements(observation.elements)})
    messages.append({"role": "user", "content": current})
    return messages, size


class OpenAIPolicy:
    """`Policy` over any OpenAI-compatible server."""

    def __init__(
        self,
        base_url: str,
        model: str,
        profile: ModelProfile = UI_TARS_15,
        client: OpenAIClient | None = None,
        summary: str | None = None,
        api_key: str | None = None,
    ) -> None:
        """`api_key`: the server's key (sent as a bearer token; our server and vLLM's `--api-key`)."""
        self.client = client or OpenAIClient(base_url, api_key=api_key)
        self.model = model
        self.profile = profile
        self.summary = summary

    def build_messages(
        self, observation: Observation, history: list[HistoryItem], task: TaskSpec | None
    ) -> tuple[list[dict[str, Any]], tuple[int, int]]:
        """Chat messages in the UI-TARS layout (see prompts.py) and the image size the model sees."""
        return chat_messages(self.profile, observation, history, task, self.summary)

    def propose(
        self,
        observation: Observation,
        history: list[HistoryItem],
        task: TaskSpec | None = None,
        n: int = 4,
        temperature: float = 1.0,
        thought_temperature: float | None = None,
    ) -> list[Candidate]:
        """`thought_temperature` is sent as an extra body field only when given (the embedded policy
        server reads it; see workers.policy.server)."""
        messages, size = self.build_messages(observation, history, task)
        extra = dict(self.profile.extra_body)
        if thought_temperature is not None:
            extra["thought_temperature"] = thought_temperature
        result = self.client.chat(
            messages,
            self.model,
            n=n,
            temperature=temperature,
            max_tokens=self.profile.max_tokens,
            logprobs=True,
            top_logprobs=self.profile.top_logprobs,
            **extra,
        )
        return [self._candidate(choice, result.model_version, size) for choice in result.body["choices"]]

    @property
    def ranks(self) -> bool:
        return self.profile.ranks

    def propose_ranked(
        self,
        observation: Observation,
        history: list[HistoryItem],
        task: TaskSpec | None = None,
        width: int = 8,
    ) -> tuple[Candidate, list[Candidate]]:
        """The greedy candidate and the `width` most probable ones, best first, from one request
        (only to a server whose profile `ranks`)."""
        messages, size = self.build_messages(observation, history, task)
        result = self.client.chat(
            messages, self.model, n=width, temperature=0.0, max_tokens=self.profile.max_tokens, logprobs=True,
            **{**self.profile.extra_body, "use_beam_search": True, "greedy_first": True},
        )  # fmt: skip
        choices = [self._candidate(c, result.model_version, size) for c in result.body["choices"]]
        if not choices:
            raise PolicyError("the server answered no choices")
        return choices[0], choices[1:]

    def _candidate(self, choice: dict[str, Any], version: str, size: tuple[int, int]) -> Candidate:
        message = choice.get("message") or {}
        text = str(message.get("content") or "")
        thought, action = split_response(text)
        logprobs = choice.get("logprobs") or {}
        content = logprobs.get("content") if isinstance(logprobs, dict) else None
        token_logprobs = [float(t["logprob"]) for t in content] if content else None
        # vLLM's `return_tokens_as_token_ids` reports tokens as "token_id:N": keep the ids for RL.
        token_ids = None
        if content and all(str(t.get("token", "")).startswith("token_id:") for t in content):
            token_ids = [int(str(t["token"]).split(":", 1)[1]) for t in content]
        return Candidate(
            thought=thought,
            action_text=action,
            parsed=parse_text(text, self.profile.convention),
            logprob_sum=sum(token_logprobs) if token_logprobs is not None else None,
            token_logprobs=token_logprobs,
            model_version=version,
            raw_text=text,
            convention=self.profile.convention,
            image_size=size,
            token_ids=token_ids,
        )
