"""Serve a policy checkpoint over the OpenAI-compatible API vLLM speaks (SPEC §7).

    python -m workers.policy.server --checkpoint DIR --port P [--host 127.0.0.1]

One server, one protocol, two backends chosen by the checkpoint's config.json: the embedded model
(`model_type` "flywheel_policy") and any Hugging Face vision-language checkpoint of the Qwen2.5-VL
family (UI-TARS-1.5, Qwen2.5-VL, the tiny one of workers.policy.hf_vlm.tiny), run with transformers
on CPU (workers.policy.hf_vlm). In production the same checkpoints are served by vLLM
(docs/scale.md gives the command); clients (OpenAIPolicy, the RL engine) speak the same protocol to both.

Endpoints:
- `GET /v1/models`
- `POST /v1/chat/completions`: `messages` (text + `image_url` data URLs), `n`, `temperature`,
  `max_tokens`, `logprobs`, `top_logprobs`, `return_tokens_as_token_ids` (vLLM's flag: tokens are
  reported as "token_id:N"), and the extension `thought_temperature` (the thought's own sampling
  temperature, workers.policy.embedded.generation); vLLM-shaped JSON back.
- `POST /v1/load_weights` `{"path": DIR, "version": LABEL}`: hot-swap the checkpoint without a
  restart. Only with the server's weights secret (`Authorization: Bearer <secret>`; the secret comes
  from the environment variable FLYWHEEL_POLICY_SECRET, never the command line): a server started
  without one refuses every hot-swap (403). `version` (optional) is the label the loaded weights are
  reported under (an RL run labels its versions `run<id>-v<n>`), else the checkpoint's own version.
Every response carries the loaded version in the `X-Model-Version` header; completions also carry it
as `model_version` and `system_fingerprint`.

Lifeline (`--lifeline-key K`, Redis URL in FLYWHEEL_LIFELINE_REDIS): the server exits once the Redis
key K is gone (deleted when its RL run pauses or ends, or expired because nobody renews it), so a
run's servers never outlive it even when they run on another machine than the one that stops the run.

Prompt format (HF VLM): the messages go through the checkpoint's own chat template and image
processor (workers.policy.hf_vlm.model.encode_prompt); log-probs are under the sampling
distribution (vLLM: `--logprobs-mode processed_logprobs`). Prompt format (embedded): the model reads the chat layout documented in `workers.policy.prompts`
(instruction after "## User Instruction\\n", the element list as a text part starting with
"Elements:\\n" in the last user message, history as assistant messages, the screenshot as the last
image) — exactly what `OpenAIPolicy(include_elements=True)` sends.

Why the stdlib ThreadingHTTPServer: the model is one CPU-bound object behind a lock, so an async
framework would buy nothing; requests parse and validate concurrently, generation is serialised.
"""

from __future__ import annotations

import argparse
import hmac
import json
import logging
import os
import signal
import threading
import time
import uuid
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import torch

from workers.policy.base import PolicyError
from workers.policy.embedded.generation import Generated
from workers.policy.embedded.policy import EmbeddedPolicy, load_checkpoint
from workers.policy.hf_vlm import checkpoint_kind
from workers.policy.hf_vlm.model import HFVLMPolicy, load_vlm
from workers.policy.prompts import embedded_prompt_from_messages

log = logging.getLogger(__name__)
MAX_BODY_BYTES = 32 * 1024 * 1024
MAX_N = 64


class BadRequest(ValueError):
    """The request is malformed: answered with 400 and this message."""


class EmbeddedBackend:
    """The embedded model behind the service: flat prompt from the messages, grammar-masked sampling."""

    kind = "embedded"

    def __init__(self, policy: EmbeddedPolicy) -> None:
        self.policy = policy

    @property
    def version(self) -> str:
        return self.policy.model_version

    def load(self, path: str, label: str | None) -> None:
        try:
            model, _ = load_checkpoint(path)
        except PolicyError as exc:
            raise BadRequest(str(exc)) from exc
        if label is not None:
            model.config.flywheel_version = label  # swapped together with the weights it names
        self.policy.set_model(model)

    def complete(
        self, messages: Any, n: int, temperature: float, top: int, max_tokens: int | None,
        thought_temperature: float | None,
    ) -> tuple[list[Generated], str, int]:  # fmt: skip
        try:
            inputs = embedded_prompt_from_messages(messages)
        except ValueError as exc:
            raise BadRequest(str(exc)) from exc
        try:
            rows, version = self.policy.generate(
                [inputs], n, temperature, top, max_tokens, thought_temperature
            )
        except PolicyError as exc:
            raise BadRequest(str(exc)) from exc
        return rows[0], version, len(self.policy.encode_prompt(inputs.text))

    def text(self, token_ids: list[int]) -> str:
        tok = self.policy.tokenizer
        return tok.decode([t for t in token_ids if t != tok.eos_id])

    def token_text(self, token_id: int) -> str:
        return self.policy.tokenizer.token_text(token_id)

    def token_bytes(self, token_id: int) -> list[int]:
        return list(self.policy.tokenizer.decode([token_id]).encode())


class HFVLMBackend:
    """A Hugging Face vision-language checkpoint (workers.policy.hf_vlm): the messages through the
    checkpoint's chat template and image processor; `thought_temperature` does not apply."""

    kind = "hf_vlm"

    def __init__(self, policy: HFVLMPolicy) -> None:
        self.policy = policy

    @property
    def version(self) -> str:
        return self.policy.model_version

    def load(self, path: str, label: str | None) -> None:
        try:
            model, _, _ = load_vlm(path)
            if label is not None:
                model.config.flywheel_version = label
            self.policy.set_model(model)
        except PolicyError as exc:
            raise BadRequest(str(exc)) from exc

    def complete(
        self, messages: Any, n: int, temperature: float, top: int, max_tokens: int | None,
        thought_temperature: float | None,
    ) -> tuple[list[Generated], str, int]:  # fmt: skip
        try:
            prompt = self.policy.encode(messages)
        except ValueError as exc:
            raise BadRequest(str(exc)) from exc
        try:
            rows, version = self.policy.generate(prompt, n, temperature, top, max_tokens)
        except PolicyError as exc:
            raise BadRequest(str(exc)) from exc
        return rows, version, len(prompt.ids)

    def text(self, token_ids: list[int]) -> str:
        return self.policy.decode(token_ids)

    def token_text(self, token_id: int) -> str:
        return self.policy.token_text(token_id)

    def token_bytes(self, token_id: int) -> list[int]:
        return list(self.policy.tokenizer.decode([token_id]).encode())


def backend_for(policy: EmbeddedPolicy | HFVLMPolicy) -> EmbeddedBackend | HFVLMBackend:
    return HFVLMBackend(policy) if isinstance(policy, HFVLMPolicy) else EmbeddedBackend(policy)


def policy_from_checkpoint(directory: str | Path, seed: int | None = None) -> EmbeddedPolicy | HFVLMPolicy:
    """The policy a checkpoint directory holds: the embedded model or an HF VLM (by config.json)."""
    if checkpoint_kind(directory) == "hf_vlm":
        return HFVLMPolicy.from_pretrained(directory, seed=seed)
    return EmbeddedPolicy.from_pretrained(directory, seed=seed)


class PolicyService:
    """The HTTP-independent part: request dict in, response dict out."""

    def __init__(
        self, policy: EmbeddedPolicy | HFVLMPolicy, model_name: str, checkpoint: str, weights_secret: str = ""
    ) -> None:
        self.policy = policy
        self.backend = backend_for(policy)
        self.model_name = model_name
        self.checkpoint = checkpoint
        self.weights_secret = weights_secret

    def may_load_weights(self, authorization: str | None) -> bool:
        """True when `authorization` ("Bearer <secret>") carries this server's weights secret."""
        if not self.weights_secret or not authorization or not authorization.startswith("Bearer "):
            return False
        return hmac.compare_digest(authorization[len("Bearer ") :].encode(), self.weights_secret.encode())

    @property
    def version(self) -> str:
        return self.backend.version

    def models(self) -> dict[str, Any]:
        card = {"id": self.model_name, "object": "model", "owned_by": "flywheel", "root": self.checkpoint}
        return {
            "object": "list",
            "data": [{**card, "model_version": self.version, "kind": self.backend.kind}],
        }

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
        self.checkpoint = str(Path(path))
        return {
            "model_version": self.version,
            "path": self.checkpoint,
            "swap_ms": (time.perf_counter() - started) * 1e3,
        }

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
        rows, version, prompt_tokens = self.backend.complete(
            body.get("messages"), n, temperature, top if want_logprobs else 0, max_tokens, thought_temperature
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


def _float(body: dict[str, Any], key: str, default: float, low: float, high: float) -> float:
    value = body.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise BadRequest(f"'{key}' must be a number in [{low}, {high}]")
    return float(value)


class Handler(BaseHTTPRequestHandler):
    """Routes to the `PolicyService` on `self.server.service`; errors are OpenAI-shaped JSON."""

    server: PolicyHTTPServer
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        if self.path.rstrip("/") == "/v1/models":
            self._send(HTTPStatus.OK, self.server.service.models())
        elif self.path.rstrip("/") == "/health":
            self._send(HTTPStatus.OK, {"status": "ok"})
        else:
            self._error(HTTPStatus.NOT_FOUND, f"no route GET {self.path}")

    def do_POST(self) -> None:
        routes = {
            "/v1/chat/completions": self.server.service.chat,
            "/v1/load_weights": self.server.service.load_weights,
        }
        route = routes.get(self.path.rstrip("/"))
        if route is None:
            self._error(HTTPStatus.NOT_FOUND, f"no route POST {self.path}")
            return
        if route == self.server.service.load_weights and not self.server.service.may_load_weights(
            self.headers.get("Authorization")
        ):
            self._drain()
            self._error(HTTPStatus.FORBIDDEN, "loading weights needs this server's weights secret")
            return
        try:
            self._send(HTTPStatus.OK, route(self._json_body()))
        except BadRequest as exc:
            self._error(HTTPStatus.BAD_REQUEST, str(exc))
        except Exception as exc:  # a bug must answer 500 and keep the server up
            log.exception("request failed")
            self._error(HTTPStatus.INTERNAL_SERVER_ERROR, f"{type(exc).__name__}: {exc}")

    def _json_body(self) -> dict[str, Any]:
        try:
            length = int(self.headers.get("Content-Length", "0"))
        except ValueError as exc:
            raise BadRequest("bad Content-Length") from exc
        if length <= 0 or length > MAX_BODY_BYTES:
            raise BadRequest(f"body must be 1..{MAX_BODY_BYTES} bytes of JSON")
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise BadRequest(f"body is not valid JSON: {exc}") from exc
        if not isinstance(body, dict):
            raise BadRequest("body must be a JSON object")
        return body

    def _drain(self) -> None:
        """Read a refused request's body so the connection stays usable."""
        try:
            length = int(self.headers.get("Content-Length", "0"))
        except ValueError:
            length = 0
        if 0 < length <= MAX_BODY_BYTES:
            self.rfile.read(length)

    def _error(self, status: HTTPStatus, message: str) -> None:
        kind = "invalid_request_error" if status < 500 else "server_error"
        self._send(status, {"error": {"message": message, "type": kind, "code": int(status)}})

    def _send(self, status: HTTPStatus, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("X-Model-Version", self.server.service.version)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.address_string(), *args)


class PolicyHTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], service: PolicyService) -> None:
        self.service = service
        super().__init__(address, Handler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host.decode() if isinstance(host, bytes) else host}:{port}"


def start_server(
    policy: EmbeddedPolicy | HFVLMPolicy,
    host: str = "127.0.0.1",
    port: int = 0,
    model_name: str = "flywheel-embedded",
    checkpoint: str = "",
    weights_secret: str = "",
) -> tuple[PolicyHTTPServer, threading.Thread]:
    """Serve `policy` from a background thread; stop with `server.shutdown(); server.server_close()`."""
    server = PolicyHTTPServer((host, port), PolicyService(policy, model_name, checkpoint, weights_secret))
    thread = threading.Thread(target=server.serve_forever, name="policy-server", daemon=True)
    thread.start()
    return server, thread


def watch_lifeline(
    server: PolicyHTTPServer, redis_url: str, key: str, every_s: float = 1.0
) -> threading.Thread:
    """Shut `server` down once Redis key `key` is gone (two reads in a row, so one lost connection
    does not end it); a thread."""
    from workers.envs.leases import redis_client

    client = redis_client(redis_url)

    def watch() -> None:
        misses = 0
        while True:
            time.sleep(every_s)
            try:
                misses = 0 if client.exists(key) else misses + 1
            except Exception:  # Redis away: its restart loses the key anyway; count it as a miss
                misses += 1
            if misses >= 2:
                log.info("lifeline %s is gone: stopping", key)
                server.shutdown()
                return

    thread = threading.Thread(target=watch, name="policy-lifeline", daemon=True)
    thread.start()
    return thread


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--checkpoint", required=True, help="checkpoint directory (config.json, model.safetensors)"
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--model-name", default="flywheel-embedded")
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads")
    parser.add_argument("--version-label", help="report the loaded weights under this version label")
    parser.add_argument("--lifeline-key", help="exit once this Redis key is gone (FLYWHEEL_LIFELINE_REDIS)")
    parser.add_argument("--pid-file", help="write the pid here while serving (removed on exit)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO)
    torch.set_num_threads(args.threads)
    try:
        policy = policy_from_checkpoint(args.checkpoint)
    except PolicyError as exc:
        parser.error(str(exc))
    if args.version_label:
        policy.model.config.flywheel_version = args.version_label
    secret = os.environ.get("FLYWHEEL_POLICY_SECRET", "")
    server = PolicyHTTPServer(
        (args.host, args.port), PolicyService(policy, args.model_name, args.checkpoint, secret)
    )
    if args.lifeline_key:
        watch_lifeline(
            server, os.environ.get("FLYWHEEL_LIFELINE_REDIS", "redis://127.0.0.1:6379/0"), args.lifeline_key
        )
    # SIGTERM (make down, the engine stopping a run) ends serve_forever, so the finally below runs.
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown, daemon=True).start())
    pid_file = Path(args.pid_file) if args.pid_file else None
    if pid_file:
        pid_file.parent.mkdir(parents=True, exist_ok=True)
        pid_file.write_text(str(os.getpid()))
    log.info("serving %s (version %s) on %s%s", args.checkpoint, policy.model_version, server.url,
             "" if secret else "; weight hot-swap disabled (no FLYWHEEL_POLICY_SECRET)")  # fmt: skip
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        if pid_file:
            pid_file.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
