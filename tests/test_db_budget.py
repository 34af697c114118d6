"""The connection budget (docs/scale.md) read against what `make up` and compose start: every Django
process names its pool role, and the sum of the pools' maxima (+ one manage.py command, + the
superuser reserve) fits PostgreSQL's default max_connections of 100."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from django.conf import settings

ROOT = Path(settings.BASE_DIR)
MAX_CONNECTIONS, SUPERUSER_RESERVED = 100, 3
START = re.compile(r"^((?:[A-Z_]+=\S+ )*)start (\S+) (.+)$")


def _pool_max(role: str, args: list[str]) -> int:
    """Connections one process can hold: a prefork worker holds its pool in each child."""
    per_pool = settings.DB_POOL_MAX[role]
    if "celery" in " ".join(args).lower() and " worker " in f" {' '.join(args)} " and "threads" not in args:
        return per_pool * int(args[args.index("-c") + 1])
    if "--workers" in args:
        return per_pool * int(args[args.index("--workers") + 1])
    return per_pool


def _django(args: list[str]) -> bool:
    text = " ".join(args).lower()
    return any(word in text for word in ("celery", "uvicorn", "manage.py"))


def _up_processes() -> list[tuple[str, str | None, list[str]]]:
    out = []
    for line in (ROOT / "scripts" / "up.sh").read_text().splitlines():
        if match := START.match(line.strip()):
            env = dict(pair.split("=", 1) for pair in match.group(1).split())
            out.append((match.group(2), env.get("DB_POOL_ROLE"), match.group(3).split()))
    return out


def test_make_up_processes_fit_the_budget() -> None:
    processes = [p for p in _up_processes() if _django(p[2])]
    assert {name for name, _, _ in processes} >= {"web", "worker-default", "envhost1", "policy"}
    assert all(role in settings.DB_POOL_ROLES for _, role, _ in processes), processes
    total = sum(_pool_max(str(role), args) for _, role, args in processes) + settings.DB_POOL_MAX["web"]
    assert total == 64  # the figure docs/scale.md states
    assert total + SUPERUSER_RESERVED <= MAX_CONNECTIONS


def test_compose_services_fit_the_budget() -> None:
    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    total = 0
    for name, service in services.items():
        command = service.get("command") or []
        args = command if isinstance(command, list) else command.split()
        if not _django(args):
            continue
        env = service.get("environment") or {}
        role = env.get("DB_POOL_ROLE")
        assert role in settings.DB_POOL_ROLES, name
        per_pool = int(env.get("DB_POOL_WEB_MAX", settings.DB_POOL_MAX["web"])) if role == "web" else None
        total += (per_pool * int(args[args.index("--workers") + 1])) if per_pool else _pool_max(role, args)
    assert total + SUPERUSER_RESERVED <= MAX_CONNECTIONS, total
