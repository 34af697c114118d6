"""The policy server's HTTP side: routes to a `PolicyService`, OpenAI-shaped JSON errors, a
background-thread server for tests and benches, and the Redis lifeline watch."""

from __future__ import annotations

import json
import logging
import threading
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from workers.json_input import json_loads
from workers.policy.embedded.policy import EmbeddedPolicy
from workers.policy.hf_vlm.model import HFVLMPolicy
from workers.policy.server.backends import BadRequest, NotFound
from workers.policy.server.service import PolicyService

log = logging.getLogger(__name__)
MAX_BODY_BYTES = 32 * 1024 * 1024
# Routes that change the served weights: only with the server's weights secret.
WEIGHT_ROUTES = frozenset({"/v1/load_weights", "/v1/load_lora_adapter", "/v1/unload_lora_adapter"})


class Handler(BaseHTTPRequestHandler):
    """Routes to the `PolicyService` on `self.server.service`; errors are OpenAI-shaped JSON."""

    server: PolicyHTTPServer
    protocol_version = "HTTP/1.1"
    # TCP_NODELAY: the headers and the body go out as two writes; with Nagle's algorithm the body
    # waits for the client's delayed ACK of the headers (~40 ms on every response of a kept-alive
    # connection).
    disable_nagle_algorithm = True

    def do_GET(self) -> None:
        if self.path.rstrip("/") == "/v1/models":
            if self._key_checked():
                self._send(HTTPStatus.OK, self.server.service.models())
        elif self.path.rstrip("/") == "/health":
            self._send(HTTPStatus.OK, {"status": "ok"})
        else:
            self._error(HTTPStatus.NOT_FOUND, f"no route GET {self.path}")

    def do_POST(self) -> None:
        service = self.server.service
        routes = {
            "/v1/chat/completions": service.chat,
            "/v1/load_weights": service.load_weights,
            "/v1/load_lora_adapter": service.load_lora_adapter,
            "/v1/unload_lora_adapter": service.unload_lora_adapter,
        }
        path = self.path.rstrip("/")
        route = routes.get(path)
        if route is None:
            self._error(HTTPStatus.NOT_FOUND, f"no route POST {self.path}")
            return
        if path in WEIGHT_ROUTES and not service.may_load_weights(self.headers.get("Authorization")):
            self._drain()
            self._error(HTTPStatus.FORBIDDEN, "loading weights needs this server's weights secret")
            return
        if not self._key_checked():
            return
        try:
            self._send(HTTPStatus.OK, route(self._json_body()))
        except NotFound as exc:
            self._error(HTTPStatus.NOT_FOUND, str(exc))
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
            body = json_loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise BadRequest(f"body is not valid JSON: {exc}") from exc
        if not isinstance(body, dict):
            raise BadRequest("body must be a JSON object")
        return body

    def _key_checked(self) -> bool:
        """True when the caller may use the server; else answers 401 (vLLM's `--api-key` contract)."""
        if self.server.service.may_use(self.headers.get("Authorization")):
            return True
        self._drain()
        self._error(
            HTTPStatus.UNAUTHORIZED,
            "this policy server answers only with its key (Authorization: Bearer <key>)",
        )
        return False

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
        if status != HTTPStatus.UNAUTHORIZED:  # a caller without the key learns nothing of the model
            self.send_header("X-Model-Version", self.server.service.version)
        else:
            self.send_header("WWW-Authenticate", "Bearer")
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
