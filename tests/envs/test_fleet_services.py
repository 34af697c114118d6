"""Fleet services and upkeep: leases through Django, reaping, and the durable record in PostgreSQL."""

from __future__ import annotations

import time
import uuid

import pytest
from django.test import override_settings

from webapp.fleet import services, upkeep
from webapp.fleet.models import EnvRecord, LeaseRecord

pytestmark = pytest.mark.django_db


@pytest.fixture
def fleet():
    prefix = f"test:fleet:{uuid.uuid4().hex}"
    with override_settings(FLEET_REDIS_PREFIX=prefix):
        services.registry.cache_clear()
        reg = services.registry()
        yield reg
        reg.clear()
    services.registry.cache_clear()


def test_lease_lifecycle_is_persisted(fleet) -> None:
    fleet.register_env(env_id="d1", kind="desktop", worker="env1@host", boot_s=0.61)
    lease = services.lease_acquire(kind="desktop", owner="annotation:5", task="12")
    assert services.lease_renew(lease_id=lease.lease_id) == "active"
    assert services.lease_release(lease_id=lease.lease_id)
    assert upkeep.fleet_persist_events() == 3
    env = EnvRecord.objects.get(env_id="d1")
    assert (env.kind, env.worker, env.state, env.boot_s) == (
        "desktop",
        "env1@host",
        "idle",
        pytest.approx(0.61),
    )
    record = LeaseRecord.objects.get(lease_id=lease.lease_id)
    assert (record.owner, record.task, record.outcome) == ("annotation:5", "12", "released")
    assert record.ended_at >= record.acquired_at
    assert upkeep.fleet_persist_events() == 0  # nothing new; nothing written twice


def test_no_idle_env_is_a_clear_error(fleet) -> None:
    with pytest.raises(services.NoEnvironmentAvailable, match="no idle phone environment"):
        services.lease_acquire(kind="phone", owner="x")


def test_reaper_reclaims_and_records(fleet) -> None:
    fleet.register_env(env_id="b1", kind="browser", worker="w", boot_s=0.2)
    fleet.host_heartbeat(worker="w", ttl_s=60)  # a live host: its env goes back to the pool
    lease = services.lease_acquire(kind="browser", owner="rl:1", ttl_s=0.1)
    time.sleep(0.15)
    assert upkeep.fleet_reap() == [lease.lease_id]
    upkeep.fleet_persist_events()
    assert LeaseRecord.objects.get(lease_id=lease.lease_id).outcome == "reclaimed"
    assert services.lease_acquire(kind="browser", owner="rl:1").env_id == "b1"  # back in the pool


def test_reaper_retires_envs_of_a_silent_host(fleet) -> None:
    fleet.register_env(env_id="b2", kind="browser", worker="gone@host", boot_s=0.2)
    upkeep.fleet_reap()  # no heartbeat from gone@host: its env leaves the pool
    with pytest.raises(services.NoEnvironmentAvailable):
        services.lease_acquire(kind="browser", owner="rl:1")


def test_crash_is_recorded(fleet) -> None:
    fleet.register_env(env_id="d9", kind="desktop", worker="w", boot_s=0.5)
    lease = services.lease_acquire(kind="desktop", owner="o")
    fleet.mark_crashed(env_id="d9", reason="Xvfb died")
    assert services.lease_renew(lease_id=lease.lease_id) == "crashed"
    upkeep.fleet_persist_events()
    assert EnvRecord.objects.get(env_id="d9").state == "crashed"
    assert LeaseRecord.objects.get(lease_id=lease.lease_id).outcome == "crashed"


def test_an_annotator_waits_for_an_env_that_is_booting(fleet) -> None:
    """Every browser leased: an interactive lease waits while a host boots one (here 1 s later) instead
    of answering 'no idle' at once; a background (RL) lease does not wait."""
    import threading

    fleet.register_env(env_id="b7", kind="browser", worker="w", boot_s=0.2)
    services.lease_acquire(kind="browser", owner="annotation:1")
    with pytest.raises(services.NoEnvironmentAvailable):
        services.lease_acquire(kind="browser", owner="rl:1:0:0", background=True)
    later = threading.Timer(
        1.0, lambda: fleet.register_env(env_id="b8", kind="browser", worker="w", boot_s=0.2)
    )
    later.start()
    started = time.monotonic()
    with override_settings(FLEET_INTERACTIVE_WAIT_S=15.0):
        lease = services.lease_acquire(kind="browser", owner="annotation:2")
    later.join()
    assert lease.env_id == "b8" and 0.9 <= time.monotonic() - started < 15.0


def test_an_annotator_stops_waiting_at_the_bound(fleet) -> None:
    fleet.register_env(env_id="b9", kind="browser", worker="w", boot_s=0.2)
    services.lease_acquire(kind="browser", owner="annotation:1")
    started = time.monotonic()
    with (
        override_settings(FLEET_INTERACTIVE_WAIT_S=1.0),
        pytest.raises(services.NoEnvironmentAvailable, match="no idle browser environment"),
    ):
        services.lease_acquire(kind="browser", owner="annotation:2")
    assert 0.9 <= time.monotonic() - started < 10.0
