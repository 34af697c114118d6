"""The connection budget (docs/scale.md) read against what `make up` and compose start: every Django
process names its pool role, and the sum of the pools' maxima (+ one manage.py command for make up,
+ the superuser reserve) fits PostgreSQL's default max_connections of 100."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import yaml
from django.conf import settings

ROOT = Path(settings.BASE_DIR)
MAX_CONNECTIONS, SUPERUSER_RESERVED = 100, 3
SIZES = ("DEFAULT_C", "ASR_LIVE_C", "ROLLOUT_C", "ENV_THREADS")


def _pool_max(role: str, tokens: list[str], per_pool: int | None = None) -> int:
    """Connections one process can hold: a prefork worker holds a pool in each child, a uvicorn
    with --workers one per worker."""
    per_pool = per_pool or settings.DB_POOL_MAX[role]
    text = " ".join(tokens).lower()
    if "celery" in text and " worker " in f" {text} " and "threads" not in tokens:
        last_c = len(tokens) - 1 - tokens[::-1].index("-c")
        return per_pool * int(tokens[last_c + 1])
    if "--workers" in tokens:
        return per_pool * int(tokens[tokens.index("--workers") + 1])
    return per_pool


def _django(tokens: list[str]) -> bool:
    text = " ".join(tokens).lower()
    return any(word in text for word in ("celery", "uvicorn", "manage.py", "web.sh"))


def _up_sizes() -> dict[str, str]:
    """up.sh's worker sizes for its default team (FLYWHEEL_ANNOTATORS unset), computed by bash."""
    text = (ROOT / "scripts" / "up.sh").read_text()
    block = text[text.index("\nANNOTATORS=") : text.index("\n", text.index("\nENV_THREADS=") + 1)]
    echo = "\necho " + " ".join(f"${name}" for name in SIZES)
    out = subprocess.run(["bash", "-c", block + echo], env={"PATH": os.environ["PATH"]},
                         capture_output=True, text=True, check=True).stdout.split()  # fmt: skip
    return dict(zip(SIZES, out, strict=True))


def _up_processes() -> list[tuple[str, str | None, list[str]]]:
    """(name, DB_POOL_ROLE, command tokens) of every process `make up` starts on its own machine."""
    sizes, out = _up_sizes(), []
    for line in (ROOT / "scripts" / "up.sh").read_text().splitlines():
        # start NAME CLASS CMD... at the top level (not the join branch)
        match = re.match(r"^(?:[A-Z_]+=\S+ )*start (\S+) \S+ (.+)$", line)
        if not match:
            continue
        command = match.group(2)
        for name, value in sizes.items():
            command = command.replace(f'"${name}"', value)
        tokens = command.split()
        role = next((t.split("=", 1)[1] for t in tokens if t.startswith("DB_POOL_ROLE=")), None)
        out.append((match.group(1), role, tokens))
    return out


def test_make_up_processes_fit_the_budget() -> None:
    processes = [p for p in _up_processes() if _django(p[2])]
    assert {name for name, _, _ in processes} >= {"web", "worker-default", "envhost1", "policy", "beat"}
    assert all(role in settings.DB_POOL_ROLES for _, role, _ in processes), processes
    total = sum(_pool_max(str(role), tokens) for _, role, tokens in processes) + settings.DB_POOL_MAX["web"]
    assert total == 72  # the figure docs/scale.md states (8 annotators, one manage.py command)
    assert total + SUPERUSER_RESERVED <= MAX_CONNECTIONS


def test_compose_services_fit_the_budget() -> None:
    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    total = 0
    for name, service in services.items():
        command = service.get("command") or []
        tokens = " ".join(command if isinstance(command, list) else [command]).split()
        if not _django(tokens):
            continue
        env = service.get("environment") or {}
        role = env.get("DB_POOL_ROLE")
        assert role in settings.DB_POOL_ROLES, name
        total += _pool_max(role, tokens, int(env["DB_POOL_WEB_MAX"]) if role == "web" else None)
    assert total == 88  # docs/scale.md (envhost-extra counted with one replica; 0 by default)
    assert total + SUPERUSER_RESERVED <= MAX_CONNECTIONS
