"""Web and API attacks of issue 21 that must now fail (docs/threat-model.md, "Web and API").

Each test is the attack as a caller would run it against the real PostgreSQL and Redis: media without
login or of someone else, path names that climb out of an archive, password guessing, stale and
revoked tokens, NUL bytes, unknown websocket paths, over-large bodies, audio into someone else's
session, oversized import files, the API schema without login.
"""

from __future__ import annotations

import io
import json
import time
from datetime import timedelta

import numpy as np
import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.test import Client, override_settings
from django.utils import timezone
from PIL import Image
from rest_framework.test import APIClient

from annotation.models import AnnotationSession, ThinkAloudRecording
from tests.conftest import PASSWORD
from tests.factories import TaskFactory, TrajectoryFactory
from webapp.accounts.models import ApiToken
from webapp.store import services
from webapp.store.admin import TaskForm, TaskPoolForm
from webapp.store.models import ExportJob, Task, TaskPool
from webapp.store.tasks import export_job_execute
from workers.asr.audio import SAMPLE_RATE, encode_audio

pytestmark = [pytest.mark.django_db, pytest.mark.security]


def _jpeg() -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (8, 8), (200, 10, 10)).save(buf, "JPEG")
    return buf.getvalue()


@pytest.fixture
def media(users):
    """A screenshot of each annotator, one of a trajectory in review, a session screenshot, audio,
    a checkpoint file and the researcher's export archive."""
    task = TaskFactory()
    own = TrajectoryFactory(task=task, source="annotation", annotator=users["annotator"])
    other = TrajectoryFactory(task=task, source="annotation", annotator=users["annotator2"])
    in_review = TrajectoryFactory(
        task=task, source="annotation", annotator=users["annotator2"], review_state="pending"
    )
    shots = {}
    for name, traj in (("own", own), ("other", other), ("in_review", in_review)):
        step = services.step_append(trajectory=traj, screenshot=_jpeg(), fields={"thought": "t"})
        shots[name] = step.screenshot.name
    session = AnnotationSession.objects.create(user=users["annotator2"], task=task, trajectory=other)
    shots["session"] = default_storage.save(f"annotation/s{session.pk}/00001-abc.jpg", ContentFile(_jpeg()))
    shots["audio"] = default_storage.save(f"thinkaloud/s{session.pk}/recording-abc.ogg", ContentFile(b"OggS"))
    shots["checkpoint"] = default_storage.save("checkpoints/sec-test/config.json", ContentFile(b"{}"))
    job = ExportJob.objects.create(created_by=users["researcher"], format="jsonl", filters={})
    export_job_execute(job.pk)
    job.refresh_from_db()
    shots["export"] = job.archive.name
    return shots


def _get(client, name: str):
    return client.get(f"/media/{name}")


def test_anonymous_media_is_refused(media) -> None:
    anonymous = Client(HTTP_ACCEPT="text/html,*/*")  # as a browser asks
    for name in media.values():
        response = _get(anonymous, name)
        assert response.status_code in (401, 403), name
        assert response["Content-Type"].startswith("application/json")


def test_media_follows_who_may_see_the_object(api, media) -> None:
    allowed = {
        "annotator": {"own"},
        "annotator2": {"other", "in_review", "session", "audio"},
        "reviewer": {"in_review"},
        "researcher": {"own", "other", "in_review", "session", "audio", "checkpoint", "export"},
        "admin": {"own", "other", "in_review", "session", "audio", "checkpoint", "export"},
        "nobody": set(),
    }
    for role, names in allowed.items():
        client = api(role)
        for key, name in media.items():
            response = _get(client, name)
            expected = 200 if key in names else 403
            assert response.status_code == expected, (role, key, response.status_code)
            if expected == 200:
                assert b"".join(response.streaming_content)  # the bytes themselves


def test_a_screenshot_reused_by_a_fix_branch_follows_the_branch(api, users, media) -> None:
    """A fix branch copies the steps before the changed one with the original's stored screenshots:
    whoever sees the branch sees them, and still nobody else."""
    reviewer, annotator = api("reviewer"), api("annotator")
    assert _get(reviewer, media["other"]).status_code == 403
    branch = TrajectoryFactory(source="annotation", annotator=users["annotator2"], review_state="pending")
    services.step_append(trajectory=branch, screenshot_name=media["other"], fields={"thought": "copied"})
    assert _get(reviewer, media["other"]).status_code == 200
    assert _get(annotator, media["other"]).status_code == 403


def test_export_archive_of_another_researcher_is_refused(make_user, media) -> None:
    from webapp.accounts.roles import Role

    client = APIClient()
    client.force_authenticate(make_user("res2", Role.RESEARCHER))
    assert _get(client, media["export"]).status_code == 403
    # Its name carries a random token: export-<id>-<format>-<32+ chars>.zip, nothing to guess.
    stem = media["export"].rsplit("/", 1)[-1].removesuffix(".zip")
    assert len(stem.split("-", 3)[-1]) >= 32


def test_media_paths_that_climb_or_hide_are_refused(api, media) -> None:
    client = api("admin")
    for name in ["../settings.py", "screenshots/../../etc/passwd", "screenshots/t1/%00.jpg", "x/y.jpg"]:
        assert client.get(f"/media/{name}").status_code in (400, 403, 404), name


def test_production_media_goes_through_x_accel_redirect(api, media) -> None:
    with override_settings(MEDIA_ACCEL_REDIRECT_PREFIX="/internal-media/"):
        response = _get(api("annotator"), media["own"])
        assert response.status_code == 200
        assert response["X-Accel-Redirect"] == f"/internal-media/{media['own']}"
        assert response.content == b""  # nginx sends the bytes
        assert _get(api("annotator"), media["other"]).status_code == 403


def test_zip_slip_pool_and_task_names_are_refused(api) -> None:
    client = api("admin")
    rows = json.dumps({"id": "ok-1", "instruction": "Click.", "env_kind": "browser"}) + "\n"
    for pool in ["../../etc", "a/b", "a\\b", "x\x01y", "..", ".hidden"]:
        upload = ContentFile(rows.encode(), name="tasks.jsonl")
        response = client.post(
            "/api/tasks/import/", {"pool": pool, "create_pool": True, "file": upload}, format="multipart"
        )
        assert response.status_code == 400, pool
        assert "pool" in response.json(), response.json()
    for task_id in ["../../../../tmp/x", "a/b", "nul\x00x", "tab\tx"]:
        line = json.dumps({"id": task_id, "instruction": "Click.", "env_kind": "browser"}) + "\n"
        upload = ContentFile(line.encode(), name="tasks.jsonl")
        response = client.post(
            "/api/tasks/import/", {"pool": "safe", "create_pool": True, "file": upload}, format="multipart"
        )
        assert response.status_code == 400, task_id
        body = response.json()
        fields = [i["field"] for i in body.get("issues", [])] or list(body)
        assert "external_id" in fields or "file" in fields, body
    assert not TaskPool.objects.exists() and not Task.objects.exists()
    # The admin forms apply the same rule.
    form = TaskPoolForm(data={"name": "../up", "validation_mode": "verifier", "candidates_n": 3})
    assert not form.is_valid() and "name" in form.errors
    pool = TaskPool.objects.create(name="fine")
    form = TaskForm(
        data={"pool": pool.pk, "external_id": "a/../b", "instruction": "x", "env_kind": "browser"}
    )
    assert not form.is_valid() and "external_id" in form.errors


def _fail_login(client: Client, username: str, *, token: bool, ip: str = "10.0.0.1"):
    if token:
        return client.post("/api/auth/token/", {"username": username, "password": "wrong"}, REMOTE_ADDR=ip)
    return client.post("/login/", {"username": username, "password": "wrong"}, REMOTE_ADDR=ip)


@pytest.mark.parametrize("endpoint", ["form", "token"])
def test_password_guessing_is_locked_out(users, settings, endpoint) -> None:
    token = endpoint == "token"
    client = Client()
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        response = _fail_login(client, "res", token=token)
        assert response.status_code in (200, 400), response.status_code
    locked = _fail_login(client, "res", token=token)
    assert locked.status_code == 429
    assert "Too many failed sign-in attempts" in locked.content.decode()
    cooloff = int(settings.AXES_COOLOFF_TIME.total_seconds())
    assert cooloff - 5 <= int(locked["Retry-After"]) <= cooloff  # the time left of the lock
    if token:
        assert locked.json()["detail"].startswith("Too many failed sign-in attempts")
    # The right password does not get through the lock either.
    right = {"username": "res", "password": PASSWORD}
    url = "/api/auth/token/" if token else "/login/"
    assert client.post(url, right, REMOTE_ADDR="10.0.0.1").status_code == 429
    # Another address, or another user from this address, is not locked.
    assert client.post(url, right, REMOTE_ADDR="10.0.0.2").status_code in (200, 302)
    other = {"username": "ann", "password": PASSWORD}
    assert client.post(url, other, REMOTE_ADDR="10.0.0.1").status_code in (200, 302)


def test_tokens_expire_and_can_be_revoked(users, settings) -> None:
    client = APIClient()
    got = client.post("/api/auth/token/", {"username": "res", "password": PASSWORD}, format="json")
    assert got.status_code == 200
    key = got.json()["token"]
    assert got.json()["expires_at"]
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert client.get("/api/me/").status_code == 200
    # Expired: refused with a message; asking again issues a new key.
    ApiToken.objects.filter(pk=got.json()["id"]).update(expires_at=timezone.now() - timedelta(seconds=1))
    expired = client.get("/api/me/")
    assert expired.status_code in (401, 403) and "expired" in expired.json()["detail"]
    fresh = APIClient().post("/api/auth/token/", {"username": "res", "password": PASSWORD}, format="json")
    new_key = fresh.json()["token"]
    assert new_key != key
    # Revoke your own.
    client.credentials(HTTP_AUTHORIZATION=f"Token {new_key}")
    assert client.delete("/api/auth/token/").json() == {"revoked": True}
    assert client.get("/api/me/").status_code in (401, 403)
    # An admin revokes anyone's; others may not.
    again = APIClient().post("/api/auth/token/", {"username": "res", "password": PASSWORD}, format="json")
    victim = APIClient()
    victim.credentials(HTTP_AUTHORIZATION=f"Token {again.json()['token']}")
    annotator = APIClient()
    annotator.force_authenticate(users["annotator"])
    assert annotator.delete(f"/api/auth/tokens/{users['researcher'].pk}/").status_code == 403
    admin = APIClient()
    admin.force_authenticate(users["admin"])
    assert admin.delete(f"/api/auth/tokens/{users['researcher'].pk}/").json() == {"revoked": True}
    assert victim.get("/api/me/").status_code in (401, 403)
    assert admin.delete("/api/auth/tokens/999999/").status_code == 404


def test_nul_bytes_get_a_json_400(api, users) -> None:
    client = api("admin")
    run = client.post("/api/rl/runs/", {"name": "x", "start_checkpoint": "a\x00b"}, format="json")
    assert run.status_code == 400 and "start_checkpoint" in run.json()
    nested = client.post("/api/rl/runs/", {"name": "x", "config": {"a": ["ok", "b\x00"]}}, format="json")
    assert nested.status_code == 400 and "config.a[1]" in nested.json()
    query = client.get("/api/trajectories/", {"task": "a\x00b"})
    assert query.status_code == 400 and query.json() == {"task": ["NUL characters are not allowed."]}
    token = APIClient()
    token.credentials(HTTP_AUTHORIZATION="Token abc\x00def")
    assert token.get("/api/me/").json()["detail"] == "Invalid token."


def test_unknown_websocket_path_is_closed_cleanly() -> None:
    from project.asgi import application

    async def attempt(path: str):
        headers = [(b"origin", b"http://127.0.0.1:8000"), (b"host", b"127.0.0.1")]
        ws = WebsocketCommunicator(application, path, headers=headers)
        connected, code = await ws.connect(timeout=5)
        await ws.disconnect()
        return connected, code

    assert async_to_sync(attempt)("/ws/nope/") == (False, 4404)
    assert async_to_sync(attempt)("/ws/export-jobs/abc/") == (False, 4404)
    assert async_to_sync(attempt)("/elsewhere") == (False, 4404)


def test_over_large_json_body_gets_a_json_413(api) -> None:
    big = json.dumps({"name": "x", "notes": "a" * 3_000_000})
    response = api("admin").post("/api/rl/runs/", big, content_type="application/json")
    assert response.status_code == 413
    assert response["Content-Type"] == "application/json"
    assert "too large" in response.json()["detail"]


def _tone() -> bytes:
    t = np.arange(SAMPLE_RATE) / SAMPLE_RATE
    return encode_audio((0.2 * np.sin(2 * np.pi * 440 * t)).astype(np.float32), "webm")


def test_audio_only_from_the_sessions_annotator_and_only_audio(api, users) -> None:
    task = TaskFactory()
    traj = TrajectoryFactory(task=task, source="annotation", annotator=users["annotator"])
    session = AnnotationSession.objects.create(
        user=users["annotator"], task=task, trajectory=traj, status="active", clock_origin=time.time() - 60
    )
    url = f"/api/annotation/sessions/{session.pk}/thinkaloud/chunks/0/?start_clock=1"
    by_admin = api("admin").put(url, data=_tone(), content_type="audio/webm")
    assert by_admin.status_code == 403 and "annotator" in by_admin.json()["detail"]
    finish = api("admin").post(f"/api/annotation/sessions/{session.pk}/thinkaloud/finish/")
    assert finish.status_code == 403
    not_audio = api("annotator").put(url, data=b"GIF89a" + b"\x00" * 500, content_type="audio/webm")
    assert not_audio.status_code == 400 and "not playable audio" in not_audio.json()["detail"]
    assert not ThinkAloudRecording.objects.filter(session=session).exists()  # no empty row left
    assert api("annotator").put(url, data=_tone(), content_type="audio/webm").status_code == 201


def test_single_import_file_over_the_per_file_limit_is_refused(api, settings) -> None:
    settings.TASK_IMPORT_MAX_FILE_BYTES = 20 * 1024
    line = json.dumps({"id": "big", "instruction": "x" * 100, "env_kind": "browser"}) + "\n"
    data = (line * (30 * 1024 // len(line) + 1)).encode()  # 30 KiB against a 20 KiB limit
    upload = ContentFile(data, name="tasks.jsonl")
    response = api("admin").post(
        "/api/tasks/import/", {"pool": "p", "create_pool": True, "file": upload}, format="multipart"
    )
    assert response.status_code == 413, response.content
    assert "per-file limit" in response.json()["detail"]
    assert not TaskPool.objects.exists()


def test_schema_and_docs_need_a_login(api) -> None:
    anonymous = Client()
    assert anonymous.get("/api/schema/").status_code in (401, 403)
    docs = anonymous.get("/api/docs/")
    assert docs.status_code == 302 and docs["Location"].startswith("/login/")
    assert anonymous.get("/api/redoc/").status_code == 302
    assert api("annotator").get("/api/schema/").status_code == 200
