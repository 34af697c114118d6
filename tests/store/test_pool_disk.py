"""A task pool's session disk cap (`TaskPool.disk_mb`, issue 30): set in Django admin, shown by the
pool API, and carried to the environment in every task spec (`setup["disk_mb"]`), where the
session's home is a tmpfs of that size (tests/envs/test_security_local.py)."""

from __future__ import annotations

import pytest

from tests.factories import TaskFactory, TaskPoolFactory
from webapp.flywheel.services.sampling import task_spec
from webapp.store.admin import TaskPoolForm
from webapp.store.taskspec import task_spec_wire

pytestmark = pytest.mark.django_db


def test_the_pools_cap_reaches_every_task_spec() -> None:
    pool = TaskPoolFactory(disk_mb=64)
    # A task cannot raise its own cap: the pool's wins.
    task = TaskFactory(pool=pool, env_kind="terminal", setup={"disk_mb": 999_999})
    assert task_spec_wire(task)["setup"]["disk_mb"] == 64
    assert task_spec(task).setup["disk_mb"] == 64
    assert TaskFactory(env_kind="desktop").pool.disk_mb == 1024  # the default


def test_pool_api_shows_it_and_admin_edits_it_within_bounds(api) -> None:
    TaskPoolFactory(name="capped", disk_mb=256)
    pools = api("researcher").get("/api/pools/").json()
    rows = pools["results"] if isinstance(pools, dict) else pools
    assert next(p for p in rows if p["name"] == "capped")["disk_mb"] == 256
    base = {"name": "p", "validation_mode": "verifier", "candidates_n": 3}
    assert TaskPoolForm(data={**base, "disk_mb": 2048}).is_valid()
    for bad in (0, 8, 2 << 20, "lots"):
        form = TaskPoolForm(data={**base, "disk_mb": bad})
        assert not form.is_valid() and "disk_mb" in form.errors
