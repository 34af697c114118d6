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


def test_run_policy_servers_are_reached_at_the_service_that_starts_them() -> None:
    """A run's policy servers start where `serving_start` runs (at launch) and where the trainer runs
    (a restart); each registers http://RL_POLICY_HOST:port, so there RL_POLICY_HOST is that service's
    own name (compose's DNS name for it), bound on the network, never published."""
    services = _services()
    starters = {queue: [name for name, s in services.items() if queue in _queues(s.get("command", []))]
                for queue in (settings.RL_SERVING_START_QUEUE, settings.RL_TRAIN_QUEUE)}  # fmt: skip
    assert starters[settings.RL_TRAIN_QUEUE] == ["worker-train"]
    assert starters[settings.RL_SERVING_START_QUEUE] == ["worker-default"]
    for name in ("worker-train", "worker-default"):
        env = services[name]["environment"]
        assert env["RL_POLICY_HOST"] == name and env["RL_POLICY_BIND"] == "0.0.0.0", name
        assert "ports" not in services[name]  # on the compose network only
        # the trainer's checkpoints (RL_CHECKPOINT_ROOT under FLYWHEEL_VAR_DIR), which either's servers load
        assert "media:/data" in services[name]["volumes"] and env["FLYWHEEL_VAR_DIR"].startswith("/data/"), (
            name
        )


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
# password of a shared .env). Any other app service (env hosts, worker-env, beat): APP_SECRETS, its
# own Django key (not web's, which signs sessions), the app's database role and the workers' Redis user.
APP_SECRETS = {"secret_key_workers", "pg_app", "redis_worker"}
S3 = {"s3_access_key", "s3_secret_key"}  # media on S3: only where media is read or written
SERVICE_SECRETS = {
    "postgres": {"pg_superuser", "pg_app"},
    "redis": {"redis_web", "redis_worker", "redis_vncproxy"},
    "nginx": set(),
    "web": {"secret_key", "pg_app", "redis_web", "policy_key", "vnc_grant_key"} | S3,
    "vnc-proxy": {"redis_vncproxy", "vnc_grant_key"},
    "vllm": {"policy_key"},
    # the annotation model's callers: promotion of the starter; candidates, sampling; the server
    "migrate": APP_SECRETS | {"policy_key"},
    "worker-default": APP_SECRETS | {"policy_key"} | S3,
    "policy": APP_SECRETS | {"policy_key"},
    # screenshots, audio, exports, RL samples
    "worker-rollout": APP_SECRETS | S3,
    "worker-train": APP_SECRETS | S3,
    "worker-asr-live": APP_SECRETS | S3,
    "worker-export": APP_SECRETS | S3,
    "worker-asr": APP_SECRETS | S3 | {"refine_api_key"},  # the full pass refines with an LLM
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
    # the full-pass worker runs at a lower CPU priority (docs/scale.md): it takes no live chunk
    assert _queues(services["worker-asr"]["command"]) == {settings.THINKALOUD_QUEUE}
    extra = services["envhost-extra"]
    script = extra["command"][2]
    assert "FLYWHEEL_ENV_HOST=envhost-$$(hostname)" in script and "-Q env.$$FLYWHEEL_ENV_HOST" in script
    assert extra["deploy"]["replicas"] == 0 and "ports" not in extra  # scaled replicas publish nothing
    assert "%h" in " ".join(services["worker-rollout"]["command"])  # replicas get distinct names


VALUE = "{}-value-0123456789abcdef0123456789abcdef/@:".format


def _container_env(service: dict, files: dict[str, Path], **extra: str) -> dict[str, str]:
    """A compose service's environment as its container gets it, each /run/secrets/<name> standing
    for a file here; this machine's own settings (DATABASE…, REDIS…, SECRET…, POLICY…) left out."""
    import os

    base = {
        k: v for k, v in os.environ.items() if not k.startswith(("DATABASE", "REDIS", "SECRET", "POLICY"))
    }
    env = {k: str(v) for k, v in service["environment"].items()}
    env = {k: str(files[v.removeprefix("/run/secrets/")]) if v.startswith("/run/secrets/") else v
           for k, v in env.items()}  # fmt: skip
    return base | env | extra


def _settings_of(env: dict[str, str]) -> tuple[int, str]:
    """What `env`'s Django settings hold (JSON on stdout), or their error (stderr)."""
    import subprocess
    import sys

    code = (
        "import django, json; django.setup(); from django.conf import settings as s; "
        "from webapp.store.checkpoints import CheckpointError, policy_weights_secret\n"
        "try: key = policy_weights_secret()\nexcept CheckpointError as exc: key = 'refused: ' + str(exc)\n"
        "db = s.DATABASES['default']; o = s.STORAGES['default'].get('OPTIONS', {})\n"
        "print(json.dumps([s.SECRET_KEY, db['USER'], db['PASSWORD'], s.REDIS_URL, key, "
        "str(s.VNC_GRANT_KEY_FILE), o.get('access_key'), o.get('secret_key'), s.THINKALOUD_REFINE_API_KEY]))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    return done.returncode, done.stdout.strip().splitlines()[-1] if done.returncode == 0 else done.stderr


@pytest.mark.security
def test_compose_environments_read_their_secret_files(tmp_path: Path) -> None:
    """What each container's settings make of its compose environment, without Docker: every Django
    service's settings (prod) built from its environment and stand-in secret files hold web's
    SECRET_KEY in web only, the S3 keys where media is used only, the refiner's key in the full-pass
    ASR worker only, the annotation model's key in its callers only (the others are refused a
    derived one); the VNC proxy's Redis URL carries its own password."""
    import json

    import redis

    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    files = {name: tmp_path / name for name in compose["secrets"]}
    for name, path in files.items():
        path.write_text(f"{VALUE(name)}\n")
    extra = {"ALLOWED_HOSTS": "localhost", "FLYWHEEL_VAR_DIR": str(tmp_path), "FLYWHEEL_S3_BUCKET": "media"}
    django = [n for n, s in services.items() if "DJANGO_SETTINGS_MODULE" in (s.get("environment") or {})]
    assert {"web", "worker-asr", "envhost", "beat", "policy"} <= set(django)
    # one container of each distinct set of secret settings (settings take seconds to build)
    shapes: dict[tuple, str] = {}
    for name in django:
        env = services[name]["environment"]
        shapes.setdefault(
            tuple(sorted((k, v) for k, v in env.items() if k.endswith(("_FILE", "_URL")))), name
        )
    assert len(shapes) >= 6, shapes.values()  # web, policy callers, media, refiner, none of them
    for name in shapes.values():
        held = set(services[name]["secrets"])
        rc, out = _settings_of(_container_env(services[name], files, **extra))
        assert rc == 0, (name, out[-2000:])
        key, user, password, redis_url, policy, grant_file, s3_id, s3_key, refine = json.loads(out)
        assert key == VALUE("secret_key" if name == "web" else "secret_key_workers"), name
        assert (user, password) == ("flywheel", VALUE("pg_app")), name
        role = "web" if name == "web" else "worker"
        parsed = redis.connection.parse_url(redis_url)
        assert (parsed["username"], parsed["password"], parsed["host"]) == (
            role,
            VALUE(f"redis_{role}"),
            "redis",
        )
        if "policy_key" in held:
            assert policy == VALUE("policy_key"), name
        else:  # never a key derived from this container's own SECRET_KEY
            assert policy.startswith("refused: this container holds no key"), (name, policy)
        assert (s3_id, s3_key) == (
            (VALUE("s3_access_key"), VALUE("s3_secret_key")) if S3 <= held else (None, None)
        )
        assert refine == (VALUE("refine_api_key") if "refine_api_key" in held else ""), name
        if name == "web":
            assert grant_file == str(files["vnc_grant_key"])

    import subprocess
    import sys

    proxy = "from workers.secret_env import secret_from_env as f, url_with_password as u; import os; "
    proxy += "print(u(os.environ['REDIS_URL'], f('REDIS_PASSWORD')))"
    done = subprocess.run([sys.executable, "-c", proxy], cwd=ROOT, env=_container_env(services["vnc-proxy"], files),
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    parsed = redis.connection.parse_url(done.stdout.strip())
    assert (parsed["username"], parsed["password"]) == ("vncproxy", VALUE("redis_vncproxy")), done.stderr


@pytest.mark.security
def test_a_secret_left_in_dot_env_stops_a_compose_container(tmp_path: Path) -> None:
    """`.env` reaches every app container (`env_file`): a secret given there as a value (the S3 keys
    and the refiner's key before, boto3's own AWS_* variables, a password in a URL) would reach all of
    them, so the container refuses to start and names it; the operator's empty files (S3 not used)
    are "not given", not an error."""
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    files = {name: tmp_path / name for name in compose["secrets"]}
    for name, path in files.items():
        path.write_text("" if name in S3 | {"refine_api_key"} else f"{VALUE(name)}\n")
    env = _container_env(compose["services"]["worker-export"], files, ALLOWED_HOSTS="localhost",
                         FLYWHEEL_VAR_DIR=str(tmp_path), FLYWHEEL_S3_BUCKET="media")  # fmt: skip
    rc, out = _settings_of(env)
    assert rc == 0, out[-2000:]
    assert out.endswith('null, null, ""]')  # empty files: no S3 keys (boto3's own chain), no refiner
    for name, value in [
        ("FLYWHEEL_S3_SECRET_KEY", "s3-secret-from-dot-env"),
        ("THINKALOUD_REFINE_API_KEY", "sk-from-dot-env"),
        ("AWS_SECRET_ACCESS_KEY", "aws-from-dot-env"),
        ("SECRET_KEY", "k" * 40),
        ("CELERY_BROKER_URL", "redis://worker:pw-from-dot-env@redis:6379/0"),
    ]:
        rc, out = _settings_of(env | {name: value})
        assert rc != 0 and f"{name}: a secret set as an environment value" in out, (name, out[-600:])
        assert value not in out, name  # the error names the variable, never its value


@pytest.mark.security
def test_make_compose_secrets_writes_every_file_compose_mounts(tmp_path: Path) -> None:
    """`make compose-secrets` (scripts/compose-secrets.sh), run for real: every secret docker-compose.yml
    declares exists afterwards, 0600 in a 0700 directory; random ones differ and survive a second run;
    the operator's credentials come from its environment (empty files when not given)."""
    import os
    import stat
    import subprocess

    declared = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["secrets"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLYWHEEL_S3", "THINKALOUD"))}
    env |= {"FLYWHEEL_VAR_DIR": str(tmp_path / "var"), "MEDIA_ROOT": str(tmp_path / "var" / "media")}
    script = [str(ROOT / "scripts" / "compose-secrets.sh")]
    done = subprocess.run(script, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    secrets = tmp_path / "var" / "secrets"
    assert stat.S_IMODE(secrets.stat().st_mode) == 0o700
    first = {}
    for name, spec in declared.items():
        path = secrets / Path(spec["file"]).name
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, name
        first[name] = path.read_text()
    operator = {"s3_access_key", "s3_secret_key", "refine_api_key"}
    assert all(first[n] == "" for n in operator)
    random = [first[n].strip() for n in declared if n not in operator]
    assert len(set(random)) == len(random) and min(map(len, random)) >= 32
    given = {"FLYWHEEL_S3_ACCESS_KEY": "AKIAEXAMPLE", "THINKALOUD_REFINE_API_KEY": "sk-example"}
    done = subprocess.run(script, env=env | given, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    again = {n: (secrets / Path(s["file"]).name).read_text() for n, s in declared.items()}
    assert again == first | {"s3_access_key": "AKIAEXAMPLE\n", "refine_api_key": "sk-example\n"}
