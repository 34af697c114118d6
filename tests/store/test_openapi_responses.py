"""The OpenAPI schema agrees with what the API answers: real responses of the main endpoints
(store, RL runs, annotation, review, errors) validate against the schema drf-spectacular generates,
nullable fields included."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
from drf_spectacular.generators import SchemaGenerator

from annotation.models import AnnotationSession
from tests.factories import StepFactory, TaskFactory, TaskPoolFactory, TrajectoryFactory
from webapp.store.models import Checkpoint

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def openapi() -> dict[str, Any]:
    return SchemaGenerator().get_schema(request=None, public=True)


def _json_schema(node: Any) -> Any:
    """OpenAPI 3.0 → JSON Schema: `nullable: true` becomes "or null"."""
    if isinstance(node, list):
        return [_json_schema(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: _json_schema(v) for k, v in node.items() if k != "nullable"}
    if node.get("nullable"):
        return {"anyOf": [out, {"type": "null"}]}
    return out


def check(openapi: dict[str, Any], path: str, method: str, response: Any) -> None:
    """Validate `response` against the schema of `path` / `method` / its status code."""
    operation = openapi["paths"][path][method]
    declared = operation["responses"].get(str(response.status_code))
    assert declared is not None, f"{method.upper()} {path} does not declare {response.status_code}"
    schema = declared["content"]["application/json"]["schema"]
    root = {**_json_schema(schema), "components": _json_schema(openapi["components"])}
    jsonschema.Draft202012Validator(root).validate(response.json())


def test_store_responses_match_the_schema(openapi, api, users) -> None:
    task = TaskFactory()
    parent = Checkpoint.objects.create(version="v0")
    Checkpoint.objects.create(version="v1", parent=parent)
    nulls = TrajectoryFactory(task=task, status="completed")  # no checkpoint, no annotator
    full = TrajectoryFactory(
        task=task, annotator=users["annotator"], checkpoint=parent, instruction="Episode."
    )
    StepFactory(trajectory=full, index=0)
    client = api("researcher")
    check(openapi, "/api/trajectories/", "get", client.get("/api/trajectories/"))
    for t in (nulls, full):
        check(openapi, "/api/trajectories/{id}/", "get", client.get(f"/api/trajectories/{t.pk}/"))
    assert client.get(f"/api/trajectories/{full.pk}/").json()["instruction"] == "Episode."
    check(openapi, "/api/checkpoints/", "get", client.get("/api/checkpoints/"))
    check(openapi, "/api/pools/", "get", client.get("/api/pools/"))
    check(openapi, "/api/tasks/", "get", client.get("/api/tasks/"))
    check(openapi, "/api/trajectories/", "get", api("annotator").get("/api/trajectories/?limit=x"))
    forbidden = api("nobody").get("/api/checkpoints/")
    assert forbidden.status_code == 403
    check(openapi, "/api/checkpoints/", "get", forbidden)


def test_run_responses_match_the_schema(openapi, api, users) -> None:
    pool = TaskPoolFactory()
    TaskFactory.create_batch(2, pool=pool, env_kind="browser")
    client = api("researcher")
    refused = client.post("/api/rl/runs/", {"name": "no pool"}, format="json")
    assert refused.status_code == 400
    check(openapi, "/api/rl/runs/", "post", refused)
    created = client.post(
        "/api/rl/runs/", {"name": "r1", "preset": "grpo-dart", "pool": pool.pk}, format="json"
    )
    assert created.status_code == 201, created.content
    check(openapi, "/api/rl/runs/", "post", created)
    assert created.json()["start_checkpoint"] is None  # nullable, and declared so
    check(openapi, "/api/rl/runs/", "get", client.get("/api/rl/runs/"))
    check(openapi, "/api/rl/presets/", "get", client.get("/api/rl/presets/"))
    check(openapi, "/api/rl/config-schema/", "get", client.get("/api/rl/config-schema/"))
    listed = client.get("/api/rl/runs/").json()["results"][0]
    assert isinstance(listed["alerts"], dict) and listed["alerts"]["count"] == 0
    schema = openapi["paths"]["/api/rl/runs/"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    body = openapi["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    assert (
        "name" in body["required"] and "required unless" in body["properties"]["pool"]["description"].lower()
    )


def test_annotation_and_review_responses_match_the_schema(openapi, api, users) -> None:
    task = TaskFactory()
    t = TrajectoryFactory(task=task, source="annotation", annotator=users["annotator"], status="completed",
                          review_state="pending")  # fmt: skip
    StepFactory(trajectory=t, index=0)
    session = AnnotationSession.objects.create(
        user=users["annotator"], task=task, trajectory=t, status="submitted"
    )
    annotator = api("annotator")
    check(openapi, "/api/annotation/sessions/", "get", annotator.get("/api/annotation/sessions/"))
    check(
        openapi,
        "/api/annotation/sessions/{id}/",
        "get",
        annotator.get(f"/api/annotation/sessions/{session.pk}/"),
    )
    check(openapi, "/api/annotation/fixes/", "get", annotator.get("/api/annotation/fixes/"))
    check(openapi, "/api/annotation/fixes/{id}/", "get", annotator.get(f"/api/annotation/fixes/{t.pk}/"))
    conflict = annotator.post(f"/api/annotation/fixes/{t.pk}/resubmit/")
    assert conflict.status_code == 409
    check(openapi, "/api/annotation/fixes/{id}/resubmit/", "post", conflict)
    reviewer = api("reviewer")
    check(openapi, "/api/review/queue/", "get", reviewer.get("/api/review/queue/"))
    taken = reviewer.post("/api/review/take/", {}, format="json")
    check(openapi, "/api/review/take/", "post", taken)
    check(openapi, "/api/review/trajectories/{id}/", "get", reviewer.get(f"/api/review/trajectories/{t.pk}/"))
    refused = reviewer.post(f"/api/review/reviews/{taken.json()['review_id']}/submit/", {"verdict": "maybe"},
                            format="json")  # fmt: skip
    assert refused.status_code == 400
    check(openapi, "/api/review/reviews/{id}/submit/", "post", refused)
    check(openapi, "/api/annotation/sessions/", "get", api("reviewer").get("/api/annotation/sessions/"))


def test_schema_generation_has_no_warnings(tmp_path) -> None:
    """`manage.py spectacular --validate --fail-on-warn`: every view declares its request and
    response, enum names are settled (ENUM_NAME_OVERRIDES), no operation id collides."""
    from django.core.management import call_command

    out = tmp_path / "schema.yaml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(out))
    assert out.stat().st_size > 10_000


def test_the_declared_annotation_review_and_flywheel_responses_match(openapi, api, users, make_user) -> None:
    """The responses declared with their own serializers (no longer free-form objects) validate:
    the whole review round of two reviewers, the fix loop, assignments, workload, the session's
    heartbeat, and the flywheel's reads and validate."""
    from rest_framework.test import APIClient

    from tests.annotation.test_review_workflow import approve_all, submitted
    from webapp.accounts.roles import Role

    second = APIClient()
    second.force_authenticate(make_user("rev2", Role.REVIEWER))
    t = submitted(annotator=users["annotator"], steps=2)
    session = AnnotationSession.objects.get(trajectory=t)
    reviewer = api("reviewer")
    c = lambda path, method, response: check(openapi, path, method, response)  # noqa: E731
    taken = reviewer.post("/api/review/take/", {"trajectory": t.pk}, format="json")
    c("/api/review/take/", "post", taken)
    c("/api/review/queue/", "get", reviewer.get("/api/review/queue/"))
    c("/api/review/trajectories/{id}/", "get", reviewer.get(f"/api/review/trajectories/{t.pk}/"))
    c(
        "/api/review/trajectories/{id}/duplicates/",
        "get",
        reviewer.get(f"/api/review/trajectories/{t.pk}/duplicates/"),
    )
    c("/api/review/trajectories/{id}/executability/", "get",
      reviewer.get(f"/api/review/trajectories/{t.pk}/executability/"))  # fmt: skip
    fix = approve_all(2)
    fix[1] = {
        "index": 1,
        "verdict": "fix",
        "comment": "aim lower",
        "action_text": "click(start_box='(40,180)')",
    }
    done = reviewer.post(f"/api/review/reviews/{taken.json()['review_id']}/submit/",
                         {"verdict": "fix", "step_verdicts": fix}, format="json")  # fmt: skip
    assert done.status_code == 200, done.content
    c("/api/review/reviews/{id}/submit/", "post", done)
    r2 = second.post("/api/review/take/", {"trajectory": t.pk}, format="json").json()["review_id"]
    second.post(f"/api/review/reviews/{r2}/submit/", {"verdict": "approve", "step_verdicts": approve_all(2)},
                format="json")  # fmt: skip
    c(
        "/api/review/trajectories/{id}/agreement/",
        "get",
        reviewer.get(f"/api/review/trajectories/{t.pk}/agreement/"),
    )

    annotator = api("annotator")
    c("/api/annotation/fixes/", "get", annotator.get("/api/annotation/fixes/"))
    c("/api/annotation/fixes/{id}/", "get", annotator.get(f"/api/annotation/fixes/{t.pk}/"))
    edited = annotator.patch(f"/api/annotation/fixes/{t.pk}/steps/1/", {"thought": "Lower."}, format="json")
    c("/api/annotation/fixes/{id}/steps/{index}/", "patch", edited)
    c(
        "/api/annotation/fixes/{id}/resubmit/",
        "post",
        annotator.post(f"/api/annotation/fixes/{t.pk}/resubmit/"),
    )
    c("/api/annotation/sessions/{id}/heartbeat/", "post",
      annotator.post(f"/api/annotation/sessions/{session.pk}/heartbeat/"))  # fmt: skip
    c("/api/annotation/assignments/", "get", annotator.get("/api/annotation/assignments/"))
    admin = api("admin")
    assigned = admin.post("/api/annotation/assignments/",
                          {"pool": t.task.pool_id, "users": ["ann"]}, format="json")  # fmt: skip
    c("/api/annotation/assignments/", "post", assigned)
    c("/api/annotation/workload/", "get", admin.get("/api/annotation/workload/"))

    researcher = api("researcher")
    for path in ("/api/flywheel/overview/", "/api/flywheel/datasets/", "/api/flywheel/jobs/"):
        c(path, "get", researcher.get(path))
    pool = t.task.pool_id
    c(
        "/api/flywheel/pools/{id}/validation/",
        "get",
        researcher.get(f"/api/flywheel/pools/{pool}/validation/"),
    )
    c(
        "/api/flywheel/pools/{id}/difficulty/",
        "get",
        researcher.get(f"/api/flywheel/pools/{pool}/difficulty/"),
    )
    c("/api/flywheel/validate/", "post", admin.post("/api/flywheel/validate/", {}, format="json"))
