"""The fleet's periodic upkeep, run by its beat tasks (webapp.fleet.tasks): reclaim expired leases
and retire the envs of dead hosts, and persist the registry's events in PostgreSQL. Below the fleet's
services, which enqueue the env call in the same tasks module, so a task never imports them back."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

import redis

from webapp.fleet.models import EnvRecord, LeaseRecord
from webapp.fleet.registry import registry

log = logging.getLogger(__name__)
_GROUP = "persist"


def fleet_reap() -> list[str]:
    """Reclaim expired leases and retire the envs of hosts that stopped sending heartbeats."""
    reg = registry()
    gone = reg.reap_dead_hosts()
    if gone:
        log.warning("retired %d envs of dead hosts", len(gone))
    reclaimed = reg.reap()
    if reclaimed:
        log.info("reclaimed %d expired leases", len(reclaimed))
    return reclaimed


def _at(raw: bytes | None) -> datetime:
    return datetime.fromtimestamp(float(raw or 0), tz=UTC)


def fleet_persist_events(*, batch: int = 1000) -> int:
    """Write the registry's new events to PostgreSQL. At-least-once from a consumer group; rows are
    upserted by id, so a redelivered event changes nothing."""
    reg = registry()
    stream = f"{reg.prefix}:events"
    try:
        reg.r.xgroup_create(stream, _GROUP, id="0", mkstream=True)
    except redis.ResponseError as exc:
        if "BUSYGROUP" not in str(exc):
            raise
    total = 0
    while True:
        got: Any = reg.r.xreadgroup(_GROUP, "persister", {stream: ">"}, count=batch)
        if not got:
            return total
        entries = got[0][1]
        for _entry_id, fields in entries:
            _apply({k.decode(): v for k, v in fields.items()})
        reg.r.xack(stream, _GROUP, *[entry_id for entry_id, _ in entries])
        total += len(entries)


def _apply(f: dict[str, bytes]) -> None:
    event = f["event"].decode()
    at = _at(f.get("at"))
    env_id = f.get("env", b"").decode()
    if event == "booted":
        EnvRecord.objects.update_or_create(
            env_id=env_id,
            defaults={"kind": f["kind"].decode(), "worker": f.get("worker", b"").decode(), "state": "idle",
                      "boot_s": float(f.get("boot_s") or 0), "updated_at": at},
            create_defaults={"kind": f["kind"].decode(), "worker": f.get("worker", b"").decode(), "state": "idle",
                             "boot_s": float(f.get("boot_s") or 0), "created_at": at, "updated_at": at},
        )  # fmt: skip
    elif event == "acquired":
        LeaseRecord.objects.update_or_create(
            lease_id=f["lease"].decode(),
            defaults={"env_id": env_id, "kind": f["kind"].decode(), "owner": f.get("owner", b"").decode(),
                      "task": f.get("task", b"").decode(), "acquired_at": at},
        )  # fmt: skip
        EnvRecord.objects.filter(env_id=env_id).update(state="leased", updated_at=at)
    elif event in ("released", "reclaimed"):
        LeaseRecord.objects.filter(lease_id=f["lease"].decode()).update(ended_at=at, outcome=event)
        EnvRecord.objects.filter(env_id=env_id).exclude(state="crashed").update(state="idle", updated_at=at)
    elif event == "crashed":
        EnvRecord.objects.filter(env_id=env_id).update(
            state="crashed", reason=f.get("reason", b"").decode(), updated_at=at
        )
        if f.get("lease"):
            LeaseRecord.objects.filter(lease_id=f["lease"].decode()).update(outcome="crashed")
    elif event == "retired":
        EnvRecord.objects.filter(env_id=env_id).exclude(state="crashed").update(state="gone", updated_at=at)
