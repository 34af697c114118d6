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
