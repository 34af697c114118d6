"""Websocket routes of every app, collected in one place; any other path is closed cleanly (4404)."""

from __future__ import annotations

from channels.generic.websocket import AsyncWebsocketConsumer
from django.urls import path, re_path

from annotation.consumers import AnnotationSessionConsumer
from rl_control.consumers import RunConsumer
from webapp.fleet.consumers import FleetConsumer
from webapp.store.consumers import ExportJobConsumer


class UnknownPathConsumer(AsyncWebsocketConsumer):
    """No route: refuse the handshake with close code 4404 instead of an error in the router."""

    async def connect(self) -> None:
        await self.close(code=4404)


websocket_urlpatterns = [
    path("ws/export-jobs/<int:job_id>/", ExportJobConsumer.as_asgi()),
    path("ws/rl/runs/<int:run_id>/", RunConsumer.as_asgi()),
    path("ws/annotation/sessions/<int:session_id>/", AnnotationSessionConsumer.as_asgi()),
    path("ws/fleet/", FleetConsumer.as_asgi()),
    re_path(r"", UnknownPathConsumer.as_asgi()),  # keep last
]
