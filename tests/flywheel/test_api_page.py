"""The flywheel API (reads for researchers/admins, actions for admins) and the server-rendered page."""

from __future__ import annotations

import json

import pytest

from tests.flywheel.conftest import make_trajectory
from webapp.flywheel.models import FlywheelJob, Promotion
from webapp.flywheel.selectors import rl_start_checkpoint
from webapp.flywheel.tasks import refresh_execute
from webapp.store.models import Checkpoint

pytestmark = pytest.mark.django_db


def test_roles(api, tasks) -> None:
    for role in ("annotator", "reviewer", None):
        assert api(role).get("/api/flywheel/overview/").status_code in (401, 403)
    assert api("researcher").get("/api/flywheel/overview/").status_code == 200
    assert api("researcher").post("/api/flywheel/datasets/", {}, format="json").status_code == 403
    assert api("researcher").post("/api/flywheel/validate/", {}, format="json").status_code == 403


def test_validate_build_export_refresh_through_the_api(
    api, tasks, django_capture_on_commit_callbacks
) -> None:
    make_trajectory(tasks[0], reward=1.0)
    make_trajectory(tasks[1], reward=0.0)
    admin = api("admin")
    assert admin.post("/api/flywheel/validate/", {"pool": tasks[0].pool_id}, format="json").json()["v1"] == 1
    built = admin.post("/api/flywheel/datasets/", {"sources": ["rejection_sampling"]}, format="json")
    assert built.status_code == 201 and (built.json()["sft"], built.json()["ct"]) == (1, 1)
    empty = admin.post("/api/flywheel/datasets/", {"sources": ["import"]}, format="json")
    assert empty.status_code == 400 and "no validated trajectories" in empty.json()["detail"]
    exported = api("researcher").post(
        f"/api/flywheel/datasets/{built.json()['id']}/export/",
        {"format": "verl", "split": "ct"},
        format="json",
    )
    assert exported.status_code == 201 and exported.json()["filters"] == {
        "dataset": f"{built.json()['id']}:ct"
    }
    listed = admin.get(f"/api/trajectories/?dataset={built.json()['id']}:ct").json()
    assert [t["id"] for t in listed["results"]] == [tasks[1].trajectories.get().pk]
    assert admin.get("/api/trajectories/?dataset=abc").status_code == 400
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        job = admin.post(
            "/api/flywheel/jobs/", {"kind": "refresh", "params": {"pool": tasks[0].pool_id}}, format="json"
        )
    assert job.status_code == 201 and len(callbacks) == 1  # enqueued once the transaction commits
    refresh_execute(job.json()["id"])
    done = admin.get(f"/api/flywheel/jobs/{job.json()['id']}/").json()
    assert done["status"] == "succeeded" and sum(done["result"]["buckets"].values()) == 3
    difficulty = api("researcher").get(f"/api/flywheel/pools/{tasks[0].pool_id}/difficulty/").json()
    assert len(difficulty["history"]) == 1 and difficulty["buckets"]["75-100"] == 1


def test_job_validation_and_cancel(api, lineage) -> None:
    admin = api("admin")
    bad = admin.post(
        "/api/flywheel/jobs/",
        {"kind": "merge", "params": {"checkpoints": ["fw-rl-1", "fw-rl-3"], "weights": [0.5, 0.5]}},
        format="json",
    )
    assert bad.status_code == 400 and "share one SFT parent" in bad.json()["detail"]
    nothing = admin.post(
        "/api/flywheel/jobs/",
        {"kind": "rejection_sampling", "checkpoint": "fw-init", "params": {"k": 2}},
        format="json",
    )
    assert nothing.status_code == 400
    job = FlywheelJob.objects.create(kind="refresh", params={"pool": 1})
    assert admin.post(f"/api/flywheel/jobs/{job.pk}/cancel/").json()["status"] == "cancelled"
    refresh_execute(job.pk)  # a cancelled job is never claimed
    assert FlywheelJob.objects.get(pk=job.pk).status == "cancelled"


def test_promote_annotation_and_rl_start(api, lineage) -> None:
    assert (
        api("researcher")
        .post("/api/flywheel/promote/", {"checkpoint": "fw-sft-a", "targets": ["annotation"]}, format="json")
        .status_code
        == 403
    )
    response = api("admin").post(
        "/api/flywheel/promote/",
        {"checkpoint": "fw-sft-a", "targets": ["annotation", "rl_start"]},
        format="json",
    )
    assert response.status_code == 200
    assert Checkpoint.objects.get(is_annotation_model=True).version == "fw-sft-a"
    assert rl_start_checkpoint() == lineage["sft_a"]
    api("admin").post(
        "/api/flywheel/promote/", {"checkpoint": "fw-sft-b", "targets": ["annotation"]}, format="json"
    )
    assert Checkpoint.objects.get(is_annotation_model=True).version == "fw-sft-b"
    assert rl_start_checkpoint() == lineage["sft_a"]  # only the annotation model moved
    assert Promotion.objects.count() == 3
    from annotation.services.sessions import annotation_policy  # noqa: F401  (new sessions read the flag)


def test_page_renders_the_cycle(client, users, tasks, lineage) -> None:
    make_trajectory(tasks[0], reward=1.0)
    api_admin = client
    api_admin.force_login(users["admin"])
    from webapp.flywheel.services.datasets import dataset_build
    from webapp.flywheel.services.promotion import checkpoint_promote
    from webapp.flywheel.services.validation import validate_pending

    validate_pending()
    dataset_build(name="first")
    checkpoint_promote(checkpoint=lineage["sft_a"], targets=["annotation"])
    page = api_admin.get("/flywheel/")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'data-testid="fw-annotation-model">fw-sft-a<' in html
    assert "first" in html and 'data-fw-action="merge"' in html
    data = json.loads(
        html.split('<script id="flywheel-data" type="application/json">')[1].split("</script>")[0]
    )
    assert data["v1_by_checkpoint"] == [] and data["datasets"][0]["sft"] == 1
    client.force_login(users["annotator"])
    assert client.get("/flywheel/").status_code == 403


def test_the_overview_shows_the_last_rl_run(api, tasks) -> None:
    """The RL app hands the flywheel its last run (rl_control's AppConfig.ready(): the flywheel sits
    below it and does not import it)."""
    from rl_control.models import Run

    assert api("researcher").get("/api/flywheel/overview/").json()["last_rl"] is None
    Run.objects.create(name="older", status="finished")
    run = Run.objects.create(name="newest", status="running", episodes_done=40, updates_done=3)
    last = api("researcher").get("/api/flywheel/overview/").json()["last_rl"]
    assert last == {
        "id": run.pk,
        "name": "newest",
        "status": "running",
        "episodes_done": 40,
        "updates_done": 3,
    }
