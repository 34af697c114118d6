"""End to end through Celery: a real env-host worker boots a desktop into the warm pool; Django leases
it, resets it for a task, acts with UI-TARS text, observes, and releases it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid

import pytest
from django.test import override_settings

from webapp.fleet import services
from workers.actions.parse import parse_response


@pytest.fixture
def env_host_worker():
    name = f"ht{uuid.uuid4().hex[:8]}"
    prefix = f"test:fleet:{name}"
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "webapp.settings.test", "FLYWHEEL_ENV_HOST": name,
           "FLEET_REDIS_PREFIX": prefix, "FLEET_WARM_POOL": "desktop=1", "FLEET_HOST_PERIOD_S": "0.5"}  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "webapp", "worker", "-n", f"{name}@%h", "-Q", f"env.{name}",
         "-P", "threads", "-c", "4", "--without-gossip", "--without-mingle", "--without-heartbeat", "-l", "warning"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    with override_settings(FLEET_REDIS_PREFIX=prefix):
        services.registry.cache_clear()
        try:
            yield name
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
            services.registry().clear()
            services.registry.cache_clear()


def test_lease_act_release_through_celery(env_host_worker: str) -> None:
    deadline = time.monotonic() + 30
    while services.registry().idle_count("desktop") < 1:
        assert time.monotonic() < deadline, "the env host did not boot a desktop within 30 s"
        time.sleep(0.1)
    lease = services.lease_acquire(kind="desktop", owner="test:celery", task="t1")
    assert lease.worker == env_host_worker

    task = {"task_id": "t1", "instruction": "Open a terminal and list files.", "kind": "desktop",
            "source": "custom", "setup": {"apps": ["xterm"]}}  # fmt: skip
    first = services.env_call(lease=lease, op="reset", payload={"task": task})
    assert (
        first["observation"]["width"] == 1280 and first["observation"]["instruction"] == task["instruction"]
    )

    parsed = parse_response(
        "Thought: The terminal is open, so I type a command.\nAction: type(content='ls\\n')"
    )
    assert parsed.ok
    step = services.env_call(lease=lease, op="step", payload={"action": parsed.actions[0].to_json()})
    assert "error" not in step["info"]
    # xterm draws the typed text asynchronously: under load the step's own screenshot may predate it.
    shot = step["observation"]["screenshot"]
    deadline = time.monotonic() + 10
    while shot == first["observation"]["screenshot"] and time.monotonic() < deadline:
        time.sleep(0.2)
        shot = services.env_call(lease=lease, op="observe")["observation"]["screenshot"]
    assert shot != first["observation"]["screenshot"], "typing into xterm never changed the screen"

    bad = {"kind": "open_app", "text": "Settings"}  # not a desktop action
    with pytest.raises(services.EnvCallFailed):
        services.env_call(lease=lease, op="step_nope", payload={"action": bad})

    assert services.lease_release(lease_id=lease.lease_id)
    with pytest.raises(services.LeaseLost):
        services.env_call(lease=lease, op="observe")
