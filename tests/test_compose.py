"""docker-compose.yml read against what `make up` starts (scripts/up.sh) and what the launch path
needs, without a Docker engine: every Celery queue has a worker, the run's policy servers are reached
at the trainer's service name, every container that starts a sandboxed Chromium may make user
namespaces, and the stack does not stay down when the starter model cannot be trained."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from django.conf import settings

from webapp.celery import app

ROOT = Path(settings.BASE_DIR)
SANDBOX = {"seccomp=unconfined", "apparmor=unconfined"}


def _services() -> dict[str, dict]:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]


def _queues(command: list[str] | str) -> set[str]:
    """The queues a worker command consumes (inside `sh -c "…"` too); names built from shell
    variables (a scaled env host's own queue) are left out."""
    args = command if isinstance(command, list) else command.split()
    if args[:2] == ["sh", "-c"]:
        args = args[2].split()
    named = set(args[args.index("-Q") + 1].split(",")) if "-Q" in args else set()
    return {q for q in named if "$" not in q}


def test_every_queue_has_a_worker_as_in_make_up() -> None:
    services = _services()
    consumed = set().union(*(_queues(s.get("command", [])) for s in services.values()))
    declared = {q.name for q in app.conf.task_queues}
    up = set()
    for line in (ROOT / "scripts" / "up.sh").read_text().splitlines():
        if match := re.search(r" -Q (\S+)", line):
            up |= {q for q in match.group(1).split(",") if "$" not in q}
    assert declared <= consumed, declared - consumed
    assert up <= consumed, up - consumed  # env.envhost1 too: the env host's own queue
    assert {settings.RL_TRAIN_QUEUE, settings.RL_ROLLOUT_QUEUE} <= consumed


def test_run_policy_servers_are_reached_at_the_trainer_service() -> None:
    services = _services()
    app_env = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["x-app"]["environment"]
    trainer = [
        name for name, s in services.items() if settings.RL_TRAIN_QUEUE in _queues(s.get("command", []))
    ]
    assert trainer == [app_env["RL_POLICY_HOST"]]
    assert app_env["RL_POLICY_BIND"] == "0.0.0.0"
    assert "ports" not in services[trainer[0]]  # on the compose network only


def test_sandboxed_chromium_may_make_user_namespaces_and_the_starter_is_not_fatal() -> None:
    services = _services()
    for name in ("envhost", "migrate"):  # the env host's sessions; the starter model's demo episodes
        assert SANDBOX <= set(services[name].get("security_opt", [])), name
    command = " ".join(services["migrate"]["command"])
    assert "policy_starter ||" in command  # as in make up: a warning, the untrained model stays
    for name, service in services.items():
        after = service.get("depends_on", {})
        if isinstance(after, dict) and "migrate" in after:
            assert after["migrate"] == {"condition": "service_completed_successfully"}, name


@pytest.mark.security
def test_compose_services_take_only_credentials() -> None:
    """Another container on the compose network (issue 30): no Redis without a password, no superuser
    for the app, no password on a command line (docs/threat-model.md)."""
    services = _services()
    postgres = services["postgres"]["environment"]
    assert postgres["POSTGRES_USER"] != "flywheel" and "scram-sha-256" in postgres["POSTGRES_INITDB_ARGS"]
    assert postgres["POSTGRES_HOST_AUTH_METHOD"] == "scram-sha-256"
    init = (ROOT / "deploy" / "postgres-init.sh").read_text()
    assert re.search(r"CREATE ROLE flywheel LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE", init)
    assert any("postgres-init.sh:/docker-entrypoint-initdb.d/" in v for v in services["postgres"]["volumes"])
    assert "--aclfile" in " ".join(services["redis"]["command"])
    acl = (ROOT / "deploy" / "redis-acl.sh").read_text()
    assert 'echo "user default off' in acl
    for name, service in services.items():
        env = service.get("environment") or {}
        if "DATABASE_URL" in env:
            assert env["DATABASE_URL"].startswith("postgres://flywheel:${FLYWHEEL_DB_PASSWORD:?"), name
        if "REDIS_URL" in env:
            assert re.match(
                r"redis://(web|worker|vncproxy):\$\{REDIS_(WEB|WORKER|VNCPROXY)_PASSWORD:\?", env["REDIS_URL"]
            ), name
        assert "--redis-url" not in " ".join(service.get("command") or []), name
    roles = {
        n: services[n]["environment"]["REDIS_URL"].split(":")[1]
        for n in ("web", "vnc-proxy", "worker-default")
    }
    assert roles == {"web": "//web", "vnc-proxy": "//vncproxy", "worker-default": "//worker"}


def test_live_think_aloud_has_its_own_worker_and_extra_env_hosts_scale() -> None:
    services = _services()
    live = [
        n for n, s in services.items() if _queues(s.get("command", [])) == {settings.THINKALOUD_LIVE_QUEUE}
    ]
    assert live == ["worker-asr-live"]
    # the full-pass worker takes live chunks first when it is idle, never the other way round
    assert _queues(services["worker-asr"]["command"]) == {
        settings.THINKALOUD_LIVE_QUEUE,
        settings.THINKALOUD_QUEUE,
    }
    extra = services["envhost-extra"]
    script = extra["command"][2]
    assert "FLYWHEEL_ENV_HOST=envhost-$$(hostname)" in script and "-Q env.$$FLYWHEEL_ENV_HOST" in script
    assert extra["deploy"]["replicas"] == 0 and "ports" not in extra  # scaled replicas publish nothing
    assert "%h" in " ".join(services["worker-rollout"]["command"])  # replicas get distinct names
