"""Assignment queues: admins assign a pool to annotators on a track, annotators get the tasks the model
fails most first, skip what they cannot do; admins see who works on what (API and Django admin)."""

from __future__ import annotations

import pytest
from django.test import Client

from annotation.models import AnnotationSession, Assignment
from tests.factories import TaskFactory, TaskPoolFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def pool():
    pool = TaskPoolFactory(name="web-basics")
    TaskFactory(pool=pool, external_id="easy", success_rate=0.9, importance=1.0)
    TaskFactory(pool=pool, external_id="hard", success_rate=0.1, importance=1.0)
    TaskFactory(pool=pool, external_id="mid-important", success_rate=0.5, importance=5.0)
    TaskFactory(pool=pool, external_id="mid", success_rate=0.5, importance=1.0)
    TaskFactory(pool=pool, external_id="off", enabled=False)
    return pool


def test_admin_assigns_a_pool_and_the_queue_puts_model_failures_first(api, users, pool) -> None:
    body = {"pool": pool.pk, "users": ["ann", "ann2"], "track": "novice"}
    made = api("admin").post("/api/annotation/assignments/", body, format="json")
    assert made.status_code == 201, made.content
    assert made.json() == {"created": 8, "existing": 0, "annotators": 2, "tasks": 4}  # not the disabled one
    again = api("admin").post("/api/annotation/assignments/", body, format="json").json()
    assert again["created"] == 0 and again["existing"] == 8  # idempotent

    queue = api("annotator").get("/api/annotation/assignments/").json()
    assert [a["task_external_id"] for a in queue] == ["hard", "mid-important", "mid", "easy"]
    assert {a["track"] for a in queue} == {"novice"} and {a["username"] for a in queue} == {"ann"}
    # the rate comes with the number of finished episodes behind it (the page shows "—" for none)
    assert {a["attempts"] for a in queue} == {0}

    # Skipping takes a task out of the queue; someone else's assignment is not found.
    hard = queue[0]["id"]
    assert api("annotator2").post(f"/api/annotation/assignments/{hard}/skip/").status_code == 404
    assert api("annotator").post(f"/api/annotation/assignments/{hard}/skip/").json()["status"] == "skipped"
    queue = api("annotator").get("/api/annotation/assignments/").json()
    assert queue[0]["task_external_id"] == "mid-important"

    everyone = api("admin").get(f"/api/annotation/assignments/?pool={pool.pk}&status=assigned").json()
    assert len(everyone) == 7 and {a["username"] for a in everyone} == {"ann", "ann2"}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"users": ["ghost"]}, "unknown users: ghost"),
        ({"users": ["rev"]}, "not annotators: rev"),
        ({"users": ["ann"], "tasks": [999999]}, "not in pool"),
        ({"users": ["ann"], "track": "wizard"}, "track"),
        ({"users": []}, "users"),
    ],
)
def test_bad_assignments_are_refused_whole(api, users, pool, body, message) -> None:
    response = api("admin").post("/api/annotation/assignments/", {"pool": pool.pk, **body}, format="json")
    assert response.status_code == 400 and message in response.content.decode()
    assert Assignment.objects.count() == 0


def test_roles(api, users, pool) -> None:
    body = {"pool": pool.pk, "users": ["ann"]}
    for role in ("annotator", "reviewer", "researcher", None):
        assert api(role).post("/api/annotation/assignments/", body, format="json").status_code in (401, 403)
    for role in ("reviewer", "researcher", None):
        assert api(role).get("/api/annotation/assignments/").status_code in (401, 403)
    assert api("annotator").get("/api/annotation/workload/").status_code == 403
    assert api("admin").get("/api/annotation/assignments/?pool=x").status_code == 400


def test_admin_sees_who_works_on_what(api, users, pool) -> None:
    api("admin").post("/api/annotation/assignments/", {"pool": pool.pk, "users": ["ann"]}, format="json")
    task = pool.tasks.get(external_id="hard")
    AnnotationSession.objects.create(user=users["annotator"], task=task, status="active")
    workload = {w["username"]: w for w in api("admin").get("/api/annotation/workload/").json()}
    assert workload["ann"]["assignments"] == {"assigned": 4}
    assert [s["task_external_id"] for s in workload["ann"]["active_sessions"]] == ["hard"]

    client = Client()
    client.force_login(users["admin"])
    for name in ("assignment", "annotationsession", "review", "thinkaloudrecording"):
        page = client.get(f"/admin/annotation/{name}/")
        assert page.status_code == 200, name
    page = client.get("/admin/annotation/assignment/?track__exact=expert&q=hard")
    assert page.status_code == 200 and "hard" in page.content.decode()
    ids = list(Assignment.objects.values_list("pk", flat=True))
    client.post("/admin/annotation/assignment/", {"action": "to_novice", "_selected_action": ids})
    assert set(Assignment.objects.values_list("track", flat=True)) == {"novice"}
