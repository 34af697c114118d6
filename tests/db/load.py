"""The issue-37 reproduction as a reusable driver: N API clients (annotator, reviewer, researcher and
admin tokens) GET the busy endpoints at once against a real server, while a sampler counts the
server's PostgreSQL connections (pg_stat_activity by application_name or database)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field

import httpx
import psycopg
from django.db import connection

from webapp.settings.env import database_url

ENDPOINTS = (
    "/api/annotation/assignments/",
    "/api/trajectories/",
    "/api/rl/runs/",
    "/api/pools/",
    "/api/me/",
    "/api/checkpoints/",
)


@dataclass(frozen=True)
class Answer:
    path: str
    status: int
    retry_after: str | None
    content_type: str
    body: str
    seconds: float


def drive(base_url: str, tokens: list[str], *, clients: int, gets_each: int) -> list[Answer]:
    """`clients` threads, all started together, each doing `gets_each` GETs round the endpoints."""
    start = threading.Barrier(clients)

    def client(n: int) -> list[Answer]:
        headers = {"Authorization": f"Token {tokens[n % len(tokens)]}"}
        got = []
        with httpx.Client(base_url=base_url, headers=headers, timeout=120) as http:
            start.wait()
            for k in range(gets_each):
                path = ENDPOINTS[(n + k) % len(ENDPOINTS)]
                t0 = time.perf_counter()
                r = http.get(path)
                got.append(Answer(path, r.status_code, r.headers.get("retry-after"),
                                  r.headers.get("content-type", ""), r.text[:300], time.perf_counter() - t0))  # fmt: skip
        return got

    with ThreadPoolExecutor(clients) as pool:
        return [a for answers in pool.map(client, range(clients)) for a in answers]


def _postgres() -> psycopg.Connection:
    """A connection of our own (outside the server's pool) to read pg_stat_activity."""
    return psycopg.connect(database_url(connection.settings_dict, name="postgres"), autocommit=True)


def server_connections(who: str, conn: psycopg.Connection | None = None) -> int:
    """Connections of the server under test right now: `who` is its application_name, or
    `db:NAME` for every connection to database NAME."""
    if conn is None:
        with _postgres() as own:
            return server_connections(who, own)
    column, value = ("datname", who[3:]) if who.startswith("db:") else ("application_name", who)
    row = conn.execute(f"SELECT count(*) FROM pg_stat_activity WHERE {column} = %s", [value]).fetchone()
    return int(row[0]) if row else 0


@dataclass
class Sampler:
    who: str
    samples: list[int] = field(default_factory=list)

    @property
    def peak(self) -> int:
        return max(self.samples, default=0)


@contextmanager
def sampling(who: str, period_s: float = 0.05) -> Iterator[Sampler]:
    """Sample the server's connection count every `period_s` while the block runs."""
    sampler = Sampler(who)
    stop = threading.Event()

    def run() -> None:
        with _postgres() as conn:
            while not stop.is_set():
                sampler.samples.append(server_connections(who, conn))
                stop.wait(period_s)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield sampler
    finally:
        stop.set()
        thread.join()


def settle(who: str, at_most: int, timeout_s: float) -> tuple[int, float]:
    """Wait until the server holds at most `at_most` connections; returns (count, seconds waited)."""
    t0 = time.monotonic()
    while True:
        count = server_connections(who)
        if count <= at_most or time.monotonic() - t0 > timeout_s:
            return count, round(time.monotonic() - t0, 1)
        time.sleep(0.25)
