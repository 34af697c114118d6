"""`bench envmanager`: lease + release throughput on the real Redis registry (no env boot), and the
delay between a lease expiring and the real reaper (Celery beat → worker on the `env` queue)
reclaiming it. Uses Redis database 14 and its own key prefix, so a running stack is not touched."""

from __future__ import annotations

import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import asdict
from typing import Any

import redis
from django.conf import settings

from benchmarks.harness.database import redis_url
from benchmarks.harness.platform_config import EnvmanagerBenchConfig
from workers.envs.leases import LeaseRegistry


def _churn(url: str, prefix: str, seconds: float, out: Any) -> None:
    reg = LeaseRegistry(redis.Redis.from_url(url), prefix=prefix)
    done = 0
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        lease = reg.acquire(kind="bench", owner="bench", ttl_s=60)
        if lease is not None:
            reg.release(lease_id=lease.lease_id)
            done += 1
    out.put(done)


def _throughput(config: EnvmanagerBenchConfig) -> float:
    seconds = config.throughput_s
    prefix = f"bench:fleet:{uuid.uuid4().hex[:8]}"
    reg = LeaseRegistry(redis.Redis.from_url(redis_url(config.redis_db)), prefix=prefix)
    for i in range(config.registered_envs):
        reg.register_env(env_id=f"e{i}", kind="bench", worker="bench", boot_s=0.0)
    out: Any = mp.get_context("fork").Queue()
    procs = [
        mp.get_context("fork").Process(target=_churn, args=(redis_url(config.redis_db), prefix, seconds, out))
        for _ in range(config.processes)
    ]
    start = time.perf_counter()
    for p in procs:
        p.start()
    total = sum(out.get(timeout=seconds + 30) for _ in procs)
    for p in procs:
        p.join()
    elapsed = time.perf_counter() - start
    reg.clear()
    return total / elapsed


def _reclaim_delays(config: EnvmanagerBenchConfig) -> list[float]:
    n, period_s, ttl_s = config.reclaims, config.reaper_period_s, config.lease_ttl_s
    prefix = f"bench:fleet:{uuid.uuid4().hex[:8]}"
    reg = LeaseRegistry(redis.Redis.from_url(redis_url(config.redis_db)), prefix=prefix)
    for i in range(n):
        reg.register_env(env_id=f"r{i}", kind="bench", worker="bench", boot_s=0.0)
    env = {**os.environ, "REDIS_URL": redis_url(config.redis_db), "FLEET_REDIS_PREFIX": prefix,
           "FLEET_REAPER_PERIOD_S": str(period_s), "DJANGO_SETTINGS_MODULE": "webapp.settings.dev"}  # fmt: skip
    celery = [sys.executable, "-m", "celery", "-A", "webapp"]
    schedule = f"/tmp/flywheel-bench-beat-{prefix.rsplit(':', 1)[-1]}"
    worker = subprocess.Popen([*celery, "worker", "-Q", "env", "-P", "solo", "-l", "warning", "--without-gossip",
                               "--without-mingle", "--without-heartbeat"], env=env, cwd=settings.BASE_DIR,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    beat = subprocess.Popen([*celery, "beat", "-l", "warning", "--schedule", schedule], env=env,
                            cwd=settings.BASE_DIR, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    # The envs' host must look alive, or the reaper rightly retires its envs as a dead host's.
    alive = threading.Event()

    def heartbeat() -> None:
        while not alive.wait(period_s / 2):
            reg.host_heartbeat(worker="bench", ttl_s=5 * period_s)

    reg.host_heartbeat(worker="bench", ttl_s=5 * period_s)
    beating = threading.Thread(target=heartbeat, daemon=True)
    beating.start()
    delays: list[float] = []
    try:
        time.sleep(4 * period_s + 3)  # worker and beat start
        for _ in range(n):
            lease = reg.acquire(kind="bench", owner="bench", ttl_s=ttl_s)
            assert lease is not None
            expires = float(reg.lease(lease.lease_id)["expires"])
            while reg.lease(lease.lease_id):
                if time.time() > expires + 10 * period_s:
                    raise RuntimeError("the reaper did not reclaim an expired lease within 10 periods")
                time.sleep(0.01)
            delays.append(time.time() - expires)
            time.sleep(period_s * 0.37)  # de-phase the next lease from the beat ticks
    finally:
        alive.set()
        for proc in (beat, worker):
            proc.terminate()
        for proc in (beat, worker):
            proc.wait(timeout=20)
        reg.clear()
        for suffix in ("", ".db", ".dat", ".bak", ".dir"):
            if os.path.exists(schedule + suffix):
                os.remove(schedule + suffix)
    return delays


def run_envmanager(quick: bool) -> dict[str, Any]:
    config = EnvmanagerBenchConfig.for_run(quick)
    rate = _throughput(config)
    delays = _reclaim_delays(config)
    return {
        "lease_release_per_s": round(rate, 1),
        "reclaim_delay_s": round(max(delays), 3),
        "reclaim_delay_p50_s": round(statistics.median(delays), 3),
        "reaper_period_s": config.reaper_period_s,
        "reclaims_measured": len(delays),
        "processes": config.processes,
        "config": asdict(config),
    }
