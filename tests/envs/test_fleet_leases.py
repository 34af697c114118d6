"""Lease registry on the real Redis: acquire, renew, release, reap, crash, concurrency."""

from __future__ import annotations

import threading
import time
import uuid

import pytest
import redis
from django.conf import settings

from workers.envs.leases import LeaseRegistry


@pytest.fixture
def reg():
    registry = LeaseRegistry(
        redis.Redis.from_url(settings.REDIS_URL), prefix=f"test:fleet:{uuid.uuid4().hex}"
    )
    yield registry
    registry.clear()


def test_acquire_release_cycle(reg: LeaseRegistry) -> None:
    reg.register_env(env_id="d1", kind="desktop", worker="w1", boot_s=0.4)
    lease = reg.acquire(kind="desktop", owner="annotation:7", task="42", ttl_s=30)
    assert lease is not None and lease.env_id == "d1" and lease.worker == "w1"
    assert reg.acquire(kind="desktop", owner="x") is None  # the only desktop is taken
    assert reg.acquire(kind="browser", owner="x") is None
    assert reg.env("d1")["state"] == "leased" and reg.lease(lease.lease_id)["owner"] == "annotation:7"
    assert reg.release(lease_id=lease.lease_id) is True
    assert reg.release(lease_id=lease.lease_id) is False  # exactly once
    assert reg.env("d1")["state"] == "idle" and reg.idle_count("desktop") == 1
    m = reg.metrics()
    assert m["counters"]["acquired"] == 1 and m["counters"]["released"] == 1 and m["counters"]["refused"] == 2
    assert m["idle"] == 1 and m["live"] == 1


def test_reaper_reclaims_only_expired_leases(reg: LeaseRegistry) -> None:
    for i in range(3):
        reg.register_env(env_id=f"b{i}", kind="browser", worker="w1", boot_s=0.1)
    short = reg.acquire(kind="browser", owner="a", ttl_s=0.2)
    long = reg.acquire(kind="browser", owner="b", ttl_s=60)
    assert short and long
    assert reg.reap() == []
    time.sleep(0.3)
    assert reg.reap() == [short.lease_id]
    assert reg.renew(lease_id=short.lease_id) == "gone"
    assert reg.renew(lease_id=long.lease_id) == "active"
    assert reg.idle_count("browser") == 2
    assert reg.metrics()["counters"]["reclaimed"] == 1


def test_renewed_lease_survives_a_stale_reap(reg: LeaseRegistry) -> None:
    reg.register_env(env_id="t1", kind="terminal", worker="w1", boot_s=0.0)
    lease = reg.acquire(kind="terminal", owner="a", ttl_s=0.2)
    assert lease
    time.sleep(0.25)
    assert reg.renew(lease_id=lease.lease_id) == "active"  # heartbeat arrives just in time
    assert reg.reap(now=time.time() - 0.1) == []


def test_crash_is_reported_to_the_lessee_and_env_leaves_service(reg: LeaseRegistry) -> None:
    reg.register_env(env_id="d1", kind="desktop", worker="w1", boot_s=0.5)
    lease = reg.acquire(kind="desktop", owner="rl:3")
    assert lease
    assert reg.mark_crashed(env_id="d1", reason="Xvfb exited with -9") == lease.lease_id
    assert reg.renew(lease_id=lease.lease_id) == "crashed"
    reg.release(lease_id=lease.lease_id)
    assert reg.idle_count("desktop") == 0  # a crashed env never returns to the idle set
    assert reg.metrics()["crashed"] == 1
    reg.retire_env(env_id="d1")
    assert reg.metrics()["crashed"] == 0


def test_concurrent_acquires_never_share_an_env(reg: LeaseRegistry) -> None:
    for i in range(20):
        reg.register_env(env_id=f"e{i}", kind="browser", worker="w", boot_s=0.1)
    got: list[str] = []
    lock = threading.Lock()

    def grab() -> None:
        r = LeaseRegistry(redis.Redis.from_url(settings.REDIS_URL), prefix=reg.prefix)
        for _ in range(10):
            lease = r.acquire(kind="browser", owner="t")
            if lease:
                with lock:
                    got.append(lease.env_id)

    threads = [threading.Thread(target=grab) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 20 and len(set(got)) == 20


def test_events_stream_records_every_change(reg: LeaseRegistry) -> None:
    reg.register_env(env_id="d1", kind="desktop", worker="w1", boot_s=0.5)
    lease = reg.acquire(kind="desktop", owner="o")
    assert lease
    reg.release(lease_id=lease.lease_id)
    events = [e[1][b"event"].decode() for e in reg.r.xrange(f"{reg.prefix}:events")]
    assert events == ["booted", "acquired", "released"]


def test_dead_host_envs_are_retired_and_leases_see_a_crash(reg: LeaseRegistry) -> None:
    reg.register_env(env_id="a1", kind="browser", worker="alive", boot_s=0.1)
    reg.register_env(env_id="d1", kind="browser", worker="dead", boot_s=0.1)
    reg.register_env(env_id="d2", kind="desktop", worker="dead", boot_s=0.1)
    reg.host_heartbeat(worker="alive", ttl_s=30)
    lease = reg.acquire(kind="desktop", owner="rl:1")
    assert lease is not None and lease.env_id == "d2"
    assert sorted(reg.reap_dead_hosts()) == ["d1", "d2"]
    assert reg.renew(lease_id=lease.lease_id) == "crashed"
    assert reg.idle_count("browser") == 1 and reg.metrics()["live"] == 1
    assert reg.reap_dead_hosts() == []


def test_restarted_host_retires_its_previous_envs(reg: LeaseRegistry) -> None:
    reg.register_env(env_id="old", kind="terminal", worker="w1", boot_s=0.0)
    assert reg.retire_worker(worker="w1", reason="restart") == ["old"]
    assert reg.idle_count("terminal") == 0
