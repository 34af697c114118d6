"""A real local HTTP server speaking OpenAI chat completions, for the tests of the LLM judge (the
flywheel's validation, the RL outcome reward): `answer(body)` writes each reply's text; every
request body is kept in `requests`, in order."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class ChatServer(ThreadingHTTPServer):
    def __init__(self, answer: Callable[[dict[str, Any]], str]) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.answer = answer
        self.requests: list[dict[str, Any]] = []

    @property
    def url(self) -> str:
        """The OpenAI-style base URL (…/v1)."""
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _Handler(BaseHTTPRequestHandler):
    server: ChatServer

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append(body)
        reply = self.server.answer(body)
        choice = {"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}
        data = json.dumps(
            {"id": "x", "object": "chat.completion", "model": body["model"], "choices": [choice]}
        )
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data.encode())))
        self.end_headers()
        self.wfile.write(data.encode())

    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def chat_server(answer: Callable[[dict[str, Any]], str]) -> Iterator[ChatServer]:
    server = ChatServer(answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
