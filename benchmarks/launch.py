"""`bench launch [--quick]` (issue 19): a researcher's launch on the running stack, timed as a browser
sees it.

Against the stack at FLYWHEEL_BENCH_URL (default PUBLIC_BASE_URL, i.e. the default `make up` stack):
signs in as the demo `researcher` through the login form, POSTs the run form's request (GRPO preset,
pool demo-miniwob, 2 environments, launched at once: the preflight, the run's own policy server, the
rollouts and the trainer are the stack's own), opens the run's websocket as the dashboard does, and
measures the seconds from the POST to the first `run.metrics` message, then the updates reached in
the window (from the POST). The run is stopped at the end. Last line: JSON with `first_metric_s`,
`trained_updates` (the headline: updates whose batch trained the policy, i.e. made a new version; the
run's checkpoints counted), `updates` (every update, also those whose batch had nothing to train on:
every group without signal or stale, which close their groups and keep the version) and `window_s`.

FLYWHEEL_BENCH_URL=local measures a stack the bench starts itself instead (`local_stack`: its own
database `<name>_bench_launch` with the demo data and the starter model as `make up` loads them, an env
host, rollout and trainer workers, uvicorn on a free port), for a machine without `make up` (the slow
test tests/bench/test_bench_quick.py runs it so).

Goals: first_metric_s ≤ 60 with --quick (2-minute window); ≥ 20 trained updates in the full 10-minute
window. The settings are `benchmarks.harness.platform_config.LaunchBenchConfig`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from django.conf import settings

from benchmarks.harness.database import bench_database, free_port
from benchmarks.harness.platform_config import LaunchBenchConfig

LOCAL = "local"  # FLYWHEEL_BENCH_URL=local: a stack of the bench's own


def login(client: httpx.Client, username: str, password: str) -> None:
    page = client.get("/login/")
    match = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    if match is None:
        raise RuntimeError(f"no login form at {client.base_url}/login/")
    done = client.post("/login/", data={"username": username, "password": password,
                                        "csrfmiddlewaretoken": match.group(1)},
                       headers={"Referer": f"{client.base_url}/login/"})  # fmt: skip
    if "sessionid" not in client.cookies:
        raise RuntimeError(f"login as {username} failed (HTTP {done.status_code})")


async def _listen(url: str, cookie: str, origin: str, started: float, window_s: float) -> dict[str, Any]:
    import websockets

    first: float | None = None
    updates = 0
    messages = 0
    async with websockets.connect(url, additional_headers={"Cookie": cookie, "Origin": origin},
                                  max_size=None, open_timeout=60) as ws:  # fmt: skip
        while True:
            left = window_s - (time.perf_counter() - started)
            if left <= 0:
                break
            try:
                raw = await asyncio.wait_for(ws.recv(), timeout=left)
            except TimeoutError:
                break
            event = json.loads(raw)
            messages += 1
            if event.get("type") == "run.metrics" and first is None:
                first = time.perf_counter() - started
            if event.get("type") == "run.status":
                updates = max(updates, int(event.get("updates_done") or 0))
                if event.get("status") not in ("running", "created"):
                    break
    return {"first_metric_s": None if first is None else round(first, 1), "updates_seen": updates,
            "messages": messages}  # fmt: skip


def trained_versions(run_id: int, checkpoints: Any) -> int:
    """Versions the run trained: its own checkpoints `run<id>-v<n>` (n ≥ 1; the EMA copies left out)."""
    rows = checkpoints.get("results", checkpoints) if isinstance(checkpoints, dict) else checkpoints
    return sum(1 for c in rows if re.fullmatch(rf"run{run_id}-v[1-9]\d*", str(c.get("version", ""))))


def _wait_for_port(port: int, proc: subprocess.Popen, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the bench's server did not start on port {port}") from None
            time.sleep(0.2)


@contextlib.contextmanager
def local_stack() -> Iterator[str]:
    """A stack of the bench's own, loaded as `make up` loads one (migrated database, demo data, the
    starter model promoted): an env host, rollout and trainer workers (rl_control.engine.stack) and
    uvicorn on a free port. Yields its base URL; everything it started stops on the way out."""
    from rl_control.engine.stack import LocalStack

    db = bench_database("launch")
    for command in (["demo_setup"], ["policy_starter"]):
        subprocess.run([sys.executable, "manage.py", *command], env=db.env, check=True, capture_output=True,
                       cwd=settings.BASE_DIR)  # fmt: skip
    stack = LocalStack(
        Path(tempfile.mkdtemp(prefix="bench-launch-")), db.url, settings_module="webapp.settings.dev"
    )
    port = free_port()
    stack.start()
    try:
        web = stack.spawn([sys.executable, "-m", "uvicorn", "project.asgi:application", "--host", "127.0.0.1",
                           "--port", str(port), "--no-access-log"], DEBUG="false")  # fmt: skip
        _wait_for_port(port, web, 120)
        yield f"http://127.0.0.1:{port}"
    finally:
        stack.stop()


def on_stack(base_url: str | None, measure: Callable[[str], dict[str, Any]]) -> dict[str, Any]:
    """`measure(base)` against the stack a bench names: `base_url` (None: PUBLIC_BASE_URL, `make up`'s),
    or a stack of its own for LOCAL."""
    if base_url == LOCAL:
        with local_stack() as base:
            return measure(base)
    return measure((base_url or settings.PUBLIC_BASE_URL).rstrip("/"))


@dataclass(frozen=True)
class Researcher:
    """A signed-in researcher's API session on a stack, with the id of the pool the bench launches on."""

    client: httpx.Client
    csrf: dict[str, str]
    pool: int

    @classmethod
    def sign_in(cls, base: str, username: str, password: str, pool_name: str) -> Researcher:
        client = httpx.Client(base_url=base, timeout=120, follow_redirects=True)
        login(client, username, password)
        csrf = {"X-CSRFToken": client.cookies.get("csrftoken") or "", "Referer": f"{base}/runs/new/"}
        pools = client.get("/api/pools/").json()
        pools = pools.get("results", pools) if isinstance(pools, dict) else pools
        return cls(client, csrf, next(p["id"] for p in pools if p["name"] == pool_name))

    def launch(self, body: dict[str, Any], ready_wait_s: float) -> tuple[int, float, float]:
        """POST the run (launched at once) → (run id, perf_counter at the accepted POST, its seconds).
        Right after `make up` the env host may still be booting its browsers and the background
        workers may not have announced their queues: the preflight refuses, and the POST is repeated
        for up to `ready_wait_s`."""
        ready_by = time.monotonic() + ready_wait_s
        while True:
            started = time.perf_counter()
            created = self.client.post("/api/rl/runs/", json=body, headers=self.csrf)
            post_s = time.perf_counter() - started
            starting = "can be leased" in created.text or "no trainer worker consumes" in created.text
            if created.status_code != 400 or not starting or time.monotonic() > ready_by:
                break
            time.sleep(5)
        if created.status_code != 201:
            raise RuntimeError(
                f"{body.get('preset')}: the launch was refused: HTTP {created.status_code} {created.text[:1000]}"
            )
        return int(created.json()["id"]), started, post_s


def run_launch(quick: bool) -> dict[str, Any]:
    config = LaunchBenchConfig.for_run(quick)
    return on_stack(config.base_url, lambda base: _measure(config, base))


def _measure(config: LaunchBenchConfig, base: str) -> dict[str, Any]:
    quick = config.quick
    window_s = config.window_s
    researcher = Researcher.sign_in(base, config.username, config.password, config.pool)
    client, csrf = researcher.client, researcher.csrf
    run_config = config.run_config()
    body = {"name": f"bench launch {time.strftime('%H:%M:%S')}", "preset": config.preset,
            "pool": researcher.pool, "launch": True, "config": run_config}  # fmt: skip
    run_id, started, post_s = researcher.launch(body, config.ready_wait_s)
    cookie = "; ".join(f"{k}={v}" for k, v in client.cookies.items())
    ws_url = base.replace("http", "ws", 1) + f"/ws/rl/runs/{run_id}/"
    try:
        seen = asyncio.run(_listen(ws_url, cookie, base, started, window_s))
        run = client.get(f"/api/rl/runs/{run_id}/").json()
        checkpoints = client.get(f"/api/rl/runs/{run_id}/checkpoints/").json()
    finally:
        client.post(f"/api/rl/runs/{run_id}/stop/", headers=csrf)
    return {
        "quick": quick,
        "base_url": base,
        "run_id": run_id,
        "first_metric_s": seen["first_metric_s"],
        "trained_updates": trained_versions(run_id, checkpoints),
        "updates": int(run.get("updates_done") or 0),
        "window_s": window_s,
        "post_s": round(post_s, 2),
        "episodes": run.get("episodes_done"),
        "policy_version": run.get("policy_version"),
        "status_at_end": run.get("status"),
        "error": run.get("error") or None,
        "socket_messages": seen["messages"],
        "run_config": run_config,
        "config": config.to_json(),
        "goal_first_metric_s": config.goal_first_metric_s,
        "goal_trained_updates_in_600_s": config.goal_trained_updates_in_600_s,
        "load_avg_1m": round(os.getloadavg()[0], 2),
        "cores": os.cpu_count(),
    }
