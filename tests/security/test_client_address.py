"""Issue 30, finding 8: the sign-in lockout was keyed on a client-chosen X-Forwarded-For (uvicorn
believed the header from 127.0.0.1 on `make up`), so 25 wrong passwords with a new value each never
locked; and a retry during a lock restarted the cool-off without saying so.

The first test goes through the real web server as `make up` starts it (scripts/web.sh)."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from django.test import Client
from django.utils import timezone

from tests.conftest import PASSWORD
from tests.service_urls import subprocess_database_url
from webapp.client_address import client_address

pytestmark = [pytest.mark.security]
ROOT = Path(__file__).resolve().parent.parent.parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def web_server(tmp_path):
    """scripts/web.sh on a free port, on this test's database and Redis."""
    port = _free_port()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "webapp.settings.test",
        "DATABASE_URL": subprocess_database_url(),
        "UVICORN": str(ROOT / ".venv" / "bin" / "uvicorn"),
    }
    env.pop("TRUSTED_PROXIES", None)  # as on `make up`
    log = (tmp_path / "web.log").open("w")
    proc = subprocess.Popen(
        [str(ROOT / "scripts" / "web.sh"), "--host", "127.0.0.1", "--port", str(port)],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(240):
            try:
                httpx.get(f"{base}/login/", timeout=2)
                break
            except httpx.TransportError:
                assert proc.poll() is None, (tmp_path / "web.log").read_text()[-3000:]
                time.sleep(0.25)
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=20)


@pytest.mark.django_db(transaction=True)
def test_rotating_x_forwarded_for_does_not_escape_the_lockout(users, settings, web_server) -> None:
    statuses = []
    with httpx.Client(base_url=web_server, timeout=30) as http:
        for i in range(25):
            response = http.post(
                "/api/auth/token/",
                data={"username": "res", "password": "wrong"},
                headers={"X-Forwarded-For": f"203.0.113.{i + 1}"},
            )
            statuses.append(response.status_code)
        assert 429 in statuses, statuses
        assert statuses.index(429) == settings.AXES_FAILURE_LIMIT - 1, statuses
        assert set(statuses[settings.AXES_FAILURE_LIMIT :]) == {429}, statuses
        right = http.post(
            "/api/auth/token/",
            data={"username": "res", "password": PASSWORD},
            headers={"X-Forwarded-For": "198.51.100.7"},
        )
        assert right.status_code == 429, right.text


def test_forwarded_for_is_believed_only_from_a_trusted_proxy() -> None:
    xff = "203.0.113.9, 10.1.2.3"
    assert client_address("127.0.0.1", xff, []) == "127.0.0.1"
    assert client_address("198.51.100.1", xff, ["10.0.0.0/8"]) == "198.51.100.1"  # not from the proxy
    assert client_address("10.0.0.2", xff, ["10.0.0.0/8"]) == "203.0.113.9"  # skips trusted hops
    assert client_address("10.0.0.2", "1.1.1.1, 203.0.113.9", ["10.0.0.2"]) == "203.0.113.9"  # right-most
    assert client_address("10.0.0.2", "garbage", ["10.0.0.2"]) == "10.0.0.2"
    assert client_address("127.0.0.1", "203.0.113.9", ["localhost"]) == "203.0.113.9"  # a host name


@pytest.mark.django_db
def test_behind_a_trusted_proxy_each_client_is_counted_apart(users, settings) -> None:
    settings.TRUSTED_PROXIES = ["10.9.0.0/16"]
    client = Client()
    wrong = {"username": "res", "password": "wrong"}
    for _ in range(settings.AXES_FAILURE_LIMIT):
        last = client.post(
            "/api/auth/token/", wrong, REMOTE_ADDR="10.9.0.5", HTTP_X_FORWARDED_FOR="203.0.113.1"
        )
    assert last.status_code == 429
    other = client.post(
        "/api/auth/token/",
        {"username": "res", "password": PASSWORD},
        REMOTE_ADDR="10.9.0.5",
        HTTP_X_FORWARDED_FOR="203.0.113.2",
    )
    assert other.status_code == 200


@pytest.mark.django_db
def test_a_retry_during_the_lock_does_not_restart_it_and_the_message_says_so(users, settings) -> None:
    from axes.models import AccessAttempt

    client = Client()
    wrong = {"username": "res", "password": "wrong"}
    for _ in range(settings.AXES_FAILURE_LIMIT):
        locked = client.post("/api/auth/token/", wrong, REMOTE_ADDR="10.0.0.1")
    assert locked.status_code == 429
    assert "do not extend it" in locked.json()["detail"], locked.json()
    # The lock started a while ago; a retry now (wrong or right password) must not move its start.
    started = timezone.now() - (settings.AXES_COOLOFF_TIME / 2)
    AccessAttempt.objects.update(attempt_time=started)
    for password in ("wrong", PASSWORD):
        retry = client.post(
            "/api/auth/token/", {"username": "res", "password": password}, REMOTE_ADDR="10.0.0.1"
        )
        assert retry.status_code == 429
        assert int(retry["Retry-After"]) <= settings.AXES_COOLOFF_TIME.total_seconds() / 2 + 1
    assert AccessAttempt.objects.get().attempt_time == started
