"""Reads of the environment fleet for the fleet page: every env host and environment with its
lease owner (an RL run, an annotation session, a flywheel job), health and age, from the live
Redis registry (`workers.envs.leases`), owners named from PostgreSQL."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypedDict

from webapp.fleet.owners import OWNER_KINDS
from webapp.fleet.queues import queues_overview, workers_of
from webapp.fleet.registry import registry

# A desktop is watched over VNC; other kinds stream screenshots to their own pages.
WATCHABLE_KINDS = frozenset({"desktop"})


class Owner(TypedDict):
    kind: str  # an owner kind (webapp.fleet.owners: rl, annotation, flywheel) or "other"
    id: int | None
    label: str
    url: str | None


def owner_of(raw: str, names: dict[tuple[str, int], tuple[str, str | None]]) -> Owner:
    """What a lease owner string refers to; `names` maps (kind, id) to (label, url) when known."""
    for owner_kind in OWNER_KINDS.values():
        match = owner_kind.pattern.match(raw)
        if match:
            kind, pk = owner_kind.kind, int(match.group(1))
            label, url = names.get((kind, pk), (f"{kind} #{pk} (gone)", None))
            return {"kind": kind, "id": pk, "label": label, "url": url}
    return {"kind": "other", "id": None, "label": raw or "—", "url": None}


def _owner_names(owners: list[str]) -> dict[tuple[str, int], tuple[str, str | None]]:
    """(kind, id) -> (label, url) of every owner in `owners` that still exists, named by its app."""
    ids: dict[str, set[int]] = {kind: set() for kind in OWNER_KINDS}
    for raw in owners:
        for owner_kind in OWNER_KINDS.values():
            if match := owner_kind.pattern.match(raw):
                ids[owner_kind.kind].add(int(match.group(1)))
    return {
        (kind, pk): named
        for kind, owner_kind in OWNER_KINDS.items()
        for pk, named in owner_kind.names(ids[kind]).items()
    }


def _health(
    env: dict[str, Any], host_alive: bool, lease: dict[str, Any] | None, now: float
) -> tuple[str, str]:
    """(health, why): ok, crashed, host lost, or lease expiring (its holder stopped renewing)."""
    if env.get("state") == "crashed":
        return "crashed", env.get("reason", "")
    if not host_alive:
        return "host lost", f"host {env.get('worker', '?')} stopped sending heartbeats"
    if lease is not None and lease.get("state") == "crashed":
        return "crashed", "the environment died under its lease"
    if lease is not None and float(lease.get("expires") or now) < now:
        return "lease expiring", "its holder stopped renewing; the reaper reclaims it"
    return "ok", ""


def fleet_overview() -> dict[str, Any]:
    """{now, hosts: [...], envs: [...], counts, queues: [...]} of the whole fleet, newest first within
    each host; queues: depth and oldest wait of every Celery queue, with the workers consuming it."""
    snap = registry().snapshot()
    now = float(snap["now"])
    hosts_beat: dict[str, float] = snap["hosts"]
    names = _owner_names([e["lease"].get("owner", "") for e in snap["envs"] if e["lease"]])
    envs = []
    for env in snap["envs"]:
        held = env["lease"]
        host_alive = env.get("worker", "") in hosts_beat
        health, why = _health(env, host_alive, held, now)
        lease = None
        if held is not None:
            acquired = float(held.get("acquired") or now)
            lease = {
                "lease_id": held["lease_id"],
                "owner": owner_of(held.get("owner", ""), names),
                "owner_raw": held.get("owner", ""),
                "task": held.get("task", ""),
                "age_s": round(max(0.0, now - acquired), 1),
                "expires_in_s": round(float(held.get("expires") or now) - now, 1),
            }
        since = float(env.get("since") or 0) or None
        envs.append(
            {
                "env_id": env["env_id"],
                "kind": env.get("kind", ""),
                "host": env.get("worker", ""),
                "state": env.get("state", ""),
                "health": health,
                "health_reason": why,
                "boot_s": float(env["boot_s"]) if env.get("boot_s") else None,
                "age_s": round(max(0.0, now - since), 1) if since else None,
                "lease": lease,
                "watchable": env.get("kind") in WATCHABLE_KINDS
                and env.get("state") != "crashed"
                and host_alive,
            }
        )
    envs.sort(key=lambda e: (e["host"], e["kind"], e["env_id"]))
    per_host: dict[str, dict[str, Any]] = {}
    for name in sorted(set(hosts_beat) | {e["host"] for e in envs}):
        beat = hosts_beat.get(name)
        mine = [e for e in envs if e["host"] == name]
        per_host[name] = {
            "name": name,
            "alive": beat is not None,
            "heartbeat_age_s": round(max(0.0, now - beat), 1) if beat is not None else None,
            "envs": len(mine),
            "leased": sum(1 for e in mine if e["state"] == "leased"),
            "kinds": sorted({e["kind"] for e in mine}),
        }
    counts: dict[str, int] = {"envs": len(envs), "idle": 0, "leased": 0, "crashed": 0, "unhealthy": 0}
    for e in envs:
        counts[e["state"]] = counts.get(e["state"], 0) + 1
        counts["unhealthy"] += int(e["health"] != "ok")
    queues = queues_overview(hosts=list(per_host))
    return {"now": now, "hosts": list(per_host.values()), "envs": envs, "counts": counts, "queues": queues}


def fleet_env(env_id: str) -> dict[str, str]:
    """The registry's record of one env (empty when it is not in the fleet)."""
    return registry().env(env_id)


def fleet_not_ready(queues: Sequence[str], kinds: Sequence[str]) -> list[str]:
    """What keeps this install from taking work, in words: each of `queues` that no live worker
    consumes (the workers' own announcements, as the launch preflight reads them) and each
    environment kind of `kinds` with none up, idle or leased (as the preflight's "can be leased").
    [] when everything is ready."""
    missing = [f"a worker on queue '{queue}'" for queue in queues if not workers_of(queue)]
    envs = registry().metrics()["envs"]
    for kind in kinds:
        counts = envs.get(kind, {})
        if int(counts.get("idle", 0)) + int(counts.get("leased", 0)) == 0:
            missing.append(f"a {kind} environment")
    return missing
