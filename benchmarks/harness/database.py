"""A benchmark's own PostgreSQL database, next to the configured one (`<name>_bench_<kind>`)."""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
from dataclasses import dataclass
from urllib.parse import urlsplit

import psycopg
from django.conf import settings

from webapp.settings import env


def database_url(name: str) -> str:
    """The configured server's URL for the database `name` (postgres:// scheme, as DATABASE_URL)."""
    return env.database_url(settings.DATABASES["default"], name)


def redis_url(db: int) -> str:
    """The configured Redis (its user and password included) with database `db`."""
    return urlsplit(settings.REDIS_URL)._replace(path=f"/{db}").geturl()


def recreate_database(name: str) -> None:
    """Drop `name` (disconnecting its clients) and create it empty."""
    with psycopg.connect(
        database_url("postgres").replace("postgres://", "postgresql://"), autocommit=True
    ) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


@dataclass(frozen=True)
class BenchDatabase:
    name: str
    url: str
    env: dict[str, str]  # the environment of a child process that works on it (dev settings)


def bench_database(kind: str, *, migrate: bool = True) -> BenchDatabase:
    """A fresh, migrated database for the benchmark `kind`."""
    name = f"{settings.DATABASES['default']['NAME']}_bench_{kind}"
    recreate_database(name)
    url = database_url(name)
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "DJANGO_SETTINGS_MODULE": "webapp.settings.dev",
        "DEBUG": "false",
        "SECRET_KEY": child_secret_key(),
    }
    if migrate:
        subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], env=env, check=True,
                       capture_output=True, cwd=settings.BASE_DIR)  # fmt: skip
    return BenchDatabase(name=name, url=url, env=env)


def child_secret_key() -> str:
    """The SECRET_KEY of the bench's own processes: the configured one (`make up`'s, from
    var/secrets/env), or a random one where only the public development key is set, which
    settings.dev refuses with DEBUG off."""
    from webapp.settings.base import INSECURE_DEV_SECRET_KEY

    configured = str(settings.SECRET_KEY)
    return secrets.token_urlsafe(50) if configured == INSECURE_DEV_SECRET_KEY else configured


def free_port() -> int:
    """A TCP port on the loopback that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
