"""The test run's PostgreSQL and Redis as URLs for the processes a test starts (a worker, a server),
with the same server, role and password as the test process: `make test` runs on the platform's own
services, which take no connection without a password (scripts/services.sh)."""

from __future__ import annotations

from urllib.parse import quote


def subprocess_database_url() -> str:
    """DATABASE_URL of the test database (call it inside a test: the test database is set up then)."""
    from django.db import connection

    db = connection.settings_dict
    user = quote(db["USER"] or "postgres", safe="")
    password = f":{quote(db['PASSWORD'], safe='')}" if db["PASSWORD"] else ""
    return f"postgres://{user}{password}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{quote(db['NAME'])}"
