"""Websocket of one annotation session: pushes observations, candidates and status; the page's
heartbeats keep the environment lease alive (a closed tab lets it expire and the reaper reclaim it)."""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async

from annotation import events, selectors, services
from webapp.ws_input import JsonConsumer


class AnnotationSessionConsumer(JsonConsumer):
    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        self.session_id = int(self.scope["url_route"]["kwargs"]["session_id"])
        if await database_sync_to_async(self._state)(user) is None:
            await self.close(code=4403)
            return
        self.user = user
        # Join the session's group before reading the snapshot: an event published between a snapshot
        # read first and the join was lost (the page then waited on "pending" candidates that were
        # ready); joined first, it is either in the snapshot or queued behind it.
        await self.channel_layer.group_add(events.group(self.session_id), self.channel_name)
        state = await database_sync_to_async(self._state)(user)
        await self.accept()
        await self.send_json({"type": "annotation.state", "state": state})

    def _state(self, user: Any) -> dict[str, Any] | None:
        session = selectors.sessions_visible_to(user).filter(pk=self.session_id).first()
        return selectors.session_state(session) if session is not None else None

    async def disconnect(self, code: int) -> None:
        if hasattr(self, "user"):
            await self.channel_layer.group_discard(events.group(self.session_id), self.channel_name)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        if not isinstance(content, dict):
            await self.send_json({"type": "error", "detail": "messages are JSON objects"})
            return
        if content.get("type") == "heartbeat":
            lease = await database_sync_to_async(self._heartbeat)()
            await self.send_json({"type": "heartbeat", "lease": lease, "ping": content.get("ping")})
        elif content.get("type") == "state":
            await self.send_json(
                {"type": "annotation.state", "state": await database_sync_to_async(self._state)(self.user)}
            )
        else:
            await self.send_json({"type": "error", "detail": f"unknown message type {content.get('type')!r}"})

    def _heartbeat(self) -> str:
        session = selectors.sessions_visible_to(self.user).filter(pk=self.session_id).first()
        return services.session_heartbeat(session=session) if session is not None else "gone"

    async def annotation_observation(self, event: dict[str, Any]) -> None:
        await self.send_json(event)

    async def annotation_candidates(self, event: dict[str, Any]) -> None:
        await self.send_json(event)

    async def annotation_status(self, event: dict[str, Any]) -> None:
        await self.send_json(event)

    async def annotation_thinkaloud(self, event: dict[str, Any]) -> None:
        await self.send_json(event)
