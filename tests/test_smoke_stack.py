"""`make up` on this machine: the stack serves the login page and an authenticated API call.

Isolated from a running stack: its own port, var dir (pids, logs), database, Redis database, VNC proxy
and policy ports. Marked `smoke` (it installs nothing new here but starts ~10 processes); run with
`make smoke`, which CI runs after the default suite.
"""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import httpx
import psycopg
import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.smoke


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_make_up_serves_login_and_api(tmp_path: Path) -> None:
    port = _free_port()
    env = {
        **os.environ,
        "FLYWHEEL_PORT": str(port),
        "FLYWHEEL_VAR_DIR": str(tmp_path / "var"),
        "MEDIA_ROOT": str(tmp_path / "var" / "media"),
        "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/flywheel_smoke",
        "REDIS_URL": "redis://127.0.0.1:6379/13",
        "VNC_PROXY_LISTEN": f"127.0.0.1:{_free_port()}",
        "POLICY_PORT": str(_free_port()),
        "POLICY_BASE_URL": "",
        "FLEET_WARM_POOL": "terminal=1",
        "DJANGO_SETTINGS_MODULE": "webapp.settings.dev",
    }
    env["POLICY_BASE_URL"] = f"http://127.0.0.1:{env['POLICY_PORT']}/v1"
    with psycopg.connect("postgresql://postgres@127.0.0.1:5432/postgres", autocommit=True) as conn:
        conn.execute('DROP DATABASE IF EXISTS "flywheel_smoke" WITH (FORCE)')
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

        again = subprocess.run(["make", "up"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
        assert again.returncode == 0 and "already running" in again.stdout, (
            again.stdout + again.stderr
        )  # idempotent
    finally:
        down = subprocess.run(
            ["make", "down"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
        )
        assert down.returncode == 0, down.stdout + down.stderr
    leftover = list((tmp_path / "var" / "run").glob("*.pid"))
    assert not leftover, leftover
