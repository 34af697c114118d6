"""The test run's database as a URL for the processes a test starts (a worker, a server): the same
server, role and password as the test process (`make test` runs on the platform's own PostgreSQL,
which takes no connection without a password: scripts/services.sh)."""

from __future__ import annotations

from webapp.settings.env import database_url


def subprocess_database_url() -> str:
    """DATABASE_URL of the test database (call it inside a test: the test database is set up then)."""
    from django.db import connection

    return database_url(connection.settings_dict)
