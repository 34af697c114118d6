"""Store API: every endpoint for allowed and forbidden roles, filters, pagination, streamed export."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import async_to_sync

from annotation.models import Assignment, Review
from tests.factories import StepFactory, TaskFactory, TaskPoolFactory, TrajectoryFactory
from webapp.store import services
from webapp.store.export.stream import aiter_sync, iter_jsonl_chunks
from webapp.store.models import ExportJob, Trajectory

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(users):
    """Two tasks; trajectories of the annotator, of another annotator, in review, and from RL."""
    t1 = TaskFactory(external_id="click-test")
    t2 = TaskFactory(external_id="enter-text", pool=t1.pool)
    Assignment.objects.create(user=users["annotator"], task=t1)
    own = TrajectoryFactory(task=t1, source="annotation", annotator=users["annotator"])
    other = TrajectoryFactory(task=t1, source="annotation", annotator=users["annotator2"])
    in_review = TrajectoryFactory(
        task=t2, source="annotation", annotator=users["annotator2"], review_state="pending"
    )
    rl = TrajectoryFactory(task=t2, source="rl", final_reward=1.0, status="completed")
    for traj in (own, other, in_review, rl):
        for i in range(3):
            StepFactory(trajectory=traj, index=i)
    return {"t1": t1, "t2": t2, "own": own, "other": other, "in_review": in_review, "rl": rl}


def ids(response) -> set[int]:
    return {row["id"] for row in response.json()["results"]}


def test_anonymous_is_refused_everywhere(api, world) -> None:
    for url in [
        "/api/me/",
        "/api/pools/",
        "/api/tasks/",
        "/api/trajectories/",
        "/api/export-jobs/",
        "/api/checkpoints/",
        f"/api/trajectories/{world['own'].pk}/",
        "/api/trajectories/export",
    ]:
        assert api(None).get(url).status_code in (401, 403), url


def test_user_without_role_is_refused(api, world) -> None:
    for url in ["/api/tasks/", "/api/trajectories/", "/api/export-jobs/", "/api/pools/"]:
        assert api("nobody").get(url).status_code == 403, url
    assert api("nobody").get("/api/me/").json()["roles"] == []


def test_me_lists_roles(api, users) -> None:
    assert api("researcher").get("/api/me/").json() == {"username": "res", "roles": ["researcher"]}


def test_annotator_sees_only_own_trajectories_and_assigned_tasks(api, world) -> None:
    assert ids(api("annotator").get("/api/trajectories/")) == {world["own"].pk}
    assert {t["external_id"] for t in api("annotator").get("/api/tasks/").json()["results"]} == {"click-test"}
    assert api("annotator").get(f"/api/trajectories/{world['other'].pk}/").status_code == 404
    assert api("annotator").get(f"/api/trajectories/{world['own'].pk}/").status_code == 200


def test_reviewer_sees_review_queue_and_own_reviews(api, users, world) -> None:
    assert ids(api("reviewer").get("/api/trajectories/")) == {world["in_review"].pk}
    Review.objects.create(trajectory=world["rl"], reviewer=users["reviewer"])
    assert ids(api("reviewer").get("/api/trajectories/")) == {world["in_review"].pk, world["rl"].pk}


@pytest.mark.parametrize("role", ["researcher", "admin"])
def test_researcher_and_admin_see_everything(api, world, role) -> None:
    assert ids(api(role).get("/api/trajectories/")) == {
        world[k].pk for k in ("own", "other", "in_review", "rl")
    }


def test_trajectory_filters(api, world) -> None:
    client = api("researcher")
    assert ids(client.get("/api/trajectories/", {"source": "rl"})) == {world["rl"].pk}
    assert ids(client.get("/api/trajectories/", {"task_external_id": "enter-text"})) == {
        world["in_review"].pk, world["rl"].pk}  # fmt: skip
    assert ids(client.get("/api/trajectories/", {"review_state": "pending"})) == {world["in_review"].pk}
    services.trajectory_validate(trajectory=world["rl"], value=1, validator="verifier")
    assert ids(client.get("/api/trajectories/", {"validation": 1, "route": "sft"})) == {world["rl"].pk}
    assert client.get("/api/trajectories/", {"source": "bogus"}).status_code == 400


def test_cursor_pagination_walks_every_row(api, world) -> None:
    client = api("admin")
    seen: list[int] = []
    url: str | None = "/api/trajectories/?page_size=1"
    while url:
        body = client.get(url).json()
        seen += [row["id"] for row in body["results"]]
        url = body["next"]
    assert sorted(seen) == sorted(Trajectory.objects.values_list("id", flat=True))
    assert len(seen) == len(set(seen))


def test_trajectory_detail_has_steps_with_screenshot_urls(api, world) -> None:
    traj = services.trajectory_create(task=world["t1"], source="rl")
    services.step_append(trajectory=traj, screenshot=b"\xff\xd8fakejpeg", fields={"thought": "go"})
    body = api("researcher").get(f"/api/trajectories/{traj.pk}/").json()
    assert [s["index"] for s in body["steps"]] == [0]
    assert body["steps"][0]["screenshot"].startswith("http://testserver/media/screenshots/")


def test_task_patch_is_admin_only_and_rescores(api, world) -> None:
    url = f"/api/tasks/{world['t1'].pk}/"
    assert api("researcher").patch(url, {"enabled": False}, format="json").status_code == 403
    response = api("admin").patch(url, {"difficulty_steps": 15, "difficulty_cross_page": True}, format="json")
    assert response.status_code == 200
    assert response.json()["difficulty"] == pytest.approx(0.4 * 15 / 30 + 0.2)


def _stream(response) -> list[dict]:
    body = b"".join(response.streaming_content)
    return [json.loads(line) for line in body.decode().splitlines()]


def test_streamed_export_is_researcher_and_admin_only(api, world) -> None:
    for role in ("annotator", "reviewer", "nobody"):
        assert api(role).get("/api/trajectories/export").status_code == 403, role
    records = _stream(api("researcher").get("/api/trajectories/export", {"format": "jsonl", "source": "rl"}))
    assert [r["id"] for r in records] == [world["rl"].pk]
    assert [s["index"] for s in records[0]["steps"]] == [0, 1, 2]
    assert records[0]["task"] == "enter-text" and records[0]["final_reward"] == 1.0


def test_streamed_export_rejects_archive_formats_and_bad_filters(api, world) -> None:
    response = api("researcher").get("/api/trajectories/export", {"format": "verl"})
    assert response.status_code == 400 and "export-jobs" in json.dumps(response.json())
    assert (
        api("researcher").get("/api/trajectories/export", {"created_after": "not-a-date"}).status_code == 400
    )


def test_export_includes_trajectories_without_steps(world) -> None:
    empty = TrajectoryFactory(task=world["t1"])
    lines = b"".join(iter_jsonl_chunks(Trajectory.objects.filter(pk=empty.pk))).decode().splitlines()
    assert json.loads(lines[0])["steps"] == []


def test_async_stream_yields_same_bytes_as_sync(world) -> None:
    qs = Trajectory.objects.all()
    sync_bytes = b"".join(iter_jsonl_chunks(qs))

    async def collect() -> bytes:
        return b"".join([chunk async for chunk in aiter_sync(iter_jsonl_chunks(qs))])

    assert async_to_sync(collect)() == sync_bytes


def test_export_job_api_roles_and_validation(api, world, django_capture_on_commit_callbacks) -> None:
    assert api("annotator").post("/api/export-jobs/", {"format": "jsonl"}, format="json").status_code == 403
    bad = api("researcher").post("/api/export-jobs/", {"format": "pdf"}, format="json")
    assert bad.status_code == 400 and "format" in bad.json()
    bad_filter = api("researcher").post(
        "/api/export-jobs/", {"format": "jsonl", "filters": {"source": "nope"}}, format="json"
    )
    assert bad_filter.status_code == 400
    assert ExportJob.objects.count() == 0


def test_export_job_is_visible_to_owner_and_admin_only(api, users, world) -> None:
    job = ExportJob.objects.create(created_by=users["researcher"], format="jsonl")
    assert api("researcher").get(f"/api/export-jobs/{job.pk}/").status_code == 200
    assert api("admin").get(f"/api/export-jobs/{job.pk}/").status_code == 200
    other = users["researcher"].__class__.objects.get(username="adm")
    assert other  # admin exists
    from webapp.accounts.roles import Role
    from webapp.accounts.services import user_create

    second = user_create(username="res2", password="x-pass-123", roles=[Role.RESEARCHER])
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(second)
    assert client.get(f"/api/export-jobs/{job.pk}/").status_code == 404
    assert api("researcher").get(f"/api/export-jobs/{job.pk}/download/").status_code == 400


def test_checkpoints_list(api, world) -> None:
    from webapp.store.models import Checkpoint

    Checkpoint.objects.create(version="v1", path="checkpoints/v1")
    assert [c["version"] for c in api("researcher").get("/api/checkpoints/").json()["results"]] == ["v1"]
    assert api("nobody").get("/api/checkpoints/").status_code == 403


def test_openapi_schema_and_swagger(client, users) -> None:
    client.force_login(users["annotator"])
    assert client.get("/api/schema/").status_code == 200
    for page in ("/api/docs/", "/api/redoc/"):
        html = client.get(page).content.decode()
        # Swagger UI / ReDoc from the project's own static files (drf-spectacular-sidecar), no CDN.
        assert "/static/drf_spectacular_sidecar/" in html and "cdn." not in html, page


def test_sql_and_python_export_paths_agree(world) -> None:
    """The database-built lines and the Python records must describe trajectories identically."""
    from datetime import datetime

    from webapp.store.export.stream import iter_jsonl_chunks_python, iter_jsonl_chunks_sql, media_url_builder

    traj = services.trajectory_create(task=world["t1"], source="annotation", policy_version="v7",
                                      metadata={"note": "ünïcode ✓"})  # fmt: skip
    services.step_append(
        trajectory=traj,
        screenshot=b"\xff\xd8x",
        fields={"thought": 'say "hi"\nnow', "candidates": [{"thought": "a", "logprob": -0.5}], "reward": 0.25,
                "executed_points": [[1.5, 2]], "rl": {"value": 0.1}, "human_words": [{"w": "go", "start": 1.0}]},
    )  # fmt: skip
    services.step_append(trajectory=traj, fields={"thought": "no screenshot"})
    services.trajectory_finish(trajectory=traj, status="completed", final_reward=1.0)
    qs = Trajectory.objects.all()
    base = media_url_builder()("")
    sql_lines = b"".join(iter_jsonl_chunks_sql(qs, media_base=base)).decode().splitlines()
    py_lines = b"".join(iter_jsonl_chunks_python(qs)).decode().splitlines()

    def norm(record: dict) -> dict:
        for key in ("created_at", "finished_at"):
            if record[key] is not None:
                record[key] = datetime.fromisoformat(record[key])
        return record

    assert [norm(json.loads(x)) for x in sql_lines] == [norm(json.loads(x)) for x in py_lines]
    assert len(sql_lines) == Trajectory.objects.count()
    # rewards are floats in both (PostgreSQL alone writes 1.0 as `1`, which reads back as an int)
    for lines in (sql_lines, py_lines):
        (record,) = [r for r in map(json.loads, lines) if r["id"] == traj.pk]
        assert type(record["final_reward"]) is float and record["final_reward"] == 1.0
        assert [type(s["reward"]) for s in record["steps"]] == [float, float]


def test_pools_list_the_kinds_of_the_tasks_a_run_would_play(api, users) -> None:
    """The launch form takes env.kind from these: enabled, supported tasks only; task_count is all."""
    pool = TaskPoolFactory(name="kinds")
    TaskFactory.create_batch(2, pool=pool, env_kind="desktop")
    TaskFactory(pool=pool, env_kind="terminal")
    TaskFactory(pool=pool, env_kind="browser", enabled=False)
    TaskFactory(pool=pool, env_kind="phone", supported=False)
    TaskPoolFactory(name="kinds-empty")
    rows = {row["name"]: row for row in api("researcher").get("/api/pools/").json()["results"]}
    assert rows["kinds"]["env_kinds"] == ["desktop", "terminal"] and rows["kinds"]["task_count"] == 5
    assert rows["kinds-empty"]["env_kinds"] == [] and rows["kinds-empty"]["task_count"] == 0
