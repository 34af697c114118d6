"""Real processes for annotation tests: an env-host worker (Chromium + MiniWoB++), a Celery worker for
candidates and the embedded policy server (an untrained model: its candidates parse but are random)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.test import override_settings

from tests.service_urls import subprocess_database_url
from webapp.fleet import services as fleet

CELERY = [sys.executable, "-m", "celery", "-A", "webapp", "worker", "--without-gossip", "--without-mingle",
          "--without-heartbeat", "-l", "warning"]  # fmt: skip


def _kill(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)


@pytest.fixture
def policy_server(tmp_path: Path) -> Iterator[str]:
    from workers.policy.embedded.policy import EmbeddedPolicy, new_model
    from workers.policy.embedded.tokenizer import FlywheelTokenizer
    from workers.policy.server import start_server

    model, tokenizer = new_model(seed=0), FlywheelTokenizer()
    model.save_pretrained(tmp_path / "ckpt")
    tokenizer.save_pretrained(tmp_path / "ckpt")
    server, _ = start_server(
        EmbeddedPolicy.from_pretrained(tmp_path / "ckpt", seed=0), checkpoint=str(tmp_path)
    )
    try:
        yield server.url + "/v1"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def warm_pool() -> str:
    """The env host's warm pool; a test module overrides this fixture for other kinds."""
    return "browser=1"


@pytest.fixture
def live_stack(policy_server: str, warm_pool: str) -> Iterator[dict[str, str]]:
    """Env host (warm pool `warm_pool`) + a worker for the default queue, on this test's database."""
    name = f"ah{uuid.uuid4().hex[:8]}"
    prefix = f"test:fleet:{name}"
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "webapp.settings.test", "FLEET_REDIS_PREFIX": prefix,
           "DATABASE_URL": subprocess_database_url()}  # fmt: skip
    host = subprocess.Popen(
        [*CELERY, "-n", f"{name}@%h", "-Q", f"env.{name}", "-P", "threads", "-c", "4"],
        env={**env, "FLYWHEEL_ENV_HOST": name, "FLEET_WARM_POOL": warm_pool, "FLEET_HOST_PERIOD_S": "0.5"},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    default = subprocess.Popen(
        [*CELERY, "-n", f"d{name}@%h", "-Q", "default", "-P", "solo"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    with override_settings(
        FLEET_REDIS_PREFIX=prefix, POLICY_BASE_URL=policy_server, POLICY_PROFILE="embedded"
    ):
        fleet.registry.cache_clear()
        try:
            yield {"host": name, "prefix": prefix}
        finally:
            _kill(host)
            _kill(default)
            fleet.registry().clear()
            fleet.registry.cache_clear()
