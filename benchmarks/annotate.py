"""`bench annotate`: with the real stack (uvicorn, Celery env host with MiniWoB++ in Chromium, a
Celery worker computing candidates, the embedded policy server), the time from an accept request
until the next observation and the next candidates are on a websocket client. Model time (the
policy's own compute, as the worker measured it) is reported separately and subtracted.
Runs in its own database (`<name>_bench_annotate`) and Redis database 12."""

from __future__ import annotations

import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import asdict
from typing import Any

import httpx
import websockets
from django.conf import settings

from benchmarks.harness.database import database_url, free_port, recreate_database, redis_url
from benchmarks.harness.platform_config import AnnotateBenchConfig
from benchmarks.harness.processes import stop_all
from benchmarks.harness.stats import percentile


class _Stack:
    def __init__(self, config: AnnotateBenchConfig) -> None:
        self.config = config
        self.procs: list[subprocess.Popen[bytes]] = []
        self.tmp = tempfile.mkdtemp(prefix="flywheel-bench-annotate-")
        db = settings.DATABASES["default"]
        self.db_name = f"{db['NAME']}_bench_annotate"
        self.port, self.policy_port = free_port(), free_port()
        name = f"bench{uuid.uuid4().hex[:6]}"
        self.host_name = name
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "webapp.settings.dev",
            "DEBUG": "false",
            "DATABASE_URL": database_url(self.db_name),
            "REDIS_URL": redis_url(config.redis_db),
            "MEDIA_ROOT": f"{self.tmp}/media",
            "FLEET_REDIS_PREFIX": f"bench:fleet:{name}",
            "POLICY_BASE_URL": f"http://127.0.0.1:{self.policy_port}/v1",
            "PUBLIC_BASE_URL": f"http://127.0.0.1:{self.port}",
        }

    def manage(self, *args: str) -> str:
        out = subprocess.run([sys.executable, "manage.py", *args], env=self.env, cwd=settings.BASE_DIR,
                             check=True, capture_output=True, text=True)  # fmt: skip
        return out.stdout

    def start(self, *cmd: str, **extra: str) -> None:
        log = open(f"{self.tmp}/proc{len(self.procs)}.log", "wb")
        self.procs.append(subprocess.Popen(list(cmd), env={**self.env, **extra}, cwd=settings.BASE_DIR,
                                           stdout=log, stderr=subprocess.STDOUT))  # fmt: skip

    def logs(self) -> str:
        tails = []
        for i in range(len(self.procs)):
            with open(f"{self.tmp}/proc{i}.log", errors="replace") as fh:
                tails.append(f"--- process {i}\n" + "".join(fh.readlines()[-15:]))
        return "\n".join(tails)

    def up(self) -> None:
        recreate_database(self.db_name)
        self.manage("migrate", "--noinput")
        self.manage("policy_init", "--promote")
        self.manage("shell", "-c", f"TASK_COPIES = {self.config.task_copies}\n{_SETUP}")
        celery = [sys.executable, "-m", "celery", "-A", "webapp", "worker", "--without-gossip", "--without-mingle",
                  "--without-heartbeat", "-l", "warning"]  # fmt: skip
        self.start(*celery, "-n", f"{self.host_name}@%h", "-Q", f"env.{self.host_name}", "-P", "threads",
                   "-c", str(self.config.env_host_threads), FLYWHEEL_ENV_HOST=self.host_name,
                   FLEET_WARM_POOL=self.config.warm_pool)  # fmt: skip
        self.start(*celery, "-n", f"d{self.host_name}@%h", "-Q", "default", "-P", "threads",
                   "-c", str(self.config.worker_threads))  # fmt: skip
        self.start(sys.executable, "manage.py", "serve_policy", "--port", str(self.policy_port))
        self.start(sys.executable, "-m", "uvicorn", "--host", "127.0.0.1", "--port", str(self.port),
                   "--no-access-log", "project.asgi:application")  # fmt: skip

    def down(self) -> None:
        stop_all(self.procs)


_SETUP = """
from annotation.models import Assignment
from webapp.accounts.roles import Role
from webapp.accounts.services import user_create
from webapp.store.models import Task, TaskPool
user = user_create(username="bench", password="bench-pass-1", roles=[Role.ANNOTATOR])
pool, _ = TaskPool.objects.get_or_create(name="bench")
# An accepted candidate may finish click-test, which submits the episode and closes its assignment:
# one task copy per session the bench may need.
for i in range(TASK_COPIES):
    task, _ = Task.objects.get_or_create(pool=pool, external_id=f"click-test-{i}", defaults=dict(
        instruction="MiniWoB++ click-test", env_kind="browser", source="miniwob", setup={"task": "click-test"}))
    Assignment.objects.get_or_create(user=user, task=task)
"""
# What the annotator does when the model's first candidate cannot be executed (an untrained model
# writes many): override with their own click, which takes the same path through the platform.
OVERRIDE = {"kind": "override", "thought": "I click the empty area below the task.",
            "action_text": "click(start_box='(150,200)')", "convention": "screen"}  # fmt: skip


async def _measure(base: str, decisions: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"obs": [], "cands": [], "model": [], "platform": []}
    async with httpx.AsyncClient(base_url=base, timeout=60) as client:
        await _wait(client)
        page = await client.get("/login/")
        csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
        assert csrf, "login page without CSRF token"
        await client.post("/login/", data={"username": "bench", "password": "bench-pass-1",
                                           "csrfmiddlewaretoken": csrf.group(1)}, headers={"Referer": base + "/login/"})  # fmt: skip
        headers = {"X-CSRFToken": client.cookies.get("csrftoken") or "", "Referer": base + "/"}
        cookie = "; ".join(f"{k}={v}" for k, v in client.cookies.items())
        while len(out["obs"]) < decisions:
            started = await client.post("/api/annotation/sessions/", json={}, headers=headers)
            if started.status_code == 503:  # the warm pool is refilling
                await asyncio.sleep(0.2)
                continue
            assert started.status_code == 201, started.text
            state = started.json()
            ws_url = base.replace("http", "ws") + f"/ws/annotation/sessions/{state['id']}/"
            async with websockets.connect(
                ws_url, additional_headers={"Cookie": cookie, "Origin": base}
            ) as ws:
                version = state["observation"]["obs_version"]
                event = await _candidates(ws, version)
                while len(out["obs"]) < decisions:
                    url = f"/api/annotation/sessions/{state['id']}/decide/"
                    decision = {**_decision(event.get("candidates") or []), "obs_version": version}
                    t0 = time.perf_counter()
                    r = await client.post(url, headers=headers, json=decision)
                    if r.status_code == 400:  # the environment refused the action: the annotator overrides
                        t0 = time.perf_counter()
                        r = await client.post(url, headers=headers, json={**OVERRIDE, "obs_version": version})
                    if r.status_code != 200:
                        break  # the session ended under us: take a fresh one
                    body = r.json()
                    t_obs = time.perf_counter()
                    if body["done"]:
                        out["obs"].append((t_obs - t0) * 1000)
                        break
                    version = body["state"]["observation"]["obs_version"]
                    event = await _candidates(ws, version)
                    t_cands = time.perf_counter()
                    model = float(event.get("model_ms") or 0.0)
                    out["obs"].append((t_obs - t0) * 1000)
                    out["cands"].append((t_cands - t0) * 1000)
                    out["model"].append(model)
                    out["platform"].append((t_cands - t0) * 1000 - model)
            await client.post(f"/api/annotation/sessions/{state['id']}/abandon/", headers=headers)
    return out


def _decision(candidates: list[dict[str, Any]]) -> dict[str, Any]:
    """Accept the first candidate that executes; override when none does. A `wait()` candidate is
    not accepted: its execution is a deliberate pause (1 s), not platform time."""
    for cand in candidates:
        kinds = [a.get("kind") for a in cand.get("actions") or []]
        if not cand.get("parse_error") and kinds and "wait" not in kinds:
            return {"kind": "accept", "index": cand["index"]}
    return dict(OVERRIDE)


async def _wait(client: httpx.AsyncClient) -> None:
    for _ in range(300):
        try:
            await client.get("/login/")
            return
        except httpx.HTTPError:
            await asyncio.sleep(0.2)
    raise RuntimeError("the web server did not start")


async def _candidates(ws: Any, version: int) -> dict[str, Any]:
    """Wait for the candidates of `version` (from the snapshot or a pushed event)."""
    while True:
        message = json.loads(await asyncio.wait_for(ws.recv(), timeout=120))
        if message["type"] == "annotation.state":
            c = message["state"]["candidates"]
            if c["obs_version"] == version and c["status"] in ("ready", "failed"):
                return {"model_ms": c["model_ms"], "status": c["status"], "candidates": c.get("items") or []}
        elif message["type"] == "annotation.candidates" and message["obs_version"] == version:
            return message


def run_annotate(quick: bool) -> dict[str, Any]:
    config = AnnotateBenchConfig.for_run(quick)
    stack = _Stack(config)
    try:
        stack.up()
        samples = asyncio.run(_measure(f"http://127.0.0.1:{stack.port}", decisions=config.decisions))
    except Exception as exc:
        raise RuntimeError(f"bench annotate failed: {exc}\n{stack.logs()}") from exc
    finally:
        stack.down()
    return {
        "roundtrip_p50_ms": round(percentile(samples["platform"], 0.5), 1),
        "roundtrip_p95_ms": round(percentile(samples["platform"], 0.95), 1),
        "model_p50_ms": round(percentile(samples["model"], 0.5), 1),
        "observation_p50_ms": round(percentile(samples["obs"], 0.5), 1),
        "observation_p95_ms": round(percentile(samples["obs"], 0.95), 1),
        "with_model_p50_ms": round(percentile(samples["cands"], 0.5), 1),
        "decisions": len(samples["obs"]),
        "with_candidates": len(samples["cands"]),
        "mean_platform_ms": round(statistics.fmean(samples["platform"]), 1) if samples["platform"] else None,
        "config": asdict(config),
    }
