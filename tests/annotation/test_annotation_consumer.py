"""The annotation session websocket: who may connect, the state snapshot, pushed events, heartbeats."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.testing import WebsocketCommunicator

from annotation import events
from annotation.models import AnnotationSession
from project.asgi import application
from tests.factories import TaskFactory, TrajectoryFactory

pytestmark = pytest.mark.django_db(transaction=True)


def _session(user) -> AnnotationSession:
    task = TaskFactory()
    return AnnotationSession.objects.create(
        user=user, task=task, trajectory=TrajectoryFactory(task=task, source="annotation", annotator=user),
        status="active", obs_version=3, current_width=160, current_height=210,
    )  # fmt: skip


async def _connect(user, session_id: int) -> tuple[WebsocketCommunicator, bool, int | None]:
    comm = WebsocketCommunicator(
        application, f"/ws/annotation/sessions/{session_id}/", headers=[(b"origin", b"http://localhost")]
    )
    if user is not None:
        comm.scope["user"] = user
    connected, code = await comm.connect()
    return comm, connected, code


def test_owner_gets_state_and_pushed_events(users) -> None:
    async_to_sync(_owner_gets_state_and_pushed_events)(users)


async def _owner_gets_state_and_pushed_events(users) -> None:
    session = await sync_to_async(_session)(users["annotator"])
    comm, connected, _ = await _connect(users["annotator"], session.pk)
    assert connected
    first = await comm.receive_json_from(timeout=5)
    assert first["type"] == "annotation.state" and first["state"]["observation"]["obs_version"] == 3

    session.candidates, session.candidates_status, session.candidates_version = [{"index": 0}], "ready", 3
    payload = events.candidates_payload(session)
    await sync_to_async(events.publish)(session.pk, payload)
    pushed = await comm.receive_json_from(timeout=5)
    assert (
        pushed["type"] == "annotation.candidates"
        and pushed["obs_version"] == 3
        and pushed["candidates"] == [{"index": 0}]
    )

    await comm.send_json_to({"type": "heartbeat", "ping": 7})
    beat = await comm.receive_json_from(timeout=5)
    assert beat == {"type": "heartbeat", "lease": "inactive", "ping": 7}  # no lease on this session
    await comm.send_json_to({"type": "nonsense"})
    assert (await comm.receive_json_from(timeout=5))["type"] == "error"
    await comm.disconnect()


def test_other_users_and_anonymous_are_refused(users) -> None:
    async_to_sync(_other_users_and_anonymous_are_refused)(users)


async def _other_users_and_anonymous_are_refused(users) -> None:
    from django.contrib.auth.models import AnonymousUser

    session = await sync_to_async(_session)(users["annotator"])
    _, connected, code = await _connect(users["annotator2"], session.pk)
    assert not connected and code == 4403
    _, connected, code = await _connect(AnonymousUser(), session.pk)
    assert not connected and code == 4401
    admin, connected, _ = await _connect(users["admin"], session.pk)  # admins may watch
    assert connected
    await admin.disconnect()


def test_candidates_that_arrive_while_the_socket_connects_are_not_lost(users, monkeypatch) -> None:
    async_to_sync(_candidates_while_connecting)(users, monkeypatch)


async def _candidates_while_connecting(users, monkeypatch) -> None:
    """The candidates become ready (stored, then published) right after the consumer's first read of
    the session: the client must see them, in the snapshot or as the event after it."""
    from annotation.consumers import AnnotationSessionConsumer

    session = await sync_to_async(_session)(users["annotator"])
    read = AnnotationSessionConsumer._state
    calls = {"n": 0}

    def state_then_ready(self, user):
        out = read(self, user)
        calls["n"] += 1
        if calls["n"] == 1:
            AnnotationSession.objects.filter(pk=session.pk).update(
                candidates=[{"index": 0}], candidates_status="ready", candidates_version=3
            )
            fresh = AnnotationSession.objects.get(pk=session.pk)
            events.publish(session.pk, events.candidates_payload(fresh))
        return out

    monkeypatch.setattr(AnnotationSessionConsumer, "_state", state_then_ready)
    comm, connected, _ = await _connect(users["annotator"], session.pk)
    assert connected
    first = await comm.receive_json_from(timeout=5)
    assert first["type"] == "annotation.state"
    if first["state"]["candidates"]["status"] != "ready":
        pushed = await comm.receive_json_from(timeout=5)
        assert pushed["type"] == "annotation.candidates" and pushed["candidates"] == [{"index": 0}]
    await comm.disconnect()
