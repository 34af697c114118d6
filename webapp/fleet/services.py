"""The environment manager as Django sees it: leases through the Redis registry, calls to a leased
env on the host that runs it (the `env_call` task), VNC grants. Reaping and the durable record in
PostgreSQL are the beat's upkeep (webapp.fleet.upkeep)."""

from __future__ import annotations

import time
from functools import lru_cache
from typing import Any

from django.conf import settings

from webapp.fleet.registry import registry
from webapp.remote_calls import before_remote_call
from workers.envs.leases import Lease


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
