"""The platform as `make up` starts it, for browser journeys: one isolated stack per test session.

`live_stack` runs `make up` with its own port, var dir (and so its own PostgreSQL cluster and Redis
server, scripts/services.sh), VNC proxy and policy ports (like tests/test_smoke_stack.py), so a running
`make up` on :8000 is never disturbed, and
`make down` at the end. Nothing of the stack is played by the test: the web server, the Celery
workers, the env host, the VNC proxy and the policy server are the real processes with the demo data
and demo logins `make up` loads.
`stack.env` holds the stack's DATABASE_URL and REDIS_URL (the `web` user) from its var/secrets/env.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Page

ROOT = Path(__file__).resolve().parent.parent.parent
DEMO_PASSWORDS = {name: name for name in ("annotator", "reviewer", "reviewer2", "researcher", "admin")}


# What the test process may have been given (scripts/test.sh): the stack generates its own.
_SERVICES = ("DATABASE_URL", "REDIS_URL", "SECRET_KEY", "DEBUG", "CELERY_BROKER_URL")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class LiveStack:
    base_url: str
    env: dict[str, str]
    var_dir: Path
    _tokens: dict[str, str] = field(default_factory=dict)

    def login(self, page: Page, username: str, password: str | None = None) -> None:
        """Sign in through the login form as a person would."""
        page.goto(f"{self.base_url}/login/")
        page.get_by_label("Username").fill(username)
        page.get_by_label("Password").fill(password or DEMO_PASSWORDS[username])
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url(lambda url: "/login/" not in url)

    def token(self, username: str) -> str:
        if username not in self._tokens:
            r = httpx.post(
                f"{self.base_url}/api/auth/token/",
                data={"username": username, "password": DEMO_PASSWORDS[username]},
                timeout=30,
            )
            r.raise_for_status()
            self._tokens[username] = r.json()["token"]
        return self._tokens[username]

    def api(self, username: str) -> httpx.Client:
        """An HTTP client for the stack's API with that demo user's token."""
        return httpx.Client(
            base_url=self.base_url, headers={"Authorization": f"Token {self.token(username)}"}, timeout=60
        )

    def log(self, name: str) -> str:
        """The tail of one process's log (var/log/NAME.log), for assertion messages."""
        path = self.var_dir / "log" / f"{name}.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else f"(no {path})"


def _log_tails(var_dir: Path, lines: int = 40) -> str:
    """The end of each process log of a stack that did not come up (the var dir goes at teardown)."""
    tails = []
    for log in sorted((var_dir / "log").glob("*.log")):
        text = log.read_text(errors="replace").splitlines()[-lines:]
        tails.append(f"\n--- {log.name} ---\n" + "\n".join(text))
    return "".join(tails)


@pytest.fixture(scope="session")
def live_stack() -> Iterator[LiveStack]:
    # The postgres account runs the stack's cluster: the var dir's parent is traversable (0711).
    top = Path(tempfile.mkdtemp(prefix="flywheel-e2e-"))
    top.chmod(0o711)
    var_dir = top / "var"
    port, policy_port = _free_port(), _free_port()
    env = {
        **os.environ,
        "FLYWHEEL_PORT": str(port),
        "FLYWHEEL_VAR_DIR": str(var_dir),
        "MEDIA_ROOT": str(var_dir / "media"),
        "VNC_PROXY_LISTEN": f"127.0.0.1:{_free_port()}",
        "POLICY_PORT": str(policy_port),
        "POLICY_BASE_URL": f"http://127.0.0.1:{policy_port}/v1",
        # Its own PostgreSQL and Redis from ports just free, not the first free one from 15432 / 16379:
        # another stack starting meanwhile scans from there too (a port recorded, then taken).
        "FLYWHEEL_PG_PORT": str(_free_port()),
        "FLYWHEEL_REDIS_PORT": str(_free_port()),
        "DJANGO_SETTINGS_MODULE": "webapp.settings.dev",
        # The stack's own (empty) mirror of OSWorld task files; a test lays files in it.
        "OSWORLD_MIRROR_DIR": str(var_dir.parent / "osworld-mirror"),
    }
    # The test process's own settings must not leak into the stack's processes.
    for name in ("FLYWHEEL_TEST_MEDIA_ROOT", "TEST_REDIS_URL", "PYTEST_CURRENT_TEST", *_SERVICES):
        env.pop(name, None)
    (var_dir.parent / "osworld-mirror").mkdir()
    stack = LiveStack(base_url=f"http://127.0.0.1:{port}", env=env, var_dir=var_dir)
    try:
        up = subprocess.run(["make", "up"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
        assert up.returncode == 0, up.stdout[-3000:] + up.stderr[-3000:] + _log_tails(var_dir)
        for line in (var_dir / "secrets" / "env").read_text().splitlines():
            name, _, value = line.partition("=")
            if name in ("DATABASE_URL", "REDIS_URL"):
                env[name] = value
        yield stack
    finally:
        subprocess.run(["make", "down"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
        shutil.rmtree(top, ignore_errors=True)
