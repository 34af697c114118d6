"""The environment manager as Django sees it: leases through the Redis registry, reaping, and the
durable record in PostgreSQL."""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

import redis
from django.conf import settings

from webapp.fleet.models import EnvRecord, LeaseRecord
from webapp.remote_calls import before_remote_call
from workers.envs.leases import Lease, LeaseRegistry, redis_client

log = logging.getLogger(__name__)
_GROUP = "persist"


@lru_cache(maxsize=1)
def registry() -> LeaseRegistry:
    return LeaseRegistry(redis_client(settings.REDIS_URL), prefix=settings.FLEET_REDIS_PREFIX)


class NoEnvironmentAvailable(RuntimeError):
    """Every environment of that kind is leased; try again or raise the warm-pool size."""


def lease_acquire(
    *, kind: str, owner: str, task: str = "", ttl_s: float | None = None, background: bool = False
) -> Lease:
    """Lease an idle env of `kind`. `background` (RL rollouts): annotation comes first, so keep
    settings.FLEET_INTERACTIVE_RESERVE envs of the kind idle for it, and take none while an
    annotator was refused one lately (workers.envs.leases)."""
    reserve = settings.FLEET_INTERACTIVE_RESERVE if background else None
    # An annotator who finds none idle waits a bounded time while the kind has live envs: its hosts
    # boot more up to their capacity (the warm pool refills within seconds) and RL gives envs back
    # (each refusal tells it an annotator is owed one). Background lessees do not wait here.
    deadline = time.monotonic() + (0.0 if background else settings.FLEET_INTERACTIVE_WAIT_S)
    while True:
        lease = registry().acquire(
            kind=kind, owner=owner, task=task, ttl_s=ttl_s or settings.FLEET_LEASE_TTL_S, reserve=reserve
        )
        if lease is not None:
            return lease
        counts = registry().metrics()["envs"].get(kind, {})
        if time.monotonic() >= deadline or not counts.get("idle", 0) + counts.get("leased", 0):
            raise NoEnvironmentAvailable(f"no idle {kind} environment; {counts}")
        time.sleep(0.5)


class LeaseLost(RuntimeError):
    """The lease was released, reclaimed after its heartbeat stopped, or its env crashed."""

    def __init__(self, lease_id: str, state: str) -> None:
        super().__init__(f"lease {lease_id} is {state}")
        self.state = state


class EnvCallFailed(RuntimeError):
    """The env refused the call (bad action, unknown operation); the env itself is fine."""


class EnvTimeout(RuntimeError):
    """The env's host did not answer in time (the call may still run there)."""


def _answer(result: Any, timeout_s: float, what: str) -> dict[str, Any]:
    from celery.exceptions import TimeoutError as CeleryTimeout

    try:
        out: dict[str, Any] = result.get(timeout=timeout_s)
    except CeleryTimeout as exc:
        raise EnvTimeout(f"{what} did not answer within {timeout_s:g} s") from exc
    return out


def env_call(
    *, lease: Lease, op: str, payload: dict[str, Any] | None = None, timeout_s: float = 60.0
) -> dict[str, Any]:
    """Run `op` on the leased env in the worker that hosts it; renews the lease on the way. Refused
    inside a transaction (webapp.remote_calls.TransactionHeld). Raises LeaseLost (also when the env
    crashed during the call), EnvCallFailed, or EnvTimeout after `timeout_s`."""
    from webapp.fleet.tasks import env_call as env_call_task

    before_remote_call(f"environment call {op!r}")
    state = registry().renew(lease_id=lease.lease_id)
    if state != "active":
        raise LeaseLost(lease.lease_id, state)
    result = env_call_task.apply_async(args=[lease.env_id, op, payload], queue=f"env.{lease.worker}")
    out = _answer(result, timeout_s, f"the environment {lease.env_id} ({op})")
    if out.get("crashed"):
        raise LeaseLost(lease.lease_id, "crashed")
    if not out.get("ok"):
        raise EnvCallFailed(out.get("error", "unknown error"))
    return out


def interactive_waiting(*, kind: str) -> bool:
    """An annotator was refused an env of `kind` lately: background holders give theirs back."""
    return registry().interactive_waiting(kind)


def lease_renew(*, lease_id: str) -> str:
    return registry().renew(lease_id=lease_id)


def lease_release(*, lease_id: str) -> bool:
    return registry().release(lease_id=lease_id)


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


def vnc_token_mint(*, lease: Lease, session_key: str, user_id: int, read_only: bool) -> dict[str, Any]:
    """A short-lived token for the VNC proxy, bound to this user and session. The caller has checked
    that the user may watch (read_only) or drive the session. Only desktops stream over VNC."""
    return _vnc_grant(env_call(lease=lease, op="info"), session_key=session_key, user_id=user_id,
                      read_only=read_only, kind=lease.kind)  # fmt: skip


def env_watch_grant(
    *, env_id: str, session_key: str, user_id: int, timeout_s: float = 30.0
) -> dict[str, Any]:
    """A read-only VNC token to watch any live env of the fleet (the fleet page): asks the env's host
    for its display without touching the env's lease, so watching never renews or steals it.
    Raises LeaseLost("gone") when the env is no longer in the fleet, EnvCallFailed when it has no
    VNC display or its host does not answer."""
    from webapp.fleet.tasks import env_call as env_call_task

    env = registry().env(env_id)
    if not env or env.get("state") in ("crashed", "gone"):
        raise LeaseLost(env_id, env.get("state", "gone") if env else "gone")
    before_remote_call("environment call 'info'")
    result = env_call_task.apply_async(args=[env_id, "info", None], queue=f"env.{env.get('worker', '')}")
    try:
        info = _answer(result, timeout_s, f"the host {env.get('worker')} of {env_id}")
    except EnvTimeout as exc:
        raise EnvCallFailed(str(exc)) from exc
    if info.get("crashed"):
        raise LeaseLost(env_id, "crashed")
    if not info.get("ok"):
        raise EnvCallFailed(info.get("error", "unknown error"))
    return _vnc_grant(
        info, session_key=session_key, user_id=user_id, read_only=True, kind=env.get("kind", "")
    )


def _vnc_grant(
    info: dict[str, Any], *, session_key: str, user_id: int, read_only: bool, kind: str
) -> dict[str, Any]:
    from workers.envs.vnc.server import VncTarget
    from workers.envs.vnc.tokens import mint_token

    vnc = info.get("vnc")
    if not vnc or not ("port" in vnc or "socket" in vnc):
        raise EnvCallFailed(f"the {kind} environment has no VNC display; it streams screenshots instead")
    target = VncTarget(
        host=str(vnc.get("host", "127.0.0.1")),
        port=int(vnc.get("port", 0)),
        socket=str(vnc.get("socket", "")),
    )
    token = mint_token(
        registry().r, session_key, user_id, target, read_only, settings.VNC_TOKEN_TTL_S, key=vnc_grant_key()
    )
    return {
        "url": f"{settings.VNC_PROXY_PUBLIC_URL.rstrip('/')}/websockify?token={token}",
        "token": token,
        "read_only": read_only,
        "expires_in_s": settings.VNC_TOKEN_TTL_S,
    }


def vnc_tokens_revoke(*, session_key: str) -> int:
    from workers.envs.vnc.tokens import revoke_tokens

    return revoke_tokens(registry().r, session_key)


def vnc_tokens_revoke_user(*, user_id: int) -> int:
    """Revoke every VNC token minted for the user (they logged out, or their API token was revoked);
    the proxy closes their open connections within seconds."""
    from workers.envs.vnc.tokens import revoke_user_tokens

    return revoke_user_tokens(registry().r, user_id)


@lru_cache(maxsize=1)
def vnc_grant_key() -> bytes:
    from workers.envs.vnc.tokens import grant_key

    return grant_key(settings.VNC_GRANT_KEY_FILE)
