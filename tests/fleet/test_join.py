"""A second machine joins a running install (`FLYWHEEL_JOIN=1 scripts/up.sh`), tried with two
joining hosts on this machine: the commands `up.sh` gives (read with FLYWHEEL_DRY_RUN=1) start an
env host and a rollout worker per host, with unique names and queues; both env hosts register
environments that Django leases and calls through each host's own queue, and both rollout workers
announce themselves to the engine's fair share. Real Celery workers, PostgreSQL and Redis."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings
from django.test import override_settings

from rl_control.engine import share
from tests.service_urls import subprocess_database_url
from webapp.fleet import queues
from webapp.fleet import services as fleet

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
ROOT = Path(settings.BASE_DIR)


def _join_commands(env: dict[str, str]) -> dict[str, list[str]]:
    out = subprocess.run(["bash", str(ROOT / "scripts" / "up.sh")], env={**env, "FLYWHEEL_DRY_RUN": "1"},
                         capture_output=True, text=True, timeout=60, check=True).stdout  # fmt: skip
    lines = [line.split("\t", 1) for line in out.splitlines() if "\t" in line]
    return {name: shlex.split(command) for name, command in lines}


@pytest.fixture
def joined() -> Iterator[dict[str, dict[str, list[str]]]]:
    n = uuid.uuid4().hex[:6]
    names = {"FLEET_REDIS_PREFIX": f"test:join:{n}", "RL_ROLLOUT_QUEUE": f"rollout.join.{n}"}
    base = {**os.environ, **names, "DJANGO_SETTINGS_MODULE": "webapp.settings.test",
            "DATABASE_URL": subprocess_database_url(),
            "REDIS_URL": settings.REDIS_URL, "FLYWHEEL_JOIN": "1", "FLYWHEEL_ANNOTATORS": "1",
            "FLYWHEEL_ROLLOUT_CONCURRENCY": "1", "FLEET_WARM_POOL": "terminal=2", "FLEET_HOST_PERIOD_S": "0.5"}  # fmt: skip
    hosts = {host: _join_commands({**base, "FLYWHEEL_ENV_HOST": host}) for host in (f"ja{n}", f"jb{n}")}
    procs = []
    with override_settings(**names):
        fleet.registry.cache_clear()
        try:
            for commands in hosts.values():
                for argv in commands.values():
                    argv = [*argv[:-2], "-l", "warning", "--without-gossip", "--without-mingle"]
                    procs.append(subprocess.Popen(argv, env=base, stdout=subprocess.DEVNULL,
                                                  stderr=subprocess.DEVNULL, start_new_session=True))  # fmt: skip
            yield hosts
        finally:
            for proc in procs:
                os.killpg(proc.pid, signal.SIGTERM)
            for proc in procs:
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
            queues.broker().delete(names["RL_ROLLOUT_QUEUE"], *(f"env.{h}" for h in hosts))
            fleet.registry().clear()
            fleet.registry.cache_clear()


def _wait(check, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not (value := check()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)
    return value


def test_two_joined_hosts_both_take_leases_and_both_rollout_workers_count(joined) -> None:
    a, b = joined
    priority = str(ROOT / "scripts" / "priority.sh")
    for host, commands in joined.items():
        assert set(commands) == {host, f"rollout-{host}"}  # nothing else starts on a joining host
        # the env host serves annotators (interactive), the rollout worker yields to them
        assert commands[host][:2] == [priority, "interactive"]
        assert commands[f"rollout-{host}"][:2] == [priority, "background"]
        assert commands[host][2:6] == [
            "env",
            "DB_POOL_ROLE=envhost",  # its database pool sized as an env host's (docs/scale.md)
            f"FLYWHEEL_ENV_HOST={host}",
            str(ROOT / ".venv" / "bin" / "celery"),
        ]
        assert commands[f"rollout-{host}"][2:4] == ["env", "DB_POOL_ROLE=worker"]
        assert commands[host][commands[host].index("-Q") + 1] == f"env.{host}"
        assert (
            commands[f"rollout-{host}"][commands[f"rollout-{host}"].index("-n") + 1] == f"rollout-{host}@%h"
        )
    reg = fleet.registry()
    _wait(lambda: reg.idle_count("terminal") >= 4, 120, "both hosts to register their terminals")
    leases = [fleet.lease_acquire(kind="terminal", owner=f"test:join:{k}") for k in range(4)]
    assert {lease.worker for lease in leases} == {a, b}
    for lease in leases:  # each call goes to the queue of the host that holds the env
        assert fleet.env_call(lease=lease, op="info")["kind"] == "terminal"
        assert fleet.lease_release(lease_id=lease.lease_id)
    workers = _wait(lambda: len(queues.workers_of(settings.RL_ROLLOUT_QUEUE)) == 2
                    and queues.workers_of(settings.RL_ROLLOUT_QUEUE), 120, "both rollout workers to announce")  # fmt: skip
    assert sorted(name.split("@")[0] for name in workers) == [f"rollout-{a}", f"rollout-{b}"]
    assert share.pool_read(share.ROLLOUT).capacity == 2  # the engine's fair share counts both
