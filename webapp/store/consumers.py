"""Websocket: live progress of one export job for its owner (or an admin)."""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async

from webapp.store import selectors
from webapp.store.events import export_job_group, export_progress_event
from webapp.ws_input import JsonConsumer


class ExportJobConsumer(JsonConsumer):
    async def connect(self) -> None:
        user = self.scope.get("user")
        job_id = int(self.scope["url_route"]["kwargs"]["job_id"])
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        job = await database_sync_to_async(selectors.export_job_get_for_user)(user=user, job_id=job_id)
        if job is None:
            await self.close(code=4403)
            return
        self.group = export_job_group(job_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        await self.send_json(dict(export_progress_event(job)))

    async def disconnect(self, code: int) -> None:
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def export_progress(self, event: dict[str, Any]) -> None:
        await self.send_json(event)
