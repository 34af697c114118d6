"""Issue 30, finding 2: a researcher could replace the annotation model. A run's external endpoints
(`serving.endpoints`) were pushed every trained version with the install-wide weights secret, the one
the annotation model's server checks, and a run naming that server was accepted.

Now each endpoint of each run has its own key, the annotation server's secret goes nowhere but that
server, a run may not name a server the platform owns (refused at create, 400 naming it), and
promotion stays admin-only. The servers here are real embedded policy servers."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx
import pytest
from django.test import override_settings

from rl_control.engine import serving
from rl_control.models import EngineState, Run
from tests.factories import TaskFactory
from webapp.store.checkpoints import checkpoint_create_initial, checkpoint_dir, policy_weights_secret
from workers.policy.embedded.policy import EmbeddedPolicy
from workers.policy.server import start_server

pytestmark = [pytest.mark.django_db, pytest.mark.security]


@pytest.fixture
def checkpoints():
    return checkpoint_create_initial(version="ep-a", seed=1), checkpoint_create_initial(
        version="ep-b", seed=2
    )


@pytest.fixture
def launch_server(checkpoints) -> Iterator:
    started = []

    def launch(secret: str, port: int = 0):
        server, _ = start_server(
            EmbeddedPolicy.from_pretrained(checkpoint_dir(checkpoints[0])), port=port,
            checkpoint=str(checkpoint_dir(checkpoints[0])), weights_secret=secret,
        )  # fmt: skip
        started.append(server)
        return server

    yield launch
    for server in started:
        server.shutdown()
        server.server_close()


def _card(server, key: str) -> dict:
    """The server's model card, asked with its key (without it: 401)."""
    return httpx.get(server.url + "/v1/models", headers={"Authorization": f"Bearer {key}"}).json()["data"][0]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _create(api, endpoints: str):
    task = TaskFactory(env_kind="browser")
    body = {"name": "ep", "config": {"task_ids": [task.pk], "serving": {"endpoints": endpoints}}}
    return api("researcher").post("/api/rl/runs/", body, format="json")


def test_a_run_cannot_name_a_platform_owned_server(api, settings, checkpoints) -> None:
    annotation = settings.POLICY_BASE_URL  # http://127.0.0.1:8100/v1
    port = annotation.rsplit(":", 1)[1].split("/")[0]
    refused = {
        annotation: "annotation model's policy server",
        f"http://localhost:{port}/v1": "annotation model's policy server",
        f"http://0.0.0.0:{port}/v1": "annotation model's policy server",
        settings.PUBLIC_BASE_URL + "/v1": "web server",
        f"http://127.0.0.1:{urlsplit(settings.REDIS_URL).port or 6379}/v1": "Redis",  # the test run's Redis
    }
    for url, reason in refused.items():
        response = _create(api, f"http://10.1.2.3:8000/v1,{url}")
        assert response.status_code == 400, (url, response.status_code)
        assert reason in response.json()["serving.endpoints"][0], response.json()
    # A registered model server (an annotation model) and another run's own server, too.
    checkpoint_create_initial(version="ep-c")
    from webapp.store.models import Checkpoint

    Checkpoint.objects.create(
        version="vllm-ann", endpoint_url="http://10.9.9.9:8000/v1", profile="ui-tars-1.5"
    )
    response = _create(api, "http://10.9.9.9:8000/v1")
    assert response.status_code == 400 and "checkpoint vllm-ann" in response.json()["serving.endpoints"][0]
    other = Run.objects.create(name="other", config={})
    EngineState.objects.create(run=other, servers=[{"url": "http://127.0.0.1:45123/v1"}])
    response = _create(api, "http://localhost:45123/v1")
    assert response.status_code == 400 and f"run {other.pk}'s own" in response.json()["serving.endpoints"][0]
    assert not Run.objects.filter(name="ep").exists()
    # A server of the researcher's own elsewhere is fine, and its key is shown once created.
    created = _create(api, "http://10.1.2.3:8000/v1")
    assert created.status_code == 201, created.json()
    page = api("researcher").get(f"/api/rl/runs/{created.json()['id']}/").json()
    assert [k["url"] for k in page["endpoint_keys"]] == ["http://10.1.2.3:8000/v1"]
    assert len(page["endpoint_keys"][0]["key"]) == 64


def test_pushes_to_endpoints_never_carry_the_annotation_secret(api, checkpoints, launch_server) -> None:
    # A server that, like the annotation model's, takes the install's weights secret: named by a run,
    # it must not be swapped by that run's pushes.
    annotation_like = launch_server(policy_weights_secret())
    created = _create(api, annotation_like.url + "/v1")
    assert created.status_code == 201, created.json()
    run = Run.objects.get(pk=created.json()["id"])
    state = EngineState.objects.get(run=run)
    with pytest.raises(serving.ServingError, match="refused the weights"):
        serving.serving_push(run, state, checkpoint_dir(checkpoints[1]), 1)
    assert _card(annotation_like, policy_weights_secret())["model_version"] == "ep-a"

    # The researcher's own server, started with the key the run page shows, takes the weights.
    port = _free_port()
    created = _create(api, f"http://127.0.0.1:{port}/v1")
    run = Run.objects.get(pk=created.json()["id"])
    key = api("researcher").get(f"/api/rl/runs/{run.pk}/").json()["endpoint_keys"][0]["key"]
    assert key != policy_weights_secret()
    own = launch_server(key, port=port)  # as `FLYWHEEL_POLICY_SECRET=<key> python -m workers.policy.server`
    serving.serving_push(run, EngineState.objects.get(run=run), checkpoint_dir(checkpoints[1]), 1)
    assert _card(own, key)["model_version"] == f"run{run.pk}-v1"
    # Each endpoint of each run has its own key.
    again = Run.objects.get(pk=_create(api, own.url + "/v1").json()["id"])
    assert api("researcher").get(f"/api/rl/runs/{again.pk}/").json()["endpoint_keys"][0]["key"] != key


def test_promotion_stays_admin_only_and_pushes_only_to_the_annotation_server(
    api, checkpoints, launch_server
) -> None:
    _, second = checkpoints
    for role in ("annotator", "reviewer", "researcher"):
        assert api(role).post(f"/api/checkpoints/{second.pk}/promote/").status_code == 403
        body = {"checkpoint": second.version, "targets": ["annotation"]}
        assert api(role).post("/api/flywheel/promote/", body, format="json").status_code == 403
    elsewhere = launch_server("")
    body = {"checkpoint": second.version, "targets": ["annotation"], "push_to": elsewhere.url + "/v1"}
    refused = api("admin").post("/api/flywheel/promote/", body, format="json")
    assert refused.status_code == 400 and "its secret never leaves it" in str(refused.json())
    annotation = launch_server(policy_weights_secret())
    with override_settings(POLICY_BASE_URL=annotation.url + "/v1"):
        body["push_to"] = annotation.url + "/v1"
        assert api("admin").post("/api/flywheel/promote/", body, format="json").status_code == 200
    assert _card(annotation, policy_weights_secret())["model_version"] == "ep-b"
