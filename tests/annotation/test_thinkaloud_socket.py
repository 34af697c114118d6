"""The workspace websocket forwards think-aloud events: an edited thought reaches the open page."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.testing import WebsocketCommunicator

from annotation.models import AnnotationSession
from annotation.thinkaloud import services
from project.asgi import application
from tests.factories import StepFactory, TaskFactory, TrajectoryFactory

pytestmark = pytest.mark.django_db(transaction=True)


def _session(user) -> AnnotationSession:
    task = TaskFactory()
    traj = TrajectoryFactory(task=task, source="annotation", annotator=user)
    StepFactory(trajectory=traj, index=0, clock_start=1.0, clock_end=4.0, human_thought_verbatim="open it")
    return AnnotationSession.objects.create(user=user, task=task, trajectory=traj, status="active")


def test_thinkaloud_event_reaches_the_workspace(users) -> None:
    async_to_sync(_event_reaches_the_workspace)(users)


async def _event_reaches_the_workspace(users) -> None:
    session = await sync_to_async(_session)(users["annotator"])
    comm = WebsocketCommunicator(
        application, f"/ws/annotation/sessions/{session.pk}/", headers=[(b"origin", b"http://localhost")]
    )
    comm.scope["user"] = users["annotator"]
    connected, _ = await comm.connect()
    assert connected
    assert (await comm.receive_json_from(timeout=5))["type"] == "annotation.state"
    await sync_to_async(services.step_thought_edit)(session=session, step_index=0, text="I open it.")
    pushed = await comm.receive_json_from(timeout=5)
    assert pushed["type"] == "annotation.thinkaloud" and pushed["session_id"] == session.pk
    [step] = pushed["state"]["steps"]
    assert step["refined"] == "I open it." and step["verbatim"] == "open it" and step["edited"] is True
    await comm.disconnect()
