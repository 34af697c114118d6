"""Issue 30, finding 7: deeply nested JSON (`[`×1000, 2 KB) answered 500 (RecursionError), even
anonymously. Every way JSON comes in — a request body, an uploaded task file, a websocket message —
now refuses it before parsing, with the reason."""

from __future__ import annotations

import json

import httpx
import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.testing import WebsocketCommunicator
from django.core.files.base import ContentFile
from rest_framework.test import APIClient

from annotation.models import AnnotationSession
from tests.factories import TaskFactory, TrajectoryFactory
from workers.json_input import MAX_DEPTH, json_loads

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.security]

DEEP = "[" * 1000 + "]" * 1000


def _refused(response) -> str:
    assert response.status_code == 400, (response.status_code, response.content[:300])
    return json.dumps(response.json())


def test_nested_json_body_gets_400_anonymously_and_signed_in(api, users) -> None:
    anonymous = APIClient()
    body = _refused(anonymous.post("/api/auth/token/", DEEP, content_type="application/json"))
    assert f"nested deeper than {MAX_DEPTH} levels" in body
    annotator = api("annotator")
    _refused(annotator.post("/api/annotation/sessions/", DEEP, content_type="application/json"))
    wrapped = '{"task": 1, "x": ' + DEEP + "}"
    assert "nested deeper" in _refused(
        annotator.post("/api/annotation/sessions/", wrapped, content_type="application/json")
    )
    # Brackets inside strings are text, not nesting; a normal body still parses.
    fine = json.dumps({"username": "[" * 1000, "password": "{" * 1000})
    assert anonymous.post("/api/auth/token/", fine, content_type="application/json").status_code == 400


def test_nested_json_in_an_import_file_is_an_issue_not_a_500(api) -> None:
    admin = api("admin")
    line = '{"id": "deep", "instruction": "x", "env_kind": "browser", "setup": ' + DEEP + "}\n"
    for name, data in (("tasks.jsonl", line), ("task.json", DEEP)):
        for url in ("/api/tasks/import/preview/", "/api/tasks/import/"):
            upload = ContentFile(data.encode(), name=name)
            fmt = "osworld" if name.endswith(".json") else "jsonl"
            response = admin.post(
                url, {"pool": "p", "create_pool": True, "format": fmt, "file": upload}, format="multipart"
            )
            assert response.status_code in (200, 400), (url, name, response.status_code)
            assert "nested deeper" in json.dumps(response.json()), response.json()


def test_nested_json_websocket_message_gets_an_error_and_the_socket_stays(users) -> None:
    async_to_sync(_websocket)(users)


async def _websocket(users) -> None:
    from project.asgi import application

    def session() -> AnnotationSession:
        task = TaskFactory()
        traj = TrajectoryFactory(task=task, source="annotation", annotator=users["annotator"])
        return AnnotationSession.objects.create(user=users["annotator"], task=task, trajectory=traj)

    made = await sync_to_async(session)()
    comm = WebsocketCommunicator(
        application, f"/ws/annotation/sessions/{made.pk}/", headers=[(b"origin", b"http://localhost")]
    )
    comm.scope["user"] = users["annotator"]
    assert (await comm.connect())[0]
    await comm.receive_json_from(timeout=5)  # the state snapshot
    for bad in (DEEP, "{not json", "x" * 100_000):
        await comm.send_to(text_data=bad)
        reply = await comm.receive_json_from(timeout=5)
        assert reply["type"] == "error" and "not valid JSON" in reply["detail"], reply
    await comm.send_json_to({"type": "state"})
    assert (await comm.receive_json_from(timeout=5))["type"] == "annotation.state"  # still open
    await comm.disconnect()


def test_json_loads_counts_nesting_outside_strings_only() -> None:
    assert json_loads('["[[[[", "\\"[[[["]') == ["[[[[", '"[[[[']
    assert json_loads("[" * MAX_DEPTH + "]" * MAX_DEPTH) is not None
    with pytest.raises(json.JSONDecodeError, match="nested deeper"):
        json_loads("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1))
    with pytest.raises(json.JSONDecodeError, match="longer than"):
        json_loads("[1, 2, 3]", max_chars=4)


def test_nested_json_to_a_policy_server_gets_400(tmp_path) -> None:
    from webapp.store.checkpoints import checkpoint_create_initial, checkpoint_dir
    from workers.policy.embedded.policy import EmbeddedPolicy
    from workers.policy.server import start_server

    checkpoint = checkpoint_dir(checkpoint_create_initial(version="deep-json"))
    server, _ = start_server(EmbeddedPolicy.from_pretrained(checkpoint), checkpoint=str(checkpoint))
    try:
        body = '{"model": "x", "messages": ' + DEEP + "}"
        response = httpx.post(server.url + "/v1/chat/completions", content=body, timeout=30)
        assert response.status_code == 400, response.text
        assert "nested deeper" in response.json()["error"]["message"]
    finally:
        server.shutdown()
        server.server_close()
