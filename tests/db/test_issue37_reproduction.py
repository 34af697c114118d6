"""The issue-37 reproduction, as it was measured: 40 concurrent API clients (annotator, reviewer,
researcher and admin tokens), 10 GETs each round assignments, trajectories, runs, pools, me and
checkpoints, against uvicorn with the settings `make up` gives the web process. Prints the figures
(JSON) and holds the server to: no 5xx but 503-with-Retry-After, no more connections to the database
than the web pool's maximum (+ this test's own), given back after the load.

`pytest -m slow tests/db/test_issue37_reproduction.py -s`."""

from __future__ import annotations

import json
import time

import pytest
from django.conf import settings
from django.db import connection

from tests.asgi_server import serve_asgi
from tests.db.load import drive, sampling, server_connections
from webapp.accounts.tokens import token_issue

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_forty_api_clients_as_in_the_issue(users) -> None:
    tokens = [token_issue(user=users[r])[1] for r in ("annotator", "reviewer", "researcher", "admin")]
    database = f"db:{connection.settings_dict['NAME']}"
    before = server_connections(database)
    with serve_asgi({"DB_POOL_ROLE": "web"}) as url:
        idle = server_connections(database)
        t0 = time.monotonic()
        with sampling(database) as sampler:
            answers = drive(url, tokens, clients=40, gets_each=10)
        wall = time.monotonic() - t0
        time.sleep(5)
        after_5s = server_connections(database)
    statuses: dict[int, int] = {}
    for a in answers:
        statuses[a.status] = statuses.get(a.status, 0) + 1
    seconds = sorted(a.seconds for a in answers)
    figures = {"answers": len(answers), "statuses": statuses,
               "p50_ms": round(seconds[len(seconds) // 2] * 1000), "p95_ms": round(seconds[int(len(seconds) * 0.95)] * 1000), "db_connections_before": before,
               "db_connections_server_idle": idle, "db_connections_peak": sampler.peak,
               "db_connections_5s_after": after_5s, "wall_s": round(wall, 2)}  # fmt: skip
    print("\nissue37-reproduction " + json.dumps(figures))
    assert not [a for a in answers if a.status >= 500 and not (a.status == 503 and a.retry_after)]
    assert sampler.peak - before <= settings.DB_POOL_MAX["web"]
