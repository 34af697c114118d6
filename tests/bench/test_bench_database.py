"""The harness's bench database (benchmarks/harness/database.py) on this machine's PostgreSQL."""

from __future__ import annotations

import psycopg

from benchmarks.harness.database import bench_database, database_url
from webapp.settings.base import INSECURE_DEV_SECRET_KEY


def test_a_bench_database_migrates_without_make_ups_secrets() -> None:
    """The bench's processes run settings.dev with DEBUG off, which refuses the public development
    key: without var/secrets/env (no `make up` here) they get a key of their own."""
    db = bench_database("secretcheck")
    try:
        assert db.env["SECRET_KEY"] and db.env["SECRET_KEY"] != INSECURE_DEV_SECRET_KEY
        with psycopg.connect(db.url.replace("postgres://", "postgresql://", 1)) as conn:
            assert conn.execute("SELECT count(*) FROM django_migrations").fetchone()[0] > 0  # type: ignore[index]
    finally:
        admin = database_url("postgres").replace("postgres://", "postgresql://", 1)
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{db.name}" WITH (FORCE)')
