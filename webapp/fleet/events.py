"""Events of the fleet page's websocket: payload types. The source of change is the registry's own
event stream in Redis (`<prefix>:events`, written atomically by every lease / boot / crash / retire
script in workers.envs.leases); the consumer tails it, so no extra publisher is needed."""

from __future__ import annotations

from typing import Any, TypedDict


class FleetSnapshotEvent(TypedDict):
    type: str  # "fleet.snapshot"
    reason: str  # "connect" | "change" | "tick" (ages and heartbeats move without events)
    fleet: dict[str, Any]  # selectors.fleet_overview()


def fleet_snapshot_event(fleet: dict[str, Any], reason: str) -> FleetSnapshotEvent:
    return {"type": "fleet.snapshot", "reason": reason, "fleet": fleet}
