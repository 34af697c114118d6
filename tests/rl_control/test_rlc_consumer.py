"""The run websocket on the real Redis channel layer: snapshot, status, metrics and alerts; roles."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator

from project.routing import websocket_urlpatterns
from rl_control import services

pytestmark = pytest.mark.django_db(transaction=True)  # services publish on commit


def _communicator(user, run_id: int) -> WebsocketCommunicator:
    communicator = WebsocketCommunicator(URLRouter(websocket_urlpatterns), f"/ws/rl/runs/{run_id}/")
    communicator.scope["user"] = user
    return communicator


@pytest.mark.parametrize("role", ["researcher", "admin"])
def test_stream_of_a_run(users, make_run, role) -> None:
    run = make_run()

    async def scenario() -> None:
        ws = _communicator(users[role], run.pk)
        connected, _ = await ws.connect()
        assert connected
        snapshot = await ws.receive_json_from(timeout=5)
        assert (
            snapshot["type"] == "run.status"
            and snapshot["status"] == "created"
            and snapshot["run_id"] == run.pk
        )

        await database_sync_to_async(services.run_launch)(run=run)
        status = await ws.receive_json_from(timeout=5)
        assert (status["type"], status["status"]) == ("run.status", "running")

        await database_sync_to_async(services.metrics_record)(
            run=run, step=7, policy_version=3, samples=224, values={"policy/entropy": 0.01, "policy/kl": 0.02}
        )
        metrics = await ws.receive_json_from(timeout=5)
        assert metrics["type"] == "run.metrics"
        assert (metrics["step"], metrics["policy_version"], metrics["samples"]) == (7, 3, 224)
        assert metrics["values"] == {"policy/entropy": 0.01, "policy/kl": 0.02}
        alert = await ws.receive_json_from(timeout=5)  # entropy 0.01 < default entropy_min 0.05
        assert (alert["type"], alert["kind"], alert["step"]) == ("run.alert", "entropy_collapse", 7)
        assert await ws.receive_nothing(timeout=0.3)
        await ws.disconnect()

    async_to_sync(scenario)()


def test_events_of_other_runs_are_not_sent(users, make_run) -> None:
    watched, other = make_run(name="watched"), make_run(name="other")

    async def scenario() -> None:
        ws = _communicator(users["researcher"], watched.pk)
        assert (await ws.connect())[0]
        await ws.receive_json_from(timeout=5)
        await database_sync_to_async(services.run_launch)(run=other)
        assert await ws.receive_nothing(timeout=0.5)
        await ws.disconnect()

    async_to_sync(scenario)()


@pytest.mark.parametrize(
    ("role", "code"), [("annotator", 4403), ("reviewer", 4403), ("nobody", 4403), (None, 4401)]
)
def test_refused(users, make_run, role, code) -> None:
    run = make_run()

    async def scenario() -> None:
        from django.contrib.auth.models import AnonymousUser

        ws = _communicator(users[role] if role else AnonymousUser(), run.pk)
        connected, close_code = await ws.connect()
        assert not connected and close_code == code

    async_to_sync(scenario)()


def test_unknown_run_is_refused(users, db) -> None:
    async def scenario() -> None:
        ws = _communicator(users["admin"], 987_654)
        connected, close_code = await ws.connect()
        assert not connected and close_code == 4403

    async_to_sync(scenario)()
