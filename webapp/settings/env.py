"""Typed helpers that read configuration from the environment and refuse bad values loudly."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlparse


class ConfigError(RuntimeError):
    """A required setting is missing or has a value of the wrong shape."""


_MISSING = object()


def env_str(name: str, default: str | object = _MISSING) -> str:
    value = os.environ.get(name)
    if value is None or value == "":
        if default is _MISSING:
            raise ConfigError(f"environment variable {name} is required")
        return str(default)
    return value


# Every secret the settings read (env_secret), for `refuse_secret_values`.
SECRET_NAMES: set[str] = set()
# Credentials boto3 (S3 media) takes from the environment by itself, and settings holding URLs.
AMBIENT_SECRETS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")
URL_SETTINGS = ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "CELERY_RESULT_BACKEND")


def env_secret(name: str, default: str | object = _MISSING, *, empty_file_ok: bool = False) -> str:
    """A secret: the file `NAME_FILE` names (docker compose `secrets:`), else the variable NAME.
    `empty_file_ok`: an empty file means "not given" (an optional credential), not an error."""
    from workers.secret_env import SecretError, secret_from_env

    SECRET_NAMES.add(name)
    try:
        value = secret_from_env(name, empty_file_ok=empty_file_ok)
    except SecretError as exc:
        raise ConfigError(str(exc)) from exc
    if not value:
        if default is _MISSING:
            raise ConfigError(f"environment variable {name} (or {name}_FILE) is required")
        return str(default)
    return value


def refuse_secret_values(environ: Mapping[str, str]) -> None:
    """docker compose (FLYWHEEL_CREDENTIALS_FROM_FILES=1): `.env` reaches every app container, so a
    secret given there as a value would reach them all. Each must come as a file (`NAME_FILE`, a
    compose secret mounted only into the services that use it); a password in a URL setting too."""
    plain = sorted(name for name in SECRET_NAMES.union(AMBIENT_SECRETS) if environ.get(name))
    plain += [name for name in URL_SETTINGS if urlparse(environ.get(name, "")).password]
    if plain:
        raise ConfigError(
            f"{', '.join(plain)}: a secret set as an environment value (.env reaches every container); "
            "give it as a file instead (NAME_FILE, var/secrets: `make compose-secrets`, and the "
            "services' `secrets:` in docker-compose.yml)"
        )


def env_url(name: str, default: str, password: str) -> str:
    """The URL in NAME with the password of the secret `password` (`<password>_FILE` or the variable)
    set on its user, when that secret is given; else the URL as it is."""
    from workers.secret_env import url_with_password

    return url_with_password(env_str(name, default), env_secret(password, ""))


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    lowered = raw.strip().lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off"}:
        return False
    raise ConfigError(f"{name}={raw!r} is not a boolean (use true/false, 1/0, yes/no, on/off)")


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError as exc:
        raise ConfigError(f"{name}={raw!r} is not an integer") from exc
    if minimum is not None and value < minimum:
        raise ConfigError(f"{name}={value} is below the minimum {minimum}")
    return value


def env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return float(raw)
    except ValueError as exc:
        raise ConfigError(f"{name}={raw!r} is not a number") from exc


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    value = env_str(name, default)
    if value not in choices:
        raise ConfigError(f"{name}={value!r} is not one of {', '.join(choices)}")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return list(default)
    return [item.strip() for item in raw.split(",") if item.strip()]


def database_from_url(
    url: str, *, pool: dict[str, object] | None = None, application_name: str = ""
) -> dict[str, object]:
    """Turn `postgres://user:pass@host:port/name` into a Django DATABASES entry (PostgreSQL only).

    `pool`: psycopg_pool.ConnectionPool options (min_size, max_size, timeout, ...) for Django's
    connection pool; None keeps one connection per thread, closed at the end of each request.
    `application_name`: how the connections show in pg_stat_activity."""
    parsed = urlparse(url)
    if parsed.scheme not in {"postgres", "postgresql", "postgresql+psycopg"}:
        raise ConfigError(
            f"DATABASE_URL scheme {parsed.scheme!r} is not supported: Flywheel runs on PostgreSQL only "
            "(postgres://user:password@host:5432/name)"
        )
    name = parsed.path.lstrip("/")
    if not name:
        raise ConfigError("DATABASE_URL has no database name (postgres://user@host:5432/NAME)")
    entry: dict[str, object] = {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": unquote(name),
        "USER": unquote(parsed.username or ""),
        "PASSWORD": unquote(parsed.password or ""),
        "HOST": parsed.hostname or "",
        "PORT": str(parsed.port or 5432),
        # Never persistent: a connection kept per thread is how the ASGI server ran PostgreSQL out of
        # connections (issue 37). The pool, when set, bounds them instead.
        "CONN_MAX_AGE": 0,
        # With the pool, this is what makes it check a connection before handing it out (Django passes
        # psycopg_pool's check_connection only then): without it, connections PostgreSQL terminated
        # while idle in the pool (pg_terminate_backend, a restart) were handed out and failed (503s).
        "CONN_HEALTH_CHECKS": True,
    }
    options: dict[str, object] = {"application_name": application_name} if application_name else {}
    if pool is not None:
        options["pool"] = dict(pool)
    entry["OPTIONS"] = options
    return entry


def database_url(db: Mapping[str, Any], name: str | None = None) -> str:
    """The inverse of `database_from_url`: a DATABASES entry as a `postgres://` URL, its password
    included, for a process this one starts (a worker, a stack); `name` replaces the database's."""
    user = quote(str(db["USER"] or "postgres"), safe="")
    password = f":{quote(str(db['PASSWORD']), safe='')}" if db.get("PASSWORD") else ""
    host, port = db.get("HOST") or "127.0.0.1", db.get("PORT") or 5432
    return f"postgres://{user}{password}@{host}:{port}/{quote(str(name or db['NAME']), safe='')}"


def load_env_file(path: Path) -> None:
    """Set the `NAME=value` lines of `path` (var/secrets/env, written by `make up`) as environment
    variables, except those the environment already sets; nothing when the file does not exist."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return
    for line in text.splitlines():
        name, sep, value = line.partition("=")
        if not sep or not name.strip() or name.lstrip().startswith("#"):
            continue
        if not os.environ.get(name.strip()):
            os.environ[name.strip()] = value
