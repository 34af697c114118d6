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


STARTUP_S = 180.0  # how long the reaper's worker and beat may take to reclaim the first lease


def _reclaim_delay(reg: LeaseRegistry, ttl_s: float, within_s: float) -> float:
    """Lease an environment for `ttl_s` and wait until the reaper reclaims it: the seconds from its
    expiry to its reclaim (at most `within_s`, else an error)."""
    lease = reg.acquire(kind="bench", owner="bench", ttl_s=ttl_s)
    if lease is None:
        raise RuntimeError("no environment to lease: an earlier lease was not reclaimed")
    expires = float(reg.lease(lease.lease_id)["expires"])
    while reg.lease(lease.lease_id):
        if time.time() > expires + within_s:
            raise RuntimeError(f"the reaper did not reclaim an expired lease within {within_s:g} s")
        time.sleep(0.01)
    return time.time() - expires


def _reclaim_delays(config: EnvmanagerBenchConfig) -> tuple[float, list[float]]:
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
        # Worker and beat start (seconds, or a minute on a loaded machine): one expired lease reclaimed
        # first, not timed, shows the reaper runs.
        startup = _reclaim_delay(reg, ttl_s, STARTUP_S)
        for _ in range(n):
            delays.append(_reclaim_delay(reg, ttl_s, 10 * period_s))
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
    return startup, delays


def run_envmanager(quick: bool) -> dict[str, Any]:
    config = EnvmanagerBenchConfig.for_run(quick)
    rate = _throughput(config)
    startup, delays = _reclaim_delays(config)
    return {
        "lease_release_per_s": round(rate, 1),
        "reclaim_delay_s": round(max(delays), 3),
        "reclaim_delay_p50_s": round(statistics.median(delays), 3),
        "reaper_period_s": config.reaper_period_s,
        "reclaims_measured": len(delays),
        "first_reclaim_after_start_s": round(startup, 1),  # worker and beat starting (not in the figures)
        "processes": config.processes,
        "config": asdict(config),
    }
