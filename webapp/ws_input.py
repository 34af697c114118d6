"""The base of every JSON websocket consumer: a message that is not JSON, too long or nested too
deep gets `{"type": "error", "detail": …}` back and the socket stays open (Channels' own decoding
raised, which closed the socket with 1011 and logged a traceback; `[`×1000 raised RecursionError)."""

from __future__ import annotations

from typing import Any

from channels.generic.websocket import AsyncJsonWebsocketConsumer

from workers.json_input import json_loads

# The pages send heartbeats and small commands; nothing near this.
MAX_MESSAGE_CHARS = 64 * 1024


class JsonConsumer(AsyncJsonWebsocketConsumer):
    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None, **kwargs: Any) -> None:  # fmt: skip
        if text_data is None:
            await self.send_json({"type": "error", "detail": "messages are JSON text frames"})
            return
        try:
            content = json_loads(text_data, max_chars=MAX_MESSAGE_CHARS)
        except ValueError as exc:
            await self.send_json({"type": "error", "detail": f"not valid JSON: {exc}"})
            return
        await self.receive_json(content, **kwargs)
