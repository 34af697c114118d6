"""Periodic fleet upkeep (beat): reclaim expired leases, persist registry events."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from webapp.fleet import host_worker, upkeep
from workers.envs.base import EnvCrashed, EnvError
from workers.envs.host import UnknownEnv


@shared_task(name="webapp.fleet.tasks.reap_leases", ignore_result=True)
def reap_leases() -> int:
    return len(upkeep.fleet_reap())


@shared_task(name="webapp.fleet.tasks.persist_fleet_events", ignore_result=True)
def persist_fleet_events() -> int:
    return upkeep.fleet_persist_events()


@shared_task(name="webapp.fleet.tasks.env_call")
def env_call(env_id: str, op: str, payload: dict[str, Any] | None = None) -> dict[str, Any]:
    """Executed by the env host that owns `env_id` (sent to its own queue). Failures come back as
    data, so the caller gets a typed error rather than a re-raised foreign exception. An env this host
    no longer hosts (taken out of service while the call waited for it) is lost to the lease, as a
    crash is."""
    try:
        return {"ok": True, **host_worker.current_host().call(env_id, op, payload)}
    except (EnvCrashed, UnknownEnv) as exc:
        return {"ok": False, "crashed": True, "error": str(exc)}
    except (EnvError, KeyError, ValueError, TypeError) as exc:
        return {"ok": False, "crashed": False, "error": f"{type(exc).__name__}: {exc}"}
