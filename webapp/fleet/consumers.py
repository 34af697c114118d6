"""Websocket `ws/fleet/`: the fleet page's live view for researchers and admins.

Sends a `fleet.snapshot` on connect, again within a moment of any registry event (an env booted,
leased, released, reclaimed, crashed or retired: the consumer tails the registry's Redis stream with
a blocking XREAD), and every TICK_S anyway so ages and host heartbeats stay current.
Closes with 4401 when not logged in, 4403 when the role may not see the fleet.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import redis.asyncio as aioredis
from channels.db import database_sync_to_async
from django.conf import settings

from webapp.accounts.roles import Role, has_role
from webapp.fleet import selectors
from webapp.fleet.events import fleet_snapshot_event
from webapp.ws_input import JsonConsumer

log = logging.getLogger(__name__)
TICK_S = 5.0
DEBOUNCE_S = 0.2  # a burst of events (a warm pool filling) makes one snapshot


class FleetConsumer(JsonConsumer):
    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        if not await database_sync_to_async(has_role)(user, Role.RESEARCHER, Role.ADMIN):
            await self.close(code=4403)
            return
        await self.accept()
        self._closed = False
        self._redis = aioredis.Redis.from_url(settings.REDIS_URL)
        self._stream = f"{settings.FLEET_REDIS_PREFIX}:events"
        # Follow from the newest event before the snapshot, so nothing between the two is missed.
        newest: Any = await self._redis.xrevrange(self._stream, count=1)
        start = newest[0][0] if newest else "0-0"
        await self._send_snapshot("connect")
        self._tail = asyncio.create_task(self._follow(start))

    async def disconnect(self, code: int) -> None:
        self._closed = True
        tail = getattr(self, "_tail", None)
        if tail is not None:
            tail.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await tail
        if hasattr(self, "_redis"):
            await self._redis.aclose()

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        """{"type": "refresh"} asks for a snapshot now; anything else is ignored."""
        if isinstance(content, dict) and content.get("type") == "refresh":
            await self._send_snapshot("refresh")

    async def _send_snapshot(self, reason: str) -> None:
        fleet = await database_sync_to_async(selectors.fleet_overview)()
        await self.send_json(dict(fleet_snapshot_event(fleet, reason)))

    async def _follow(self, last: bytes | str) -> None:
        while not self._closed:
            try:
                got: Any = await self._redis.xread({self._stream: last}, block=int(TICK_S * 1000), count=500)
            except (aioredis.ConnectionError, aioredis.TimeoutError):
                if self._closed:  # redis-py turns the cancellation of a blocked read into a timeout
                    return
                log.warning("fleet page: lost Redis; retrying", exc_info=True)
                await asyncio.sleep(1.0)
                continue
            if self._closed:
                return
            if got:
                last = got[0][1][-1][0]
                await asyncio.sleep(DEBOUNCE_S)
                await self._send_snapshot("change")
            else:
                await self._send_snapshot("tick")
