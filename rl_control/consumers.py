"""Websocket `ws/rl/runs/<id>/`: live status, metrics and alerts of one run for researchers and admins."""

from __future__ import annotations

import asyncio
import logging
import random
from typing import Any

from channels.db import database_sync_to_async
from redis.exceptions import MaxConnectionsError

from rl_control import selectors
from rl_control.events import run_group
from rl_control.services import status_payload
from webapp.ws_input import JsonConsumer

logger = logging.getLogger(__name__)
DISCARD_ATTEMPTS = 8


class RunConsumer(JsonConsumer):
    """Sends a `run.status` snapshot on connect, then every `run.status`, `run.metrics`, `run.alert`.

    Closes with 4401 when not logged in, 4403 when the role may not see runs or the run does not exist.
    """

    async def connect(self) -> None:
        user = self.scope.get("user")
        run_id = int(self.scope["url_route"]["kwargs"]["run_id"])
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        run = await database_sync_to_async(selectors.run_get_for_user)(user=user, run_id=run_id)
        if run is None:
            await self.close(code=4403)
            return
        self.group = run_group(run_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        await self.send_json(dict(status_payload(run)))

    async def disconnect(self, code: int) -> None:
        """Leave the group. When many dashboards close at once (a page reload across a team, the
        benchmark's 500 sockets) the layer's Redis pool may be exhausted for a moment: retry with
        backoff rather than fail; a membership that still could not be removed expires with the
        layer's group_expiry and messages to the closed channel are dropped."""
        if not hasattr(self, "group"):
            return
        for attempt in range(DISCARD_ATTEMPTS):
            try:
                await self.channel_layer.group_discard(self.group, self.channel_name)
                return
            except MaxConnectionsError:
                await asyncio.sleep(0.05 * 2**attempt + random.random() * 0.05)
        logger.warning(
            "run %s: could not leave group %s after %d attempts",
            self.scope["url_route"]["kwargs"]["run_id"],
            self.group,
            DISCARD_ATTEMPTS,
        )

    async def run_status(self, event: dict[str, Any]) -> None:
        await self.send_json(event)

    async def run_metrics(self, event: dict[str, Any]) -> None:
        await self.send_json(event)

    async def run_alert(self, event: dict[str, Any]) -> None:
        await self.send_json(event)
