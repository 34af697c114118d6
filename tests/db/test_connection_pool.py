"""Database connections cannot run out (issue 37): a real uvicorn with a small pool under many
concurrent API clients answers no 5xx but 503-with-Retry-After, never holds more connections than
its pool, and gives them back after; with no connection to be had, HTTP views answer 503 with a JSON
body and websockets close with 1013."""

from __future__ import annotations

import json
import uuid

import pytest
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
from django.contrib.sessions.backends.db import SessionStore
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from tests.asgi_server import serve_asgi
from tests.db.load import drive, sampling, settle
from webapp.accounts.tokens import token_issue

pytestmark = pytest.mark.django_db(transaction=True)


def _tokens(users: dict) -> list[str]:
    roles = ("annotator", "reviewer", "researcher", "admin")
    return [token_issue(user=users[role])[1] for role in roles]


def _pool_env(max_size: int, timeout_s: float) -> tuple[dict[str, str], str]:
    name = f"pooltest-{uuid.uuid4().hex[:8]}"
    env = {"DB_POOL_ROLE": "web", "DB_POOL_WEB_MIN": "1", "DB_POOL_WEB_MAX": str(max_size),
           "DB_POOL_TIMEOUT_S": str(timeout_s), "DB_POOL_MAX_IDLE_S": "1", "DB_APPLICATION_NAME": name}  # fmt: skip
    return env, name


def _assert_clean_503(status: int, retry_after: str | None, content_type: str, body: str) -> None:
    assert status == 503, (status, body)
    assert retry_after == "2"
    assert content_type.startswith("application/json")
    assert "busy" in json.loads(body)["detail"]


def test_forty_clients_on_a_pool_of_four(users) -> None:
    env, name = _pool_env(max_size=4, timeout_s=10)
    tokens = _tokens(users)
    with serve_asgi(env) as url, sampling(name) as sampler:
        answers = drive(url, tokens, clients=40, gets_each=10)
        busy = [a for a in answers if a.status >= 500]
        after, waited = settle(name, at_most=1, timeout_s=20)
    assert len(answers) == 400
    for a in busy:
        _assert_clean_503(a.status, a.retry_after, a.content_type, a.body)
    assert sum(a.status == 200 for a in answers) >= 300, {a.status for a in answers}
    assert 1 <= sampler.peak <= 4, sampler.samples
    assert after <= 1, f"{after} connections still held {waited} s after the load"


def _session_cookie(user) -> str:
    session = SessionStore()
    session[SESSION_KEY] = str(user.pk)
    session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.create()
    return f"sessionid={session.session_key}"


def _websocket_close_codes(url: str, cookie: str, n: int) -> list[int | None]:
    """Open `n` fleet sockets; None for one that was served (its snapshot arrived)."""
    ws_url = url.replace("http://", "ws://") + "/ws/fleet/"
    codes: list[int | None] = []
    for _ in range(n):
        with connect(ws_url, additional_headers={"Cookie": cookie, "Origin": url}) as ws:
            try:
                ws.recv(timeout=15)
                codes.append(None)
            except ConnectionClosed as closed:
                codes.append(closed.rcvd.code if closed.rcvd else None)
    return codes


def test_no_connection_to_be_had_is_a_503_with_retry_after_and_a_1013_close(users) -> None:
    """A pool of one connection and a 50 ms wait, flooded: the answers that cannot get a connection
    are 503 (API and plain pages alike), the sockets that cannot are closed 1013, none is a 500."""
    from concurrent.futures import ThreadPoolExecutor

    import httpx

    env, _name = _pool_env(max_size=1, timeout_s=0.05)
    tokens = _tokens(users)
    cookie = _session_cookie(users["researcher"])
    with serve_asgi(env) as url, ThreadPoolExecutor(3) as side:
        pages = side.submit(
            lambda: [httpx.get(f"{url}/runs/", headers={"Cookie": cookie}, timeout=60) for _ in range(40)]
        )
        sockets = side.submit(_websocket_close_codes, url, cookie, 15)
        answers = drive(url, tokens, clients=40, gets_each=5)
        page_answers, socket_codes = pages.result(), sockets.result()
    statuses = [a.status for a in answers] + [r.status_code for r in page_answers]
    assert 500 not in statuses and 502 not in statuses and 504 not in statuses
    busy = [a for a in answers if a.status == 503]
    assert busy, "the flood never found the pool empty"
    for a in busy:
        _assert_clean_503(a.status, a.retry_after, a.content_type, a.body)
    for r in page_answers:
        if r.status_code == 503:
            _assert_clean_503(r.status_code, r.headers.get("retry-after"), r.headers["content-type"], r.text)
    assert {code for code in socket_codes} <= {None, 1013}, socket_codes


def test_pooled_connections_terminated_by_the_server_are_not_handed_out(users) -> None:
    """pg_terminate_backend on every idle connection of the pool (a PostgreSQL restart, an
    administrator, issue 37's kill journey): the next requests get fresh connections and answer 200,
    none a 5xx; the pool checks a connection before it hands it out."""
    import httpx

    from tests.db.load import _postgres, server_connections

    env, name = _pool_env(max_size=4, timeout_s=10)
    env.update({"DB_POOL_WEB_MIN": "4", "DB_POOL_MAX_IDLE_S": "600"})  # the pool keeps 4 idle connections
    token = _tokens(users)[0]
    auth = {"Authorization": f"Token {token}"}
    with serve_asgi(env) as url, httpx.Client(base_url=url, headers=auth, timeout=60) as http:
        assert http.get("/api/me/").status_code == 200
        for _ in range(40):  # the pool fills to its min_size in the background
            if server_connections(name) >= 4:
                break
            http.get("/api/me/")
        with _postgres() as pg:
            killed = pg.execute(
                "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity"
                " WHERE application_name = %s",
                [name],
            ).fetchone()
        assert killed and killed[0] >= 1
        statuses = [http.get("/api/me/").status_code for _ in range(12)]
    assert statuses == [200] * 12, statuses
