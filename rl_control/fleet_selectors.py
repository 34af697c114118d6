"""Reads of a run's environments for the run page: its live and ended leases, why it waits, and the
fleet page's names of runs holding leases."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db.models import Count, Q

from rl_control.models import Run, RunStatus


def run_fleet(*, run_id: int, history: int = 50) -> dict[str, Any]:
    """The run's environments: live leases from the registry (Redis, the authority), each with its
    environment's state and boot time, and the recent ended leases from the durable record (released,
    reclaimed, crashed), plus counts by state and why the run waits (`run_wait_reason`). Ownership:
    see `_owned_by_run`."""
    from webapp.fleet.models import EnvRecord, LeaseRecord
    from webapp.fleet.registry import registry

    owner = f"rl:{run_id}"
    reg = registry()
    lease_ids = [
        x.decode() if isinstance(x, bytes) else str(x) for x in reg.r.zrange(f"{reg.prefix}:expiry", 0, -1)
    ]
    pipe = reg.r.pipeline()
    for lease_id in lease_ids:
        pipe.hgetall(f"{reg.prefix}:lease:{lease_id}")
    live: list[dict[str, Any]] = []
    for lease_id, raw in zip(lease_ids, pipe.execute(), strict=True):
        lease = {
            (k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else v)
            for k, v in raw.items()
        }
        if not _owned_by_run(lease.get("owner", ""), run_id):
            continue
        env = reg.env(lease.get("env", ""))
        live.append(
            {
                "lease_id": lease_id,
                "env_id": lease.get("env", ""),
                "kind": lease.get("kind", ""),
                "worker": lease.get("worker", ""),
                "task": lease.get("task", ""),
                "state": "crashed" if lease.get("state") == "crashed" else env.get("state", "leased"),
                "boot_s": float(env["boot_s"]) if env.get("boot_s") else None,
                "acquired": float(lease.get("acquired") or 0),
                "watchable": lease.get("kind") == "desktop",
            }
        )
    live.sort(key=lambda d: d["acquired"])
    ended_qs = (
        LeaseRecord.objects.filter(Q(owner=owner) | Q(owner__startswith=f"{owner}:"))
        .exclude(outcome="")
        .order_by("-ended_at", "-id")
    )
    ended = list(
        ended_qs.values("lease_id", "env_id", "kind", "task", "acquired_at", "ended_at", "outcome")[:history]
    )
    boots = dict(
        EnvRecord.objects.filter(env_id__in={e["env_id"] for e in ended}).values_list("env_id", "boot_s")
    )
    for e in ended:
        e["state"] = e.pop("outcome")
        e["boot_s"] = boots.get(e["env_id"])
    counts: dict[str, int] = {"leased": 0, "idle": 0, "crashed": 0, "reclaimed": 0, "released": 0}
    for lease in live:
        counts[lease["state"]] = counts.get(lease["state"], 0) + 1
    for outcome, n in ended_qs.values_list("outcome").annotate(n=Count("id")).values_list("outcome", "n"):
        counts[outcome] = counts.get(outcome, 0) + n
    boot_values = [x["boot_s"] for x in live if x["boot_s"] is not None]
    return {
        "run_id": run_id,
        "owner": owner,
        "live": live,
        "ended": ended,
        "counts": counts,
        "fleet_idle": reg.metrics()["idle"],
        "boot_s_mean": round(sum(boot_values) / len(boot_values), 3) if boot_values else None,
        "wait_reason": run_wait_reason(run=Run.objects.get(pk=run_id)),
    }


def run_lease(*, run_id: int, lease_id: str) -> dict[str, str] | None:
    """The live lease `lease_id` when it belongs to the run, else None."""
    from webapp.fleet.registry import registry

    lease = registry().lease(lease_id)
    if not lease or not _owned_by_run(lease.get("owner", ""), run_id):
        return None
    return lease


def _owned_by_run(owner: str, run_id: int) -> bool:
    """Leases of a run have owner `rl:<run id>` or, from the engine's workers, `rl:<run id>:<slot>:<generation>`."""
    return owner == f"rl:{run_id}" or owner.startswith(f"rl:{run_id}:")


def run_wait_reason(*, run: Run) -> str | None:
    """Why a running run is not rolling out at full width, from the live scheduler state
    (rl_control.engine.share) and its slots: waiting for the train worker (which starts its policy
    servers), for a rollout worker, or for an environment; None when nothing holds it back."""
    if run.status != RunStatus.RUNNING:
        return None
    from rl_control.engine import share
    from rl_control.engine.keys import key, rds
    from rl_control.engine.serving import serving_urls
    from webapp.fleet.registry import registry

    if not serving_urls(run):
        why = share.wait_reason(
            pool=share.TRAIN, run_id=run.pk, what="the train worker (it starts the policy servers)"
        )
        return why or "starting its policy servers"
    why = share.wait_reason(pool=share.ROLLOUT, run_id=run.pk, what="a rollout slot")
    if why:
        return why
    raw: bytes | None = rds().get(key(run.pk, "envwait"))  # type: ignore[assignment]
    if raw:
        kind = raw.decode()
        counts = registry().metrics()["envs"].get(kind, {})
        total = counts.get("idle", 0) + counts.get("leased", 0)
        return (
            f"waiting for a {kind} environment: {counts.get('leased', 0)} of {total} leased, "
            f"{counts.get('idle', 0)} idle (annotators come first: runs leave "
            f"{settings.FLEET_INTERACTIVE_RESERVE} idle to them)"
        )
    return None


def run_owner_names(ids: set[int]) -> dict[int, tuple[str, str | None]]:
    """The fleet page's names of the runs holding leases (webapp.fleet.owners)."""
    return {
        pk: (f"run #{pk} {name}", f"/runs/{pk}/")
        for pk, name in Run.objects.filter(pk__in=ids).values_list("pk", "name")
    }
