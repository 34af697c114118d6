"""Refinement against a real local HTTP server speaking the OpenAI chat-completions protocol."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from workers.asr.refine import RefineConfig, RefineError, Refiner

FILLERS = re.compile(r"\b(um+|uh+|er+|like)\b[,]?\s*", re.IGNORECASE)


class ChatServer(ThreadingHTTPServer):
    """Deterministic /v1/chat/completions: drops fillers, capitalises, adds a full stop.

    The model name selects behaviour: "flaky-N" answers 503 to its first N requests, "slow" sleeps
    past the client timeout once, "reject" answers 400, "garbage" answers non-JSON, "empty" an empty
    message.
    """

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), ChatHandler)
        self.requests: list[dict[str, Any]] = []
        self.headers_seen: list[dict[str, str]] = []
        self.lock = threading.Lock()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class ChatHandler(BaseHTTPRequestHandler):
    server: ChatServer

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass

    def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        if self.path != "/v1/chat/completions":
            self._send(404, b'{"error": "not found"}')
            return
        payload = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with self.server.lock:
            self.server.requests.append(payload)
            self.server.headers_seen.append(dict(self.headers))
            seen = sum(r["model"] == payload["model"] for r in self.server.requests)
        model = payload["model"]
        if model.startswith("flaky-") and seen <= int(model.split("-")[1]):
            self._send(503, b'{"error": "overloaded"}')
            return
        if model == "slow" and seen == 1:
            time.sleep(1.0)
        if model == "reject":
            self._send(400, b'{"error": "bad request"}')
            return
        if model == "garbage":
            self._send(200, b"<html>oops</html>", "text/html")
            return
        spoken = payload["messages"][-1]["content"].split("Think-aloud: ", 1)[1]
        cleaned = FILLERS.sub("", spoken).strip()
        content = "" if model == "empty" else cleaned[:1].upper() + cleaned[1:] + "."
        reply = {
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}}],
            "model": model,
        }
        self._send(200, json.dumps(reply).encode())


@pytest.fixture
def server() -> Iterator[ChatServer]:
    srv = ChatServer()
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def refiner(server: ChatServer, model: str, **kwargs: Any) -> tuple[Refiner, list[float]]:
    waits: list[float] = []
    config = RefineConfig(base_url=server.base_url, model=model, api_key="k-123", backoff_s=0.01, **kwargs)
    return Refiner(config, sleep=waits.append), waits


def test_refines_and_keeps_verbatim(server: ChatServer) -> None:
    client, waits = refiner(server, "clean-1")
    with client:
        thought = client.refine("um so I uh need to open the settings menu", context="Turn on dark mode")
    assert thought.text == "So I need to open the settings menu."
    assert thought.verbatim == "um so I uh need to open the settings menu"
    assert thought.refined and thought.model == "clean-1" and thought.error is None
    sent = server.requests[0]
    assert sent["model"] == "clean-1" and sent["temperature"] == 0.0
    assert sent["messages"][0]["role"] == "system" and "Turn on dark mode" in sent["messages"][1]["content"]
    assert server.headers_seen[0]["Authorization"] == "Bearer k-123"
    assert waits == []


def test_empty_verbatim_makes_no_call(server: ChatServer) -> None:
    client, _ = refiner(server, "clean-1")
    thought = client.refine("   ")
    assert not thought.refined and server.requests == []


def test_retries_5xx_with_exponential_backoff(server: ChatServer) -> None:
    client, waits = refiner(server, "flaky-2", max_retries=3)
    thought = client.refine("now I click save")
    assert thought.text == "Now I click save." and thought.refined
    assert len(server.requests) == 3
    assert waits == [0.01, 0.02]


def test_gives_up_after_max_retries(server: ChatServer) -> None:
    client, waits = refiner(server, "flaky-9", max_retries=2)
    with pytest.raises(RefineError, match=r"gave up after 3 attempts: HTTP 503"):
        client.refine("now I click save")
    assert len(server.requests) == 3 and waits == [0.01, 0.02]


def test_timeout_is_retried(server: ChatServer) -> None:
    client, waits = refiner(server, "slow", timeout_s=0.3, max_retries=1)
    assert client.refine("open the file menu").text == "Open the file menu."
    assert len(server.requests) == 2 and len(waits) == 1


@pytest.mark.parametrize(
    ("model", "message"), [("reject", "HTTP 400"), ("garbage", "not JSON"), ("empty", "empty thought")]
)
def test_client_errors_and_bad_replies_fail_without_retry(
    server: ChatServer, model: str, message: str
) -> None:
    client, waits = refiner(server, model)
    with pytest.raises(RefineError, match=message):
        client.refine("open the file menu")
    assert len(server.requests) == 1 and waits == []


def test_refine_or_verbatim_falls_back_and_keeps_the_error(server: ChatServer) -> None:
    client, _ = refiner(server, "reject")
    thought = client.refine_or_verbatim("open the file menu")
    assert thought.text == thought.verbatim == "open the file menu"
    assert not thought.refined and thought.model is None and "HTTP 400" in (thought.error or "")


def test_unreachable_server_is_a_refine_error() -> None:
    with ChatServer() as srv:
        url = srv.base_url  # a port that was just free and is closed again below
    client = Refiner(
        RefineConfig(base_url=url, model="m", max_retries=1, backoff_s=0.0), sleep=lambda s: None
    )
    with pytest.raises(RefineError, match="ConnectError"):
        client.refine("open the file menu")
