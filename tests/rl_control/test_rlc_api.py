"""Run API: researchers and admins only; create with per-field 400s, control with 409s, series, schema."""

from __future__ import annotations

import numpy as np
import pytest

from rl_control import services
from rl_control.models import Run, RunAlert, RunMetric
from tests.factories import TrajectoryFactory
from webapp.store.models import Checkpoint

pytestmark = pytest.mark.django_db

FORBIDDEN = ["annotator", "reviewer", "nobody"]


@pytest.fixture
def run(make_run) -> Run:
    return make_run(name="dart-1")


def _endpoints(run_id: int) -> list[tuple[str, str]]:
    return [
        ("get", "/api/rl/runs/"), ("post", "/api/rl/runs/"), ("get", f"/api/rl/runs/{run_id}/"),
        ("post", f"/api/rl/runs/{run_id}/launch/"), ("post", f"/api/rl/runs/{run_id}/pause/"),
        ("post", f"/api/rl/runs/{run_id}/resume/"), ("post", f"/api/rl/runs/{run_id}/stop/"),
        ("post", f"/api/rl/runs/{run_id}/fork/"), ("get", f"/api/rl/runs/{run_id}/metrics/?names=policy/kl"),
        ("get", f"/api/rl/runs/{run_id}/metric-names/"), ("get", f"/api/rl/runs/{run_id}/alerts/"),
        ("get", f"/api/rl/runs/{run_id}/episodes/"), ("get", "/api/rl/presets/"), ("get", "/api/rl/metric-names/"),
        ("get", "/api/rl/config-schema/"),
    ]  # fmt: skip


@pytest.mark.parametrize("role", [*FORBIDDEN, None])
def test_other_roles_are_refused_everywhere(api, run, role) -> None:
    client = api(role)
    for method, url in _endpoints(run.pk):
        response = getattr(client, method)(url, {}, format="json")
        # anonymous: 403 too, because session authentication comes first and sends no challenge
        assert response.status_code == 403, (method, url, response.status_code)
    run.refresh_from_db()
    assert run.status == "created" and Run.objects.count() == 1


@pytest.mark.parametrize("role", ["researcher", "admin"])
def test_create_from_preset_with_overrides(api, pool, role, users) -> None:
    body = {"name": "bepa-1", "preset": "bepa", "pool": pool.pk, "config": {"budget": {"max_updates": 10}}}
    response = api(role).post("/api/rl/runs/", body, format="json")
    assert response.status_code == 201, response.json()
    data = response.json()
    assert (data["status"], data["algorithm"], data["variant"], data["preset"]) == (
        "created",
        "grpo",
        "bepa",
        "bepa",
    )
    assert (
        data["config"]["budget"]["max_updates"] == 10
        and data["config"]["curation"]["injection"] == "bepa_cache"
    )
    assert data["created_by"] == users[role].username and data["progress"] == 0.0


def test_new_runs_start_from_the_checkpoint_promoted_to_rl_start(api, pool, users) -> None:
    from webapp.flywheel.services.promotion import checkpoint_promote

    first = Checkpoint.objects.create(version="sft-1", path="/tmp/sft-1")
    second = Checkpoint.objects.create(version="sft-2", path="/tmp/sft-2")
    body = {"name": "r", "preset": "grpo-dart", "pool": pool.pk}
    client = api("researcher")
    created = client.post("/api/rl/runs/", body, format="json").json()
    assert created["start_checkpoint"] is None  # nothing promoted yet: a fresh model
    checkpoint_promote(checkpoint=first, targets=["rl_start"])
    checkpoint_promote(checkpoint=second, targets=["annotation"])  # not an RL start
    assert client.post("/api/rl/runs/", body, format="json").json()["start_checkpoint"] == "sft-1"
    chosen = client.post("/api/rl/runs/", {**body, "start_checkpoint": "sft-2"}, format="json")
    assert chosen.status_code == 201 and chosen.json()["start_checkpoint"] == "sft-2"
    missing = client.post("/api/rl/runs/", {**body, "start_checkpoint": "nope"}, format="json")
    assert missing.status_code == 400 and "start_checkpoint" in missing.json()


def test_create_errors_are_per_field(api, pool) -> None:
    response = api("researcher").post(
        "/api/rl/runs/",
        {"name": "x", "algorithm": "ppo", "pool": pool.pk, "config": {"ppo": {"clip_low": 3, "lr_value": 0}}},
        format="json",
    )
    assert response.status_code == 400
    assert response.json() == {
        "ppo.clip_low": ["Input should be less than 1"],
        "ppo.lr_value": ["Input should be greater than 0"],
    }
    response = api("researcher").post("/api/rl/runs/", {"preset": "grpo-dart"}, format="json")
    assert response.status_code == 400 and "name" in response.json()
    assert not Run.objects.exists()


@pytest.mark.parametrize("role", ["researcher", "admin"])
def test_control_actions_and_conflicts(api, run, role) -> None:
    client = api(role)
    assert client.post(f"/api/rl/runs/{run.pk}/pause/").status_code == 409
    response = client.post(f"/api/rl/runs/{run.pk}/launch/")
    assert response.status_code == 200 and response.json()["status"] == "running"
    assert client.post(f"/api/rl/runs/{run.pk}/pause/").json()["status"] == "paused"
    conflict = client.post(f"/api/rl/runs/{run.pk}/pause/")
    assert conflict.status_code == 409 and "it is paused" in conflict.json()["detail"]
    assert client.post(f"/api/rl/runs/{run.pk}/resume/").json()["status"] == "running"
    assert client.post(f"/api/rl/runs/{run.pk}/stop/").json()["status"] == "stopped"
    assert client.post(f"/api/rl/runs/{run.pk}/resume/").status_code == 409
    assert client.post("/api/rl/runs/999999/stop/").status_code == 404


def test_list_filters_and_detail(api, make_run, users) -> None:
    dart = make_run(name="a", preset="grpo-dart")
    ppo = make_run(name="b", preset="ppo-uitars2")
    services.run_launch(run=ppo)
    Run.objects.filter(pk=dart.pk).update(headline_success=0.7)
    client = api("admin")
    names = lambda query: [r["name"] for r in client.get(f"/api/rl/runs/{query}").json()["results"]]  # noqa: E731
    assert names("") == ["b", "a"]
    assert names("?status=running") == ["b"]
    assert names("?algorithm=grpo") == ["a"]
    assert names("?created_by=res") == ["b", "a"] and names("?created_by=adm") == []
    assert names("?min_success=0.5") == ["a"]
    assert client.get("/api/rl/runs/?status=exploded").status_code == 400
    for step, kl in [(1, 0.5), (2, 0.25)]:
        services.metrics_record(
            run=ppo, step=step, policy_version=step, samples=step, values={"policy/kl": kl}
        )
    services.metrics_record(run=dart, step=9, policy_version=9, samples=9, values={"policy/kl": 9.0})
    detail = client.get(f"/api/rl/runs/{ppo.pk}/").json()
    assert detail["variant"] == "ppo" and detail["config"]["ppo"]["lambda_critic"] == 1.0
    assert detail["latest_metrics"] == {"policy/kl": {"step": 2, "value": 0.25}}


def test_fork_endpoint(api, run) -> None:
    Checkpoint.objects.create(version="dart-1-v3", path="ckpt/3", run=run)
    Checkpoint.objects.create(version="elsewhere", path="ckpt/x")
    response = api("researcher").post(
        f"/api/rl/runs/{run.pk}/fork/",
        {"checkpoint": "dart-1-v3", "config": {"grpo": {"lr": 5e-7}}},
        format="json",
    )
    assert response.status_code == 201, response.json()
    data = response.json()
    assert (
        data["parent"] == run.pk
        and data["start_checkpoint"] == "dart-1-v3"
        and data["config"]["grpo"]["lr"] == 5e-7
    )
    bad = api("researcher").post(f"/api/rl/runs/{run.pk}/fork/", {"checkpoint": "elsewhere"}, format="json")
    assert bad.status_code == 400 and "checkpoint" in bad.json()


def test_metrics_series_endpoint(api, run) -> None:
    values = np.sin(np.arange(5000) / 100.0)
    RunMetric.objects.bulk_create(
        RunMetric(
            run=run, name="policy/entropy", step=i, policy_version=i, samples=4 * i, wall=i / 10, value=v
        )
        for i, v in enumerate(values)
    )
    client = api("researcher")
    response = client.get(
        f"/api/rl/runs/{run.pk}/metrics/?names=policy/entropy,policy/kl&x=samples&points=200"
    )
    assert response.status_code == 200
    data = response.json()
    entropy, kl = data["series"]
    assert data["x"] == "samples" and entropy["total"] == 5000 and len(entropy["x"]) <= 200
    assert entropy["x"][0] == 0.0 and entropy["x"][-1] == 4 * 4999 and kl["total"] == 0
    assert max(entropy["y"]) == pytest.approx(values.max()) and min(entropy["y"]) == pytest.approx(
        values.min()
    )
    assert client.get(f"/api/rl/runs/{run.pk}/metrics/?names=policy/kl&x=time").status_code == 400
    assert client.get(f"/api/rl/runs/{run.pk}/metrics/?names=").status_code == 400
    assert client.get(f"/api/rl/runs/{run.pk}/metrics/?names=policy/kl&points=1").status_code == 400
    names = client.get(f"/api/rl/runs/{run.pk}/metric-names/").json()
    assert names == {"run_id": run.pk, "names": ["policy/entropy"]}


def test_alerts_presets_and_catalogue(api, run) -> None:
    services.metrics_record(run=run, step=4, policy_version=4, samples=4, values={"policy/entropy": 0.001})
    alerts = api("researcher").get(f"/api/rl/runs/{run.pk}/alerts/").json()["results"]
    assert [(a["kind"], a["step"]) for a in alerts] == [("entropy_collapse", 4)]
    assert RunAlert.objects.count() == 1
    presets = api("admin").get("/api/rl/presets/").json()
    assert [p["name"] for p in presets] == [
        "ppo-uitars2",
        "grpo-dart",
        "bepa",
        "grpo-entropulse",
        "sync-baseline",
    ]
    assert presets[1]["config"]["grpo"]["is_cap"] == 1.0
    catalogue = api("admin").get("/api/rl/metric-names/").json()
    entropy = next(row for row in catalogue if row["name"] == "policy/entropy")
    assert entropy["group"] == "policy" and entropy["keyed"] is False and entropy["description"]
    assert any(row["keyed"] and row["name"] == "outcome/success_rate/task/" for row in catalogue)


def test_openapi_schema_lists_the_run_api(api) -> None:
    response = api("admin").get("/api/schema/?format=json", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    text = response.content.decode()
    for path in [
        "/api/rl/runs/",
        "/api/rl/runs/{id}/pause/",
        "/api/rl/runs/{id}/metrics/",
        "/api/rl/presets/",
        "/api/rl/config-schema/",
    ]:
        assert path in text, path


def test_episodes_are_the_runs_trajectories(api, run, make_run) -> None:
    mine = TrajectoryFactory.create_batch(3, run=run, final_reward=1.0, num_steps=4, policy_version="3")
    TrajectoryFactory(run=make_run(name="other"))
    TrajectoryFactory()  # an annotation trajectory, no run
    response = api("researcher").get(f"/api/rl/runs/{run.pk}/episodes/?page_size=2")
    assert response.status_code == 200
    page = response.json()
    assert [e["id"] for e in page["results"]] == [mine[2].pk, mine[1].pk] and page["next"]
    assert (
        page["results"][0]["task"] == mine[2].task.external_id and page["results"][0]["final_reward"] == 1.0
    )
    rest = api("researcher").get(page["next"]).json()
    assert [e["id"] for e in rest["results"]] == [mine[0].pk]
    assert api("admin").get("/api/rl/runs/999999/episodes/").status_code == 404
