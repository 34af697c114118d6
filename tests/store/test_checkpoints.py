"""Checkpoint registry: the initial embedded checkpoint, external endpoints, promotion (admin only)
pushing weights to a real running policy server."""

from __future__ import annotations

import httpx
import pytest
from django.test import override_settings

from annotation.services.sessions import annotation_policy
from webapp.store.checkpoints import checkpoint_create_initial, checkpoint_dir, policy_weights_secret
from webapp.store.models import Checkpoint

pytestmark = pytest.mark.django_db


def test_initial_checkpoint_is_an_hf_directory_that_loads() -> None:
    checkpoint = checkpoint_create_initial(version="init-test")
    assert checkpoint_create_initial(version="init-test").pk == checkpoint.pk  # idempotent
    from workers.policy.embedded.policy import load_checkpoint

    model, _ = load_checkpoint(checkpoint_dir(checkpoint))
    assert model.config.flywheel_version == "init-test"
    assert (checkpoint_dir(checkpoint) / "model.safetensors").is_file()


def test_register_endpoint_and_promote_roles(api) -> None:
    body = {"version": "ui-tars-vllm", "endpoint_url": "http://10.0.0.5:8000/v1", "profile": "ui-tars-1.5"}
    for role in ("annotator", "reviewer", "researcher"):
        assert api(role).post("/api/checkpoints/endpoints/", body, format="json").status_code == 403
    created = api("admin").post("/api/checkpoints/endpoints/", body, format="json")
    assert created.status_code == 201
    assert (
        api("admin").post("/api/checkpoints/endpoints/", body, format="json").status_code == 400
    )  # duplicate
    bad = api("admin").post(
        "/api/checkpoints/endpoints/", {**body, "version": "x", "profile": "gpt"}, format="json"
    )
    assert bad.status_code == 400

    pk = created.json()["id"]
    assert api("researcher").post(f"/api/checkpoints/{pk}/promote/").status_code == 403
    promoted = api("admin").post(f"/api/checkpoints/{pk}/promote/")
    assert promoted.status_code == 200 and promoted.json()["is_annotation_model"] is True
    policy = annotation_policy()
    assert (policy["base_url"], policy["model"], policy["profile"]) == (
        "http://10.0.0.5:8000/v1",
        "ui-tars-vllm",
        "ui-tars-1.5",
    )


def test_promoting_an_embedded_checkpoint_hot_swaps_the_running_server(api, tmp_path) -> None:
    from workers.policy.embedded.policy import EmbeddedPolicy
    from workers.policy.server import start_server

    first = checkpoint_create_initial(version="v-a", seed=1)
    second = checkpoint_create_initial(version="v-b", seed=2)
    # the server takes weights with the install's weights secret only (as `serve_policy` starts it)
    server, _ = start_server(
        EmbeddedPolicy.from_pretrained(checkpoint_dir(first)), checkpoint=str(checkpoint_dir(first)),
        weights_secret=policy_weights_secret(),
    )  # fmt: skip
    try:
        with override_settings(POLICY_BASE_URL=server.url + "/v1"):
            assert api("admin").post(f"/api/checkpoints/{first.pk}/promote/").status_code == 200
            assert api("admin").post(f"/api/checkpoints/{second.pk}/promote/").status_code == 200
        refused = httpx.post(server.url + "/v1/load_weights", json={"path": str(checkpoint_dir(first))})
        assert refused.status_code == 403  # nobody else swaps the annotation model's weights
        key = {"Authorization": f"Bearer {policy_weights_secret()}"}
        assert httpx.get(server.url + "/v1/models").status_code == 401  # nor reads its card without the key
        models = httpx.get(server.url + "/v1/models", headers=key).json()
        assert models["data"][0]["model_version"] == "v-b"
        assert list(
            Checkpoint.objects.filter(is_annotation_model=True).values_list("version", flat=True)
        ) == ["v-b"]
    finally:
        server.shutdown()
        server.server_close()
