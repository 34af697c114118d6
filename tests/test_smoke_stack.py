"""`make up` on this machine: the stack serves the login page and an authenticated API call.

Isolated from a running stack: its own port, var dir (pids, logs, secrets), and so its own PostgreSQL
cluster and Redis server (scripts/services.sh), VNC proxy and policy ports. Marked `smoke` (it installs
nothing new here but starts ~12 processes); run with `make smoke`, which CI runs after the default suite.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.smoke


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# What the test process may have been given (scripts/test.sh): the stack generates its own.
INHERITED = ("DATABASE_URL", "REDIS_URL", "SECRET_KEY", "DEBUG", "TEST_REDIS_URL", "FLYWHEEL_TEST_MEDIA_ROOT")


@pytest.fixture
def stack_dir() -> Iterator[Path]:
    """A var dir's parent the postgres account can traverse (0711): the stack's cluster lives in it."""
    top = Path(tempfile.mkdtemp(prefix="flywheel-smoke-"))
    top.chmod(0o711)
    yield top
    shutil.rmtree(top, ignore_errors=True)


# Two `make up`s and a `make down` (subprocess timeouts 900 + 600 + 120 s), longer than the default 300 s.
@pytest.mark.timeout(1800)
def test_make_up_serves_login_and_api(stack_dir: Path) -> None:
    port = _free_port()
    env = {
        **{k: v for k, v in os.environ.items() if k not in INHERITED},
        "FLYWHEEL_PORT": str(port),
        "FLYWHEEL_VAR_DIR": str(stack_dir / "var"),
        "MEDIA_ROOT": str(stack_dir / "var" / "media"),
        "VNC_PROXY_LISTEN": f"127.0.0.1:{_free_port()}",
        "POLICY_PORT": str(_free_port()),
        "POLICY_BASE_URL": "",
        "FLEET_WARM_POOL": "terminal=1",
        "DJANGO_SETTINGS_MODULE": "webapp.settings.dev",
    }
    env["POLICY_BASE_URL"] = f"http://127.0.0.1:{env['POLICY_PORT']}/v1"
    try:
        up = subprocess.run(["make", "up"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
        assert up.returncode == 0, up.stdout[-3000:] + up.stderr[-3000:]
        assert f"http://127.0.0.1:{port}/" in up.stdout and "annotator" in up.stdout

        base = f"http://127.0.0.1:{port}"
        login = httpx.get(f"{base}/login/", timeout=10)
        assert login.status_code == 200 and "Sign in" in login.text
        token = httpx.post(
            f"{base}/api/auth/token/", data={"username": "researcher", "password": "researcher"}
        ).json()
        me = httpx.get(f"{base}/api/me/", headers={"Authorization": f"Token {token['token']}"}, timeout=10)
        assert me.json() == {"username": "researcher", "roles": ["researcher"]}
        pools = httpx.get(f"{base}/api/pools/", headers={"Authorization": f"Token {token['token']}"}).json()
        assert {"demo-miniwob", "demo-osworld"} <= {p["name"] for p in pools["results"]}
        # behind login (issue 21): anonymous callers go to the login page
        docs = httpx.get(f"{base}/api/docs/")
        assert docs.status_code == 302 and docs.headers["location"].startswith("/login/"), docs.headers
        # DEBUG off (issue 30): the project's own 404 page, JSON under /api/, static files still served
        missing = httpx.get(f"{base}/no-such-page/")
        assert missing.status_code == 404 and "There is no page here" in missing.text
        assert "URLconf" not in missing.text and "DEBUG = True" not in missing.text
        assert httpx.get(f"{base}/api/no-such-endpoint/").json() == {"detail": "Not found."}
        assert _static_assets_load(base, login.text)
        # its own Redis takes no command without a password
        redis_port = int((stack_dir / "var" / "secrets" / "redis.port").read_text())
        with pytest.raises(redis.AuthenticationError):
            redis.Redis(port=redis_port).ping()

        again = subprocess.run(["make", "up"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
        assert again.returncode == 0 and "already running" in again.stdout, (
            again.stdout + again.stderr
        )  # idempotent
    finally:
        down = subprocess.run(
            ["make", "down"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
        )
        assert down.returncode == 0, down.stdout + down.stderr
    leftover = list((stack_dir / "var" / "run").glob("*.pid"))
    assert not leftover, leftover
    assert not (stack_dir / "var" / "redis" / "redis.pid").exists()  # its Redis and PostgreSQL stopped
    assert not (stack_dir / "var" / "pg" / "data" / "postmaster.pid").exists()


def _static_assets_load(base: str, page: str) -> bool:
    """Every /static/ stylesheet and script the page links answers 200."""
    assets = re.findall(r'(?:href|src)="(/static/[^"]+)"', page)
    return bool(assets) and all(httpx.get(f"{base}{a}").status_code == 200 for a in assets)
