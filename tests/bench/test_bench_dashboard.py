"""`bench dashboard` signs its websocket clients in with a stored session (benchmarks/dashboard.py): that
session must be one the real ASGI stack accepts (issue 35 item 6: it named axes' backend, which cannot
load a user, and every handshake got a 500)."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.utils import timezone

from benchmarks.dashboard import signed_in_session
from project.asgi import application
from rl_control.models import Run
from webapp.accounts.roles import Role
from webapp.accounts.services import user_create

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_bench_session_opens_the_run_socket_through_the_real_stack() -> None:
    user = user_create(username="bench-dash", password="bench-pw-1", roles=[Role.RESEARCHER])
    now = timezone.now()
    run = Run.objects.create(
        name="bench-live", status="running", started_at=now, resumed_at=now, created_by=user
    )
    key = signed_in_session("bench-dash", "bench-pw-1")
    async_to_sync(_connects)(f"{settings.SESSION_COOKIE_NAME}={key}", run.pk)


async def _connects(cookie: str, run_id: int) -> None:
    comm = WebsocketCommunicator(
        application,
        f"/ws/rl/runs/{run_id}/",
        headers=[(b"origin", b"http://localhost"), (b"cookie", cookie.encode())],
    )
    connected, code = await comm.connect(timeout=10)
    assert connected, code
    first = await comm.receive_json_from(timeout=10)
    assert first["type"] == "run.status"
    await comm.disconnect()


def test_a_wrong_password_gets_no_session() -> None:
    user_create(username="bench-dash2", password="bench-pw-1", roles=[Role.RESEARCHER])
    with pytest.raises(RuntimeError, match="cannot sign in"):
        signed_in_session("bench-dash2", "wrong")
