"""The fleet page's API and websocket on the real Redis registry: every env with its lease owner
(RL run, annotation session, flywheel job), health and age; a read-only Watch of a real desktop
booted by a real env-host worker, which leaves the env's lease untouched."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import pytest
from asgiref.sync import async_to_sync
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.test import override_settings

from annotation.models import AnnotationSession
from project.routing import websocket_urlpatterns
from rl_control import services as runs
from tests.factories import TaskFactory, TaskPoolFactory
from webapp.fleet import services as fleet
from webapp.flywheel.models import FlywheelJob
from workers.envs.vnc.tokens import TOKEN_PREFIX, parse_grant


@pytest.fixture
def registry() -> Iterator[object]:
    prefix = f"test:fleetpage:{uuid.uuid4().hex[:8]}"
    with override_settings(FLEET_REDIS_PREFIX=prefix):
        fleet.registry.cache_clear()
        try:
            yield fleet.registry()
        finally:
            fleet.registry().clear()
            fleet.registry.cache_clear()


def _by_id(body: dict) -> dict[str, dict]:
    return {e["env_id"]: e for e in body["envs"]}


def test_fleet_names_every_owner_with_health_and_age(api, users, registry) -> None:
    pool = TaskPoolFactory(name="p")
    task = TaskFactory(pool=pool, env_kind="browser", external_id="click-1")
    run = runs.run_create(user=users["researcher"], name="my run", preset="grpo-dart", pool=pool)
    session = AnnotationSession.objects.create(user=users["annotator"], task=task)
    job = FlywheelJob.objects.create(kind="rejection_sampling")
    reg = registry
    reg.host_heartbeat(worker="host-a", ttl_s=30)
    for i in range(5):
        reg.register_env(env_id=f"b{i}", kind="browser", worker="host-a", boot_s=2.0)
    reg.register_env(env_id="d0", kind="desktop", worker="host-gone", boot_s=4.0)  # no heartbeat
    leases = {
        owner: reg.acquire(kind="browser", owner=owner, task=str(task.pk))
        for owner in (f"rl:{run.pk}:0:3", f"annotation:{session.pk}", f"flywheel-job-{job.pk}", "bench")
    }
    assert all(leases.values())
    crashed_env = leases["bench"].env_id
    reg.mark_crashed(env_id=crashed_env, reason="Xvfb died")

    body = api("researcher").get("/api/fleet/").json()
    envs = _by_id(body)
    assert len(envs) == 6 and body["counts"]["leased"] == 3 and body["counts"]["crashed"] == 1
    rl = envs[leases[f"rl:{run.pk}:0:3"].env_id]
    assert rl["state"] == "leased" and rl["health"] == "ok" and rl["watchable"] is False
    assert rl["lease"]["owner"] == {
        "kind": "rl",
        "id": run.pk,
        "label": f"run #{run.pk} my run",
        "url": f"/runs/{run.pk}/",
    }
    assert rl["lease"]["task"] == str(task.pk) and 0 <= rl["lease"]["age_s"] < 30
    assert 0 < rl["lease"]["expires_in_s"] <= 60 and rl["boot_s"] == 2.0 and 0 <= rl["age_s"] < 30
    ann = envs[leases[f"annotation:{session.pk}"].env_id]["lease"]["owner"]
    assert ann["kind"] == "annotation" and "ann" in ann["label"] and "click-1" in ann["label"]
    assert envs[leases[f"flywheel-job-{job.pk}"].env_id]["lease"]["owner"]["label"].startswith(
        f"flywheel job #{job.pk}"
    )
    assert envs[crashed_env]["health"] == "crashed" and envs[crashed_env]["health_reason"] == "Xvfb died"
    assert envs[crashed_env]["lease"]["owner"] == {"kind": "other", "id": None, "label": "bench", "url": None}
    # A host that stopped beating: its env is flagged, not watchable, and the host shows as lost.
    assert envs["d0"]["health"] == "host lost" and envs["d0"]["watchable"] is False
    hosts = {h["name"]: h for h in body["hosts"]}
    assert hosts["host-a"]["alive"] and hosts["host-a"]["envs"] == 5 and hosts["host-a"]["leased"] == 3
    assert hosts["host-gone"]["alive"] is False and hosts["host-gone"]["heartbeat_age_s"] is None
    assert body["counts"]["unhealthy"] == 2

    # A run that no longer exists is named as gone, not an error.
    reg.acquire(kind="browser", owner="rl:999999:0:1")
    body = api("admin").get("/api/fleet/").json()
    assert any(e["lease"] and e["lease"]["owner"]["label"] == "rl #999999 (gone)" for e in body["envs"])


@pytest.mark.parametrize(
    "role, code", [(None, 403), ("annotator", 403), ("reviewer", 403), ("researcher", 200)]
)
def test_fleet_is_for_researchers_and_admins(api, registry, role, code) -> None:
    assert api(role).get("/api/fleet/").status_code in ({401, 403} if code == 403 else {code})
    assert api(role).post("/api/fleet/envs/x/watch/").status_code in ({401, 403} if code == 403 else {404})


def test_watch_refuses_unknown_crashed_and_non_desktop_envs(api, registry) -> None:
    client = api("researcher")
    assert client.post("/api/fleet/envs/nope/watch/").status_code == 404
    assert client.post(f"/api/fleet/envs/{'x' * 500}/watch/").status_code == 404
    registry.register_env(env_id="dead", kind="desktop", worker="w", boot_s=1.0)
    registry.mark_crashed(env_id="dead", reason="gone")
    response = client.post("/api/fleet/envs/dead/watch/")
    assert response.status_code == 410 and "crashed" in response.json()["detail"]


@pytest.mark.django_db(transaction=True)
def test_fleet_socket_sends_a_snapshot_on_connect_and_on_change(users, registry) -> None:
    async def scenario() -> None:
        ws = WebsocketCommunicator(URLRouter(websocket_urlpatterns), "/ws/fleet/")
        ws.scope["user"] = users["researcher"]
        connected, _ = await ws.connect()
        assert connected
        first = await ws.receive_json_from(timeout=10)
        assert (
            first["type"] == "fleet.snapshot"
            and first["reason"] == "connect"
            and first["fleet"]["envs"] == []
        )
        registry.register_env(env_id="live-1", kind="browser", worker="w", boot_s=1.0)
        changed = await ws.receive_json_from(timeout=10)
        assert changed["reason"] == "change" and [e["env_id"] for e in changed["fleet"]["envs"]] == ["live-1"]
        registry.acquire(kind="browser", owner="someone")
        leased = await ws.receive_json_from(timeout=10)
        assert leased["fleet"]["envs"][0]["state"] == "leased"
        await ws.disconnect()

        for user, code in ((users["annotator"], 4403), (None, 4401)):
            ws = WebsocketCommunicator(URLRouter(websocket_urlpatterns), "/ws/fleet/")
            if user is not None:
                ws.scope["user"] = user
            connected, close_code = await ws.connect()
            assert not connected and close_code == code

    async_to_sync(scenario)()


@pytest.fixture
def desktop_host(registry) -> Iterator[str]:
    """A real env-host worker (Celery, its own queue) that boots one desktop with x11vnc."""
    name = f"fp{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "webapp.settings.test", "FLYWHEEL_ENV_HOST": name,
           "FLEET_REDIS_PREFIX": registry.prefix, "FLEET_WARM_POOL": "desktop=1", "FLEET_HOST_PERIOD_S": "0.5"}  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "webapp", "worker", "-n", f"{name}@%h", "-Q", f"env.{name}",
         "-P", "threads", "-c", "2", "--without-gossip", "--without-mingle", "--without-heartbeat", "-l", "warning"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        yield name
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


def test_watch_a_real_desktop_of_the_fleet_read_only(api, users, registry, desktop_host) -> None:
    deadline = time.monotonic() + 60
    while registry.idle_count("desktop") < 1:
        assert time.monotonic() < deadline, "the env host did not boot a desktop within 60 s"
        time.sleep(0.2)
    client = api("researcher")
    body = client.get("/api/fleet/").json()
    (desktop,) = body["envs"]
    assert desktop["host"] == desktop_host and desktop["health"] == "ok" and desktop["watchable"]
    assert body["hosts"][0]["alive"] and body["hosts"][0]["heartbeat_age_s"] < 5

    lease = registry.acquire(kind="desktop", owner="annotation:424242", ttl_s=60)
    before = registry.lease(lease.lease_id)["expires"]
    time.sleep(0.05)
    response = client.post(f"/api/fleet/envs/{desktop['env_id']}/watch/")
    assert response.status_code == 200, response.content
    grant = response.json()
    assert grant["read_only"] is True and grant["url"].endswith(f"/websockify?token={grant['token']}")
    stored = parse_grant(
        registry.r.get(f"{TOKEN_PREFIX}{grant['token']}"), token=grant["token"], key=fleet.vnc_grant_key()
    )
    assert stored is not None and stored.read_only and stored.user_id == str(users["researcher"].pk)
    assert stored.socket.endswith(".sock") and not stored.port  # the desktop's x11vnc: a unix socket, no TCP
    # Watching never renews (nor takes) the holder's lease.
    assert registry.lease(lease.lease_id)["expires"] == before
    assert (
        client.get("/api/fleet/").json()["envs"][0]["lease"]["owner"]["label"] == "annotation #424242 (gone)"
    )
