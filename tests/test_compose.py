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


# The secrets each compose service may hold (issue 30: one compromised container held every
# password of a shared .env). Any other app service: APP_SECRETS.
APP_SECRETS = {"secret_key", "pg_app", "redis_worker", "policy_key"}
SERVICE_SECRETS = {
    "postgres": {"pg_superuser", "pg_app"},
    "redis": {"redis_web", "redis_worker", "redis_vncproxy"},
    "nginx": set(),
    "web": {"secret_key", "pg_app", "redis_web", "policy_key", "vnc_grant_key"},
    "vnc-proxy": {"redis_vncproxy", "vnc_grant_key"},
    "vllm": {"policy_key"},
}


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
    assert 'cat "$FLYWHEEL_DB_PASSWORD_FILE"' in init
    assert any("postgres-init.sh:/docker-entrypoint-initdb.d/" in v for v in services["postgres"]["volumes"])
    assert "--aclfile" in " ".join(services["redis"]["command"])
    acl = (ROOT / "deploy" / "redis-acl.sh").read_text()
    assert 'echo "user default off' in acl
    for name, service in services.items():
        env = service.get("environment") or {}
        if "DATABASE_URL" in env:
            assert env["DATABASE_URL"] == "postgres://flywheel@postgres:5432/flywheel", name  # no password
        if "REDIS_URL" in env:
            user = re.match(r"redis://(web|worker|vncproxy)@redis:6379/0$", env["REDIS_URL"])
            assert user and env["REDIS_PASSWORD_FILE"] == f"/run/secrets/redis_{user.group(1)}", name
        assert "--redis-url" not in " ".join(service.get("command") or []), name
    roles = {n: services[n]["environment"]["REDIS_URL"] for n in ("web", "vnc-proxy", "worker-default")}
    assert roles == {
        "web": "redis://web@redis:6379/0",
        "vnc-proxy": "redis://vncproxy@redis:6379/0",
        "worker-default": "redis://worker@redis:6379/0",
    }


@pytest.mark.security
def test_each_compose_service_gets_only_the_secrets_it_needs() -> None:
    """No secret is an environment value shared by every container (`env_file: .env` carried every
    password): each service mounts only its own secret files, e.g. the VNC proxy holds neither the
    database password nor SECRET_KEY, only postgres the superuser's password."""
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services, declared = compose["services"], compose["secrets"]
    generated = (ROOT / "scripts" / "compose-secrets.sh").read_text()
    for name, spec in declared.items():
        assert spec == {"file": f"./var/secrets/{name}"}, name  # 0600 files, never in the repo
        assert re.search(rf"\b{name}\b", generated), f"scripts/compose-secrets.sh does not make {name}"
    secret_like = re.compile(r"PASSWORD|SECRET|_KEY$|TOKEN", re.IGNORECASE)
    for name, service in services.items():
        held = set(service.get("secrets") or [])
        assert held == SERVICE_SECRETS.get(name, APP_SECRETS), name
        assert held <= set(declared), name
        env = service.get("environment") or {}
        for key, value in env.items():
            if secret_like.search(key):  # a secret travels as a file the service holds, never a value
                assert key.endswith("_FILE") and value.startswith("/run/secrets/"), (name, key)
                assert value.removeprefix("/run/secrets/") in held, (name, key)
            assert "${" not in str(value) or not secret_like.search(str(value)), (name, key)
        text = " ".join(
            str(part) for part in (service.get("command") or []) + (service.get("entrypoint") or [])
        )
        for secret in held:
            assert f"/run/secrets/{secret}" in text or any(
                str(v) == f"/run/secrets/{secret}" for v in env.values()
            ), (name, secret)  # held for a reason: its settings or its command read it
    proxy = services["vnc-proxy"]
    assert "env_file" not in proxy and "media:/data" not in proxy.get("volumes", [])
    assert not {"DATABASE_URL", "SECRET_KEY_FILE", "DATABASE_PASSWORD_FILE"} & set(proxy["environment"])
    assert [n for n, s in services.items() if "pg_superuser" in (s.get("secrets") or [])] == ["postgres"]
    # .env (every app container's env_file) names no credential any more
    example = (ROOT / ".env.example").read_text()
    for variable in ("POSTGRES_SUPERUSER_PASSWORD", "FLYWHEEL_DB_PASSWORD", "REDIS_WEB_PASSWORD"):
        assert not re.search(rf"^{variable}=", example, re.MULTILINE), variable


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


def test_compose_environments_read_their_secret_files(tmp_path: Path) -> None:
    """What a container's settings make of its compose environment, without Docker: each
    /run/secrets/<name> stands for a file here; the web server's Django settings (prod) and the VNC
    proxy's Redis URL carry the passwords from those files, and nothing else names them."""
    import json
    import os
    import subprocess
    import sys

    services = _services()
    files = {}
    for name in ("secret_key", "pg_app", "redis_web", "redis_vncproxy", "policy_key", "vnc_grant_key"):
        files[name] = tmp_path / name
        files[name].write_text(f"{name}-value-0123456789abcdef0123456789abcdef/@:\n")

    def environment(service: str) -> dict[str, str]:
        env = {k: str(v) for k, v in services[service]["environment"].items()}
        return {k: str(files[v.removeprefix("/run/secrets/")]) if v.startswith("/run/secrets/") else v
                for k, v in env.items()}  # fmt: skip

    base = {
        k: v for k, v in os.environ.items() if not k.startswith(("DATABASE", "REDIS", "SECRET", "POLICY"))
    }
    code = (
        "import django, json; django.setup(); from django.conf import settings as s; "
        "db = s.DATABASES['default']; print(json.dumps([s.SECRET_KEY, db['USER'], db['PASSWORD'], "
        "s.REDIS_URL, s.POLICY_WEIGHTS_SECRET, str(s.VNC_GRANT_KEY_FILE)]))"
    )
    web = environment("web") | {"ALLOWED_HOSTS": "localhost", "FLYWHEEL_VAR_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=base | web, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    key, user, password, redis_url, policy_key, grant_file = json.loads(done.stdout.strip().splitlines()[-1])
    value = "{}-value-0123456789abcdef0123456789abcdef/@:".format
    assert (key, user, password, policy_key) == (
        value("secret_key"),
        "flywheel",
        value("pg_app"),
        value("policy_key"),
    )
    import redis

    parsed = redis.connection.parse_url(redis_url)
    assert (parsed["username"], parsed["password"], parsed["host"]) == ("web", value("redis_web"), "redis")
    assert grant_file == str(files["vnc_grant_key"])

    proxy = "from workers.secret_env import secret_from_env as f, url_with_password as u; import os; "
    proxy += "print(u(os.environ['REDIS_URL'], f('REDIS_PASSWORD')))"
    done = subprocess.run([sys.executable, "-c", proxy], cwd=ROOT, env=base | environment("vnc-proxy"),
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    parsed = redis.connection.parse_url(done.stdout.strip())
    assert (parsed["username"], parsed["password"]) == ("vncproxy", value("redis_vncproxy")), done.stderr
