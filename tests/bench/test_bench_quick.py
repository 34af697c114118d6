"""Every benchmark's --quick mode, run as a user runs it (`manage.py bench NAME --quick`), so that a
benchmark that breaks fails `make test-slow` (issue 35 item 6: `bench dashboard` had failed on main
unnoticed). The JSON must be the command's last line and carry its SPEC §10 keys.

Each bench works in databases of its own named after this test database (`<test db>_bench_<kind>`,
dropped afterwards) and on the test Redis database. Two cannot run here as a user would:
- `osworld` reads OSWorld's own evaluation_examples, which are not in the repository: the smoke
  points it at the shipped OSWorld-format tasks laid out as OSWorld's folder (domain `os`);
- `launch` measures a running stack (`make up`): the smoke sets FLYWHEEL_BENCH_URL=local, which makes
  the bench start a stack of its own (benchmarks.launch)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.conf import settings

from benchmarks.harness.database import database_url
from benchmarks.management.commands.bench import BENCHES, missing_keys

# Minutes a quick run may take on a loaded 2-core machine (the engine benches train and run RL).
MINUTES = {"rollout": 40, "learn": 60, "flywheel": 60, "launch": 30, "presets": 30, "vlm": 30, "policy": 30}


def _minutes(name: str) -> int:
    return MINUTES.get(name, 20)


def _base_name() -> str:
    return str(settings.DATABASES["default"]["TEST"]["NAME"])


def _drop_bench_databases() -> None:
    with psycopg.connect(
        database_url("postgres").replace("postgres://", "postgresql://"), autocommit=True
    ) as conn:
        rows = conn.execute(
            "SELECT datname FROM pg_database WHERE datname LIKE %s", [_base_name() + r"\_bench\_%"]
        )
        for (name,) in rows.fetchall():
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def run_quick(name: str, *args: str, **env: str) -> dict[str, Any]:
    """`manage.py bench NAME --quick ARGS` on this test's databases; its figures."""
    child_env = {**os.environ, "DJANGO_SETTINGS_MODULE": "webapp.settings.dev", "DEBUG": "false",
                 "DATABASE_URL": database_url(_base_name()), "REDIS_URL": settings.REDIS_URL, **env}  # fmt: skip
    try:
        done = subprocess.run([sys.executable, "manage.py", "bench", name, "--quick", *args], env=child_env,
                              cwd=settings.BASE_DIR, capture_output=True, text=True,
                              timeout=60 * _minutes(name))  # fmt: skip
    finally:
        _drop_bench_databases()
    assert done.returncode == 0, f"bench {name} --quick failed:\n{done.stdout[-2000:]}\n{done.stderr[-6000:]}"
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    print(json.dumps(figures))  # the figures, in `pytest -rP` output
    assert figures["bench"] == name and missing_keys(name, figures) == []
    return dict(figures)


def _timeout(name: str) -> pytest.MarkDecorator:
    return pytest.mark.timeout(60 * _minutes(name) + 120)


@pytest.mark.slow
@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=_timeout(n)) for n in sorted(set(BENCHES) - {"osworld", "launch", "presets"})],
)
def test_quick_mode_runs_and_reports_its_spec_keys(name: str) -> None:
    run_quick(name)


@pytest.mark.slow
@_timeout("osworld")
def test_osworld_quick_on_the_shipped_osworld_format_tasks(tmp_path: Path) -> None:
    from demo.setup import OSWORLD_EXAMPLES_DIR

    domain = tmp_path / "examples" / "os"
    domain.mkdir(parents=True)
    for task in sorted(OSWORLD_EXAMPLES_DIR.glob("*.json")):
        shutil.copy(task, domain / task.name)
    figures = run_quick("osworld", "--examples", str(tmp_path))
    assert figures["domains"]["os"]["files"] == len(list(domain.glob("*.json"))) > 0


@pytest.mark.slow
@_timeout("launch")
def test_launch_quick_against_a_stack_of_its_own() -> None:
    figures = run_quick("launch", FLYWHEEL_BENCH_URL="local")
    assert figures["first_metric_s"] is not None, figures


@pytest.mark.slow
@_timeout("presets")
def test_presets_quick_against_a_stack_of_its_own() -> None:
    """The first preset's defaults, 3 minutes on a stack of the bench's own: its curve is read back."""
    figures = run_quick("presets", FLYWHEEL_BENCH_URL="local")
    (only,) = figures["presets"].values()
    assert only["episodes"] > 0 and only["first_half"]["n"] + only["second_half"]["n"] == only["episodes"]


@pytest.mark.slow
@_timeout("asr")
def test_asr_quick_on_the_hard_speech_set() -> None:
    """The hard set (issue 32) reports SPEC §10's keys too (its result once lacked `wer`, so the
    command refused it and printed nothing)."""
    figures = run_quick("asr", FLYWHEEL_ASR_SPEECH_SET="hard")
    assert figures["speech_set"] == "hard" and set(figures["wer_by_condition"]) <= {
        "fast",
        "noisy",
        "background",
        "technical",
    }
    # the live pass (chunks as they arrive, with the previous chunk's tail in front) is scored too
    assert set(figures["live_wer_by_condition"]) == set(figures["wer_by_condition"]), figures
