"""Real env-host processes for tests: a Celery env-host worker (its warm pool of environments) on
the test's database under a fleet prefix of its own, and optionally a worker for the default queue
(candidates, submits); the test process talks to them through the settings it overrides."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

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


@contextmanager
def env_host(warm_pool: str, *, default_queue: bool = False, **settings: str) -> Iterator[dict[str, str]]:
    """An env host with warm pool `warm_pool` ("terminal=1"), plus a worker for the default queue
    when `default_queue`; `settings` are overridden too. Yields {"host", "prefix"}; both processes
    are stopped and the fleet's registry cleared after."""
    name = f"ah{uuid.uuid4().hex[:8]}"
    prefix = f"test:fleet:{name}"
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "webapp.settings.test", "FLEET_REDIS_PREFIX": prefix,
           "DATABASE_URL": subprocess_database_url()}  # fmt: skip
    host_env = {**env, "FLYWHEEL_ENV_HOST": name, "FLEET_WARM_POOL": warm_pool, "FLEET_HOST_PERIOD_S": "0.5"}
    commands = [([*CELERY, "-n", f"{name}@%h", "-Q", f"env.{name}", "-P", "threads", "-c", "4"], host_env)]
    if default_queue:
        commands.append(([*CELERY, "-n", f"d{name}@%h", "-Q", "default", "-P", "solo"], env))
    procs = [
        subprocess.Popen(
            command, env=penv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        for command, penv in commands
    ]
    with override_settings(FLEET_REDIS_PREFIX=prefix, **settings):
        fleet.registry.cache_clear()
        try:
            yield {"host": name, "prefix": prefix}
        finally:
            for proc in procs:
                _kill(proc)
            fleet.registry().clear()
            fleet.registry.cache_clear()


def wait_idle(kind: str, timeout: float = 60) -> None:
    """Until an environment of `kind` is idle in the fleet (the env host booted it)."""
    deadline = time.monotonic() + timeout
    while fleet.registry().idle_count(kind) < 1:
        assert time.monotonic() < deadline, f"no {kind} environment booted within {timeout} s"
        time.sleep(0.1)
