"""The HTTP-independent part of the policy server: request dict in, response dict out (chat
completions in vLLM's JSON shape, the weights hot-swap, vLLM's runtime LoRA contract)."""

from __future__ import annotations

import hmac
import time
import uuid
from pathlib import Path
from typing import Any

from workers.policy.base import PolicyError
from workers.policy.embedded.generation import Generated
from workers.policy.embedded.policy import EmbeddedPolicy
from workers.policy.hf_vlm import checkpoint_kind
from workers.policy.hf_vlm.model import HFVLMPolicy
from workers.policy.server.backends import BadRequest, NotFound, backend_for, policy_from_checkpoint

MAX_N = 64


class PolicyService:
    """The HTTP-independent part: request dict in, response dict out."""

    def __init__(
        self, policy: EmbeddedPolicy | HFVLMPolicy, model_name: str, checkpoint: str, weights_secret: str = ""
    ) -> None:
        self.policy = policy
        self.backend = backend_for(policy)
        self.model_name = model_name
        self.checkpoint = checkpoint  # the directory of the loaded (base) weights
        self.adapter = ""  # the LoRA adapter served on top of it, if any
        self.weights_secret = weights_secret

    def may_load_weights(self, authorization: str | None) -> bool:
        """True when `authorization` ("Bearer <secret>") carries this server's weights secret."""
        if not self.weights_secret or not authorization or not authorization.startswith("Bearer "):
            return False
        return hmac.compare_digest(authorization[len("Bearer ") :].encode(), self.weights_secret.encode())

    def may_use(self, authorization: str | None) -> bool:
        """Completions and the model card: a server with a secret answers them only with it (its key,
        as vLLM's `--api-key`), so another account of the machine cannot sample; a server started
        without one (in-process, a test's or a bench's) answers anyone who reaches it."""
        return not self.weights_secret or self.may_load_weights(authorization)

    @property
    def version(self) -> str:
        return self.backend.version

    def models(self) -> dict[str, Any]:
        card = {"id": self.model_name, "object": "model", "owned_by": "flywheel", "root": self.checkpoint}
        extra = {"model_version": self.version, "kind": self.backend.kind, "adapter": self.adapter or None}
        return {"object": "list", "data": [{**card, **extra}]}

    def load_weights(self, body: dict[str, Any]) -> dict[str, Any]:
        path = body.get("path")
        if not isinstance(path, str) or not path:
            raise BadRequest("'path' (a checkpoint directory) is required")
        label = body.get("version")
        if label is not None and (not isinstance(label, str) or not 0 < len(label) <= 200):
            raise BadRequest("'version' must be a label of 1..200 characters")
        started = time.perf_counter()
        try:
            kind = checkpoint_kind(path)
        except PolicyError as exc:
            raise BadRequest(str(exc)) from exc
        if kind == self.backend.kind:
            self.backend.load(path, label)
        else:  # another kind of model (e.g. an HF VLM promoted to annotators): a backend of its own
            try:
                policy = policy_from_checkpoint(path)
            except PolicyError as exc:
                raise BadRequest(str(exc)) from exc
            if label is not None:
                policy.model.config.flywheel_version = label
            self.policy, self.backend = policy, backend_for(policy)
        self.checkpoint, self.adapter = str(Path(path)), ""
        return {
            "model_version": self.version,
            "path": self.checkpoint,
            "swap_ms": (time.perf_counter() - started) * 1e3,
        }

    def load_lora_adapter(self, body: dict[str, Any]) -> dict[str, Any]:
        """vLLM's runtime LoRA contract (`lora_name`, `lora_path`): the base stays loaded, the adapter
        replaces the previous one, and what is served is reported as `lora_name` from now on."""
        name, path = body.get("lora_name"), body.get("lora_path")
        if not isinstance(name, str) or not 0 < len(name) <= 200:
            raise BadRequest("'lora_name' must be a label of 1..200 characters")
        if not isinstance(path, str) or not path:
            raise BadRequest("'lora_path' (a LoRA adapter directory) is required")
        started = time.perf_counter()
        self.backend.load_adapter(path, name, self.checkpoint)
        self.adapter = str(Path(path))
        return {
            "model_version": self.version,
            "adapter": self.adapter,
            "base": self.checkpoint,
            "swap_ms": (time.perf_counter() - started) * 1e3,
        }

    def unload_lora_adapter(self, body: dict[str, Any]) -> dict[str, Any]:
        """One adapter is resident at a time (the served one), so there is nothing else to unload."""
        name = body.get("lora_name")
        if not isinstance(name, str) or not name:
            raise BadRequest("'lora_name' is required")
        if self.adapter and name == self.version:
            raise BadRequest(f"{name!r} is being served: load another adapter or weights first")
        raise NotFound(f"no LoRA adapter {name!r} is loaded")

    def chat(self, body: dict[str, Any]) -> dict[str, Any]:
        n = _int(body, "n", 1, 1, MAX_N)
        temperature = _float(body, "temperature", 1.0, 0.0, 10.0)
        # Extension (an extra body field, as vLLM's own sampling extensions): the thought's temperature.
        thought_temperature = (
            _float(body, "thought_temperature", 1.0, 1e-3, 10.0)
            if body.get("thought_temperature") is not None
            else None
        )
        top = _int(body, "top_logprobs", 0, 0, 20)
        max_tokens = (
            body.get("max_tokens")
            if body.get("max_tokens") is not None
            else body.get("max_completion_tokens")
        )
        if max_tokens is not None and (
            isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or not 1 <= max_tokens <= 8192
        ):
            raise BadRequest("'max_tokens' must be a positive integer (at most 8192)")
        want_logprobs = bool(body.get("logprobs", False))
        as_ids = bool(body.get("return_tokens_as_token_ids", False))
        # vLLM's extra parameter: the n most probable answers (beam search), best first; this server's
        # extension `greedy_first` puts the greedy answer before them (n + 1 choices), both from one
        # decode over one encoding of the prompt (the annotation proposals, workers.policy.proposals).
        if _bool(body, "use_beam_search"):
            if not _bool(body, "greedy_first"):
                raise BadRequest("'use_beam_search' is served with 'greedy_first': true")
            rows, version, prompt_tokens = self.backend.rank(body.get("messages"), n, max_tokens)
        else:
            rows, version, prompt_tokens = self.backend.complete(
                body.get("messages"),
                n,
                temperature,
                top if want_logprobs else 0,
                max_tokens,
                thought_temperature,
            )
        choices = [self._choice(i, g, want_logprobs, as_ids) for i, g in enumerate(rows)]
        completion_tokens = sum(len(g.token_ids) for g in rows)
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model_name,
            "system_fingerprint": version,
            "model_version": version,
            "choices": choices,
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }

    def _choice(self, index: int, g: Generated, want_logprobs: bool, as_ids: bool) -> dict[str, Any]:
        backend = self.backend
        choice: dict[str, Any] = {
            "index": index,
            "message": {"role": "assistant", "content": backend.text(g.token_ids)},
            "finish_reason": "stop" if g.finished else "length",
            "logprobs": None,
        }
        if want_logprobs:

            def entry(token_id: int, logprob: float) -> dict[str, Any]:
                text = f"token_id:{token_id}" if as_ids else backend.token_text(token_id)
                return {"token": text, "logprob": logprob, "bytes": backend.token_bytes(token_id)}

            content = []
            for pos, (token_id, logprob) in enumerate(zip(g.token_ids, g.logprobs, strict=True)):
                item = entry(token_id, logprob)
                item["top_logprobs"] = (
                    [entry(t, lp) for t, lp in g.top_logprobs[pos]] if g.top_logprobs else []
                )
                content.append(item)
            choice["logprobs"] = {"content": content}
        return choice


def _int(body: dict[str, Any], key: str, default: int, low: int, high: int) -> int:
    value = body.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise BadRequest(f"'{key}' must be an integer in [{low}, {high}]")
    return value


def _bool(body: dict[str, Any], key: str) -> bool:
    value = body.get(key, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise BadRequest(f"'{key}' must be true or false")
    return value


def _float(body: dict[str, Any], key: str, default: float, low: float, high: float) -> float:
    value = body.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise BadRequest(f"'{key}' must be a number in [{low}, {high}]")
    return float(value)
