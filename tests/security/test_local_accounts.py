"""Other local accounts against the platform's services (issue 30, findings 4-6; docs/threat-model.md,
"Other local accounts").

The platform's own PostgreSQL and Redis are started as `make up` starts them (scripts/services.sh), in
a throwaway var dir; every probe runs as a throwaway unprivileged account this module creates
(`useradd`, then `runuser -u`), the way any other user of the machine would: no password, no file of
ours. Each probe also shows the platform's own credentials still work, so a refusal means the
credentials are checked, not that the service is down.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent

pytestmark = [
    pytest.mark.security,
    pytest.mark.skipif(os.geteuid() != 0, reason="creating a throwaway local account needs root"),
]

# What the test process may have been given (scripts/test.sh): the stack under test generates its own.
_INHERITED = ("DATABASE_URL", "REDIS_URL", "SECRET_KEY", "DEBUG", "FLYWHEEL_PG_DIR", "CELERY_BROKER_URL")


@dataclass
class Platform:
    var: Path

    def secret(self, name: str) -> str:
        return (self.var / "secrets" / name).read_text().strip()

    @property
    def pg_port(self) -> str:
        return self.secret("postgres.port")

    @property
    def redis_port(self) -> str:
        return self.secret("redis.port")


def _services(var: Path, *functions: str, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in _INHERITED} | {"FLYWHEEL_VAR_DIR": str(var)}
    env |= extra
    script = f"source scripts/lib.sh && {' && '.join(functions)}"
    return subprocess.run(
        ["bash", "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.fixture(scope="module")
def platform() -> Iterator[Platform]:
    # The postgres account runs the cluster: the directory above var/ is traversable (0711), not listable.
    top = Path(tempfile.mkdtemp(prefix="flywheel-services-"))
    top.chmod(0o711)
    var = top / "var"
    # Ports the kernel just gave out as free, not the first free one from 15432 / 16379 on: another
    # stack starting meanwhile (a `make up`, the e2e stack) scans from there too and took the port
    # this cluster had recorded while initdb ran ("port 15433 … is taken by another process").
    ports = {"FLYWHEEL_PG_PORT": str(_free_port()), "FLYWHEEL_REDIS_PORT": str(_free_port())}
    started = _services(var, "ensure_services", **ports)
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        yield Platform(var)
    finally:
        _services(var, "stop_platform_redis", "stop_platform_postgres")
        shutil.rmtree(top, ignore_errors=True)


@pytest.fixture(scope="module")
def local_user() -> Iterator[str]:
    name = f"fwprobe{uuid.uuid4().hex[:8]}"
    subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name], check=True)
    try:
        yield name
    finally:
        subprocess.run(["userdel", name], check=False)


def _as(user: str, *argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["runuser", "-u", user, "--", *argv],
        cwd="/",
        env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", **(env or {})},
        capture_output=True,
        text=True,
        timeout=30,
    )


def _redis(
    port: str, *command: str, user: str | None = None, password: str | None = None
) -> tuple[list[str], dict[str, str]]:
    argv = ["redis-cli", "--no-auth-warning", "-h", "127.0.0.1", "-p", port]
    if user:
        argv += ["--user", user]
    env = {"REDISCLI_AUTH": password} if password else {}
    return [*argv, *command], env


def test_redis_refuses_a_local_user_without_the_password(platform: Platform, local_user: str) -> None:
    port = platform.redis_port
    for command in (("PING",), ("GET", "flywheel:vnc:token:x"), ("LPUSH", "celery", "{}")):
        argv, env = _redis(port, *command)
        probe = _as(local_user, *argv, env=env)
        assert "NOAUTH" in probe.stdout + probe.stderr, (command, probe.stdout, probe.stderr)
    argv, env = _redis(port, "PING", user="default", password="")
    assert "PONG" not in _as(local_user, *argv, env=env).stdout
    # The platform's own user gets in: the refusal above is the password check.
    argv, env = _redis(port, "PING", user="web", password=platform.secret("redis_web"))
    assert _as(local_user, *argv, env=env).stdout.strip() == "PONG"


def test_redis_roles_hold_only_what_they_need(platform: Platform) -> None:
    port = platform.redis_port

    def as_role(role: str, *command: str) -> str:
        argv, env = _redis(port, *command, user=role, password=platform.secret(f"redis_{role}"))
        done = subprocess.run(argv, env={**os.environ, **env}, capture_output=True, text=True, timeout=30)
        return done.stdout + done.stderr

    # The VNC proxy reads grants and appends take-over input, nothing else: no Celery task, no other key.
    assert "NOPERM" in as_role("vncproxy", "LPUSH", "celery", "{}")
    assert "NOPERM" in as_role("vncproxy", "SET", "flywheel:vnc:token:forged", "{}")
    assert "NOPERM" in as_role("vncproxy", "GET", "flywheel:fleet:leases")
    assert "NOPERM" not in as_role("vncproxy", "GET", "flywheel:vnc:token:abc")
    # The web and worker users run the queues but no admin command (no CONFIG SET dir + SAVE).
    for role in ("web", "worker"):
        assert "NOPERM" in as_role(role, "CONFIG", "GET", "dir")
        assert "NOPERM" not in as_role(role, "LLEN", "celery")


def test_postgres_refuses_a_local_user_without_the_password(platform: Platform, local_user: str) -> None:
    for role in ("postgres", "flywheel"):
        probe = _as(
            local_user, "psql", "-w", "-h", "127.0.0.1", "-p", platform.pg_port, "-U", role,
            "-d", "postgres", "-c", "SELECT 1",
        )  # fmt: skip
        assert probe.returncode != 0, probe.stdout
        assert "password" in probe.stderr, probe.stderr
    # The cluster's unix socket is in a 0700 directory of the postgres account.
    socket_dir = platform.var / "pg" / "run"
    probe = _as(local_user, "psql", "-w", "-h", str(socket_dir), "-p", platform.pg_port, "-U", "postgres")
    assert probe.returncode != 0 and "Permission denied" in probe.stderr, probe.stderr


def test_the_app_role_is_no_superuser(platform: Platform) -> None:
    import psycopg

    with psycopg.connect(
        host="127.0.0.1", port=platform.pg_port, user="flywheel", dbname="flywheel",
        password=platform.secret("pg_app"), autocommit=True,
    ) as conn:  # fmt: skip
        assert conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone() == (
            False,
        )
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("COPY (SELECT 1) TO PROGRAM 'id'")


def test_secrets_are_unreadable_to_a_local_user(platform: Platform, local_user: str) -> None:
    secrets = platform.var / "secrets"
    for target in (secrets / "secret_key", secrets / "env", platform.var / "redis" / "redis.conf"):
        probe = _as(local_user, "cat", str(target))
        assert probe.returncode != 0 and "Permission denied" in probe.stderr, (target, probe.stderr)
    assert (secrets.stat().st_mode & 0o777) == 0o700
    assert all((f.stat().st_mode & 0o077) == 0 for f in secrets.iterdir())


def _settings_as_make_up_has_them(var: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    """`python manage.py ...` after `make up`: settings.dev with that var dir, nothing else given."""
    code = (
        "import django; django.setup(); from django.conf import settings as s; "
        "print(s.DEBUG, s.SECRET_KEY, s.DATABASES['default']['USER'])"
    )
    env = {k: v for k, v in os.environ.items() if k not in _INHERITED}
    env |= {"FLYWHEEL_VAR_DIR": str(var), "DJANGO_SETTINGS_MODULE": "webapp.settings.dev", **extra}
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )


def test_make_up_runs_debug_off_with_its_own_secret_key(platform: Platform, tmp_path: Path) -> None:
    from webapp.settings.base import INSECURE_DEV_SECRET_KEY

    done = _settings_as_make_up_has_them(platform.var)
    assert done.returncode == 0, done.stderr
    debug, key, user = done.stdout.split()
    assert (debug, user) == ("False", "flywheel")
    assert key == platform.secret("secret_key") and key != INSECURE_DEV_SECRET_KEY and len(key) >= 32
    # Without `make up`'s secrets, DEBUG off refuses the public key instead of signing with it.
    refused = _settings_as_make_up_has_them(tmp_path, DEBUG="false")
    assert refused.returncode != 0 and "public development key" in refused.stderr


def test_x11vnc_gets_none_of_the_platforms_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    """x11vnc is a host process of the session's uid: the env host's environment (the worker's Redis
    password, the app's database password, the SECRET_KEY) must not be in its /proc/<pid>/environ."""
    from workers.envs.desktop import DesktopConfig, DesktopEnv

    marker = f"never-here-{uuid.uuid4().hex}"
    monkeypatch.setenv("REDIS_URL", f"redis://worker:{marker}@127.0.0.1:6379/0")
    monkeypatch.setenv("SECRET_KEY", marker)
    desktop = DesktopEnv(DesktopConfig(display_range=(170, 199), apps=()))
    try:
        desktop.boot()
        vnc = desktop._vnc
        assert vnc is not None and vnc.proc is not None
        environ = Path(f"/proc/{vnc.proc.pid}/environ").read_bytes()
        assert b"x11vnc" in Path(f"/proc/{vnc.proc.pid}/cmdline").read_bytes()
        assert marker.encode() not in environ and b"PATH=" in environ
    finally:
        desktop.close()


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _probe_status(user: str, url: str, *curl: str) -> str:
    """The HTTP status another account gets from `url` (curl as that account)."""
    done = _as(user, "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "20", *curl, url)
    return done.stdout.strip()


@pytest.mark.django_db(transaction=True)
def test_policy_servers_answer_a_local_user_nothing(local_user: str) -> None:
    """The annotation model's server (`manage.py serve_policy`, as `make up` starts it) and a run's own
    server (`python -m workers.policy.server` with the run's key in its environment, as
    rl_control.engine.serving starts it): another account gets 401 for completions and the model
    card, 403 for a hot-swap, with no key or a guessed one, and cannot read the key from the process;
    the platform's own key gets answers, so the refusal is the key check."""
    from tests.service_urls import subprocess_database_url
    from webapp.store.checkpoints import (
        checkpoint_create_initial,
        checkpoint_dir,
        checkpoint_promote_annotation,
        policy_weights_secret,
    )

    checkpoint = checkpoint_create_initial(version="probe-a", seed=0)
    checkpoint_promote_annotation(checkpoint=checkpoint)
    env = {**os.environ, "DATABASE_URL": subprocess_database_url(), "DB_POOL_ROLE": "command"}
    env.pop("FLYWHEEL_POLICY_SECRET", None)
    run_key = uuid.uuid4().hex + uuid.uuid4().hex
    ports = {"annotation": _free_port(), "run": _free_port()}
    commands = {
        "annotation": ([sys.executable, "manage.py", "serve_policy", "--port", str(ports["annotation"]),
                        "--threads", "1"], env),
        "run": ([sys.executable, "-m", "workers.policy.server", "--checkpoint", str(checkpoint_dir(checkpoint)),
                 "--port", str(ports["run"]), "--model-name", "run1", "--threads", "1"],
                {**env, "FLYWHEEL_POLICY_SECRET": run_key}),
    }  # fmt: skip
    keys = {"annotation": policy_weights_secret(), "run": run_key}
    procs = {
        name: subprocess.Popen(argv, env=penv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for name, (argv, penv) in commands.items()
    }
    try:
        import httpx

        for name, port in ports.items():
            deadline = time.monotonic() + 180
            while True:
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                proc = procs[name]
                assert proc.poll() is None, (proc.stderr.read() if proc.stderr else b"").decode()[-2000:]
                assert time.monotonic() < deadline, f"the {name} server did not come up"
                time.sleep(0.5)
        chat = '{"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}'
        swap = json.dumps({"path": str(checkpoint_dir(checkpoint)), "version": "evil"})
        for name, port in ports.items():
            base = f"http://127.0.0.1:{port}"
            for guess in ([], ["-H", "Authorization: Bearer guess"], ["-H", "Authorization: Bearer "]):
                json_body = [*guess, "-H", "Content-Type: application/json"]
                assert _probe_status(local_user, f"{base}/v1/models", *guess) == "401", name
                assert (
                    _probe_status(local_user, f"{base}/v1/chat/completions", *json_body, "-d", chat) == "401"
                )
                for route in ("load_weights", "load_lora_adapter"):
                    assert _probe_status(local_user, f"{base}/v1/{route}", *json_body, "-d", swap) == "403"
            pid = procs[name].pid
            environ = _as(local_user, "cat", f"/proc/{pid}/environ")
            assert environ.returncode != 0 and "Permission denied" in environ.stderr, environ.stderr
            assert keys[name] not in Path(f"/proc/{pid}/cmdline").read_text()
            # The platform's clients (the web app and workers for the annotation server, the run's
            # rollouts for its own) send the key and get answers.
            auth = {"Authorization": f"Bearer {keys[name]}"}
            card = httpx.get(f"{base}/v1/models", headers=auth, timeout=10)
            assert card.status_code == 200 and card.json()["data"][0]["model_version"] == "probe-a"
            answer = httpx.post(f"{base}/v1/chat/completions", content=chat, headers=auth, timeout=60)
            assert answer.status_code == 200, answer.text
    finally:
        for proc in procs.values():
            proc.terminate()
        for proc in procs.values():
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()


def test_media_logs_and_var_files_are_closed_to_a_local_user(local_user: str) -> None:
    """var/media (screenshots, audio, exports, checkpoints), var/log and the files in var/ (the demo
    logins) were readable by every account. Every script sources scripts/lib.sh, which closes them —
    an install an older `make up` left world-readable too — and runs the platform with umask 027."""
    top = Path(tempfile.mkdtemp(prefix="flywheel-var-"))
    top.chmod(0o755)  # a checkout others may traverse, as /home/<user> or /srv often are
    var = top / "var"
    old = {var / "media" / "screenshots" / "t1" / "0.png": b"a screenshot",
           var / "log" / "web.log": b"a log line", var / "demo_logins.txt": b"admin / demo-password"}  # fmt: skip
    try:
        for path, data in old.items():  # as an older make up left them: 0755 directories, 0644 files
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            path.chmod(0o644)
        for directory in (var, var / "media", var / "media" / "screenshots", var / "log"):
            directory.chmod(0o755)
        for path in old:
            assert _as(local_user, "cat", str(path)).returncode == 0  # open before scripts/lib.sh ran
        env = {k: v for k, v in os.environ.items() if k not in (*_INHERITED, "MEDIA_ROOT")}
        done = subprocess.run(
            ["bash", "-c", 'source scripts/lib.sh && echo x > "$VAR/media/new.png" && echo y >> "$VAR/log/new.log"'],
            cwd=ROOT, env=env | {"FLYWHEEL_VAR_DIR": str(var)}, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        for path in [*old, var / "media" / "new.png", var / "log" / "new.log"]:
            probe = _as(local_user, "cat", str(path))
            assert probe.returncode != 0 and "Permission denied" in probe.stderr, (path, probe.stderr)
        assert _as(local_user, "ls", str(var)).returncode != 0  # var/ is not listable
        for path in (var / "media" / "new.png", var / "log" / "new.log"):  # the umask
            assert path.stat().st_mode & 0o777 == 0o640, path
        for directory in (var / "media", var / "log", var / "run"):
            assert directory.stat().st_mode & 0o777 == 0o750, directory
        # var/ stays traversable, for the postgres account's var/pg
        assert var.stat().st_mode & 0o777 == 0o711

        # What must stay reachable under that umask still is: the VNC socket root (x11vnc, as the
        # session's uid, makes its socket in its own directory below it).
        from workers.envs.vnc.server import ensure_socket_root

        before = os.umask(0o027)
        try:
            root = ensure_socket_root(top / "vnc")
        finally:
            os.umask(before)
        assert root.stat().st_mode & 0o777 == 0o711
    finally:
        shutil.rmtree(top, ignore_errors=True)
