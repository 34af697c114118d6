"""`bench export`: stream the JSONL export of N synthetic steps through the real HTTP stack (uvicorn)
and report steps/s and the server's peak RSS. Runs in its own database, `<name>_bench_export`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

import httpx
import psutil
import psycopg
from django.conf import settings

from benchmarks.harness.database import database_url, free_port, recreate_database
from benchmarks.harness.platform_config import ExportBenchConfig


def _fill(db_url: str, n_steps: int, per_trajectory: int) -> int:
    """COPY `n_steps` realistic steps (3 candidates, thought, parsed action, image ref) in bulk, in
    trajectories of `per_trajectory` steps."""
    n_traj = max(1, n_steps // per_trajectory)
    now = datetime.now(UTC)
    candidates = json.dumps(
        [
            {"thought": f"Candidate {k}: the submit button is at the bottom of the form.",
             "action": f"click(start_box='({100 + k},{200 + k})')", "logprob": -1.25 * (k + 1), "model_version": "v12"}
            for k in range(3)
        ]
    )  # fmt: skip
    action = json.dumps([{"kind": "click", "point": [100, 200]}])
    with psycopg.connect(db_url.replace("postgres://", "postgresql://")) as conn:
        pool_id = conn.execute("INSERT INTO store_taskpool (name, description, candidates_n, validation_mode, created_at)"
                               " VALUES ('bench', '', 3, 'verifier', %s) RETURNING id", [now]).fetchone()[0]  # type: ignore[index]  # fmt: skip
        task_id = conn.execute(
            "INSERT INTO store_task (pool_id, external_id, instruction, env_kind, source, setup, verifier,"
            " difficulty_steps, difficulty_cross_page, difficulty_prerequisites, difficulty_exceptions, difficulty,"
            " importance, tags, enabled, supported, unsupported_reasons, attempts, successes, success_rate,"
            " created_at, updated_at) VALUES (%s, 'click-button', 'Click the Submit button.', 'browser', 'miniwob',"
            " '{}', '{}', 1, false, 0, false, 0, 1, '{}', true, true, '[]', 0, 0, 0, %s, %s) RETURNING id",
            [pool_id, now, now],
        ).fetchone()[0]  # type: ignore[index]
        with conn.cursor().copy(
            "COPY store_trajectory (task_id, env_kind, source, policy_version, status, final_reward, validator, route,"
            " review_state, num_steps, metadata, created_at, instruction, review_round, final_screenshot) FROM STDIN"
        ) as copy:
            for i in range(n_traj):
                copy.write_row([task_id, "browser", "rl", "v12", "completed", float(i % 2), "", "none", "none",
                                per_trajectory, "{}", now, "", 0, ""])  # fmt: skip
        first_id = conn.execute("SELECT min(id) FROM store_trajectory").fetchone()[0]  # type: ignore[index]
        with conn.cursor().copy(
            "COPY store_step (trajectory_id, index, clock_start, clock_end, created_at, screenshot, observation_refs,"
            " raw_text, thought, action_text, action, parse_error, coord_convention, executed_points, candidates,"
            " decision, decision_meta, policy_version, human_thought_verbatim, human_thought_refined, human_words,"
            " reward, done, rl) FROM STDIN"
        ) as copy:
            for t in range(n_traj):
                tid = first_id + t
                for i in range(per_trajectory):
                    thought = (
                        f"I see the form; step {i}: the Submit button is below the text field, so I click it."
                    )
                    copy.write_row([
                        tid, i, 10.0 + i, 10.4 + i, now, f"screenshots/t{tid}/{i:05d}.jpg", "{}",
                        f"Thought: {thought}\nAction: click(start_box='(100,200)')", thought,
                        "click(start_box='(100,200)')", action, "", "relative_1000", "[[128, 160]]", candidates,
                        "policy", "{}", "v12", "", "", "[]", 0.0, i == per_trajectory - 1,
                        '{"value": 0.5, "advantage": 0.1, "ratio": 1.0}',
                    ])  # fmt: skip
        conn.commit()
    return n_traj * per_trajectory


def _token(env: dict[str, str]) -> str:
    code = (
        "from webapp.accounts.roles import Role; from webapp.accounts.services import user_create;"
        "from webapp.accounts.tokens import token_issue;"
        "u = user_create(username='bench', password='bench-pass-1', roles=[Role.RESEARCHER]);"
        "print(token_issue(user=u)[1])"
    )
    out = subprocess.run([sys.executable, "manage.py", "shell", "-c", code], env=env, check=True,
                         capture_output=True, text=True, cwd=settings.BASE_DIR)  # fmt: skip
    return out.stdout.strip().splitlines()[-1]


def run_export(quick: bool) -> dict[str, Any]:
    config = ExportBenchConfig.for_run(quick)
    db_name = f"{settings.DATABASES['default']['NAME']}_bench_export"
    db_url = database_url(db_name)
    env = {
        **os.environ,
        "DATABASE_URL": db_url,
        "DJANGO_SETTINGS_MODULE": "webapp.settings.dev",
        "DEBUG": "false",
    }
    recreate_database(db_name)
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput"], env=env, check=True,
                   capture_output=True, cwd=settings.BASE_DIR)  # fmt: skip
    t0 = time.perf_counter()
    steps = _fill(db_url, config.steps, config.steps_per_trajectory)
    fill_s = time.perf_counter() - t0
    token = _token(env)

    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "--host", "127.0.0.1", "--port", str(port), "--no-access-log",
         "project.asgi:application"],
        env=env, cwd=settings.BASE_DIR, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    peak = {"rss": 0}
    stop = threading.Event()

    def sample() -> None:
        proc = psutil.Process(server.pid)
        while not stop.is_set():
            try:
                peak["rss"] = max(peak["rss"], proc.memory_info().rss)
            except psutil.Error:
                return
            time.sleep(config.rss_sample_s)

    try:
        base = f"http://127.0.0.1:{port}"
        for _ in range(100):
            try:
                httpx.get(base + "/login/", timeout=1)
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        headers = {"Authorization": f"Token {token}"}
        httpx.get(base + "/api/me/", headers=headers, timeout=10).raise_for_status()  # warm up
        idle_rss = psutil.Process(server.pid).memory_info().rss
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        lines = received_steps = n_bytes = 0
        first_byte_s: float | None = None
        start = time.perf_counter()
        with httpx.stream(
            "GET", base + "/api/trajectories/export?format=jsonl", headers=headers, timeout=600
        ) as r:
            r.raise_for_status()
            for line in r.iter_lines():
                if first_byte_s is None:
                    first_byte_s = time.perf_counter() - start
                if line:
                    lines += 1
                    n_bytes += len(line) + 1
                    received_steps += line.count('"index"')  # keys as PostgreSQL or Python writes them
        elapsed = time.perf_counter() - start
    finally:
        stop.set()
        server.terminate()
        server.wait(timeout=20)
    if received_steps != steps:
        raise RuntimeError(f"export returned {received_steps} steps, expected {steps}")
    return {
        "steps": steps,
        "trajectories": lines,
        "steps_per_s": round(steps / elapsed, 1),
        "peak_rss_mb": round(peak["rss"] / 2**20, 1),
        "idle_rss_mb": round(idle_rss / 2**20, 1),
        "seconds": round(elapsed, 2),
        "first_byte_ms": round((first_byte_s or 0) * 1000, 1),
        "mb_streamed": round(n_bytes / 2**20, 1),
        "fill_s": round(fill_s, 1),
        "config": asdict(config),
    }
