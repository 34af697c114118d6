"""Short-lived VNC access tokens in Redis, minted by Django after its permission check.

`flywheel:vnc:token:<token>` → JSON {host, port, socket, session_id, user_id, read_only, expires_at} with a
Redis TTL; `flywheel:vnc:session:<session_id>` is a set of the session's tokens so they can all be
revoked when the session ends or the lease moves.
"""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import asdict, dataclass
from typing import Any

from workers.envs.vnc.server import VncTarget

TOKEN_PREFIX = "flywheel:vnc:token:"
SESSION_PREFIX = "flywheel:vnc:session:"
MAX_TTL_S = 24 * 3600


class TokenError(ValueError):
    """Bad arguments for a token, or a token payload that cannot be read."""


@dataclass(frozen=True)
class VncGrant:
    """What a token allows: viewing (and with read_only False, driving) one session's desktop."""

    host: str
    port: int
    session_id: str
    user_id: str
    read_only: bool
    expires_at: float
    socket: str = ""  # a unix socket path (x11vnc's); host/port unused then

    @property
    def expired(self) -> bool:
        return time.time() >= self.expires_at


def mint_token(
    redis: Any, session_id: str, user_id: str | int, target: VncTarget, read_only: bool, ttl_s: int
) -> str:
    """Store a new token for `target` valid for `ttl_s` seconds and return it.

    `redis` is a synchronous `redis.Redis`. The caller has already checked that `user_id` may see
    (or, if not read_only, drive) the session.
    """
    if not session_id:
        raise TokenError("session_id is required")
    if not 1 <= ttl_s <= MAX_TTL_S:
        raise TokenError(f"ttl_s must be in 1..{MAX_TTL_S}, got {ttl_s}")
    if not target.socket and not 0 < target.port < 65536:
        raise TokenError(f"bad VNC port {target.port}")
    if target.socket and not target.socket.startswith("/"):
        raise TokenError(f"bad VNC socket path {target.socket!r}")
    token = secrets.token_urlsafe(24)
    grant = VncGrant(
        target.host,
        target.port,
        str(session_id),
        str(user_id),
        bool(read_only),
        time.time() + ttl_s,
        socket=target.socket,
    )
    pipe = redis.pipeline()
    pipe.set(TOKEN_PREFIX + token, json.dumps(asdict(grant)), ex=ttl_s)
    pipe.sadd(SESSION_PREFIX + grant.session_id, token)
    pipe.expire(SESSION_PREFIX + grant.session_id, MAX_TTL_S)
    pipe.execute()
    return token


def revoke_tokens(redis: Any, session_id: str) -> int:
    """Delete every token of the session; the proxy drops their open connections within seconds."""
    key = SESSION_PREFIX + str(session_id)
    tokens = [t.decode() if isinstance(t, bytes) else t for t in redis.smembers(key)]
    if not tokens:
        return 0
    removed = int(redis.delete(*[TOKEN_PREFIX + t for t in tokens]))
    redis.delete(key)
    return removed


def parse_grant(raw: bytes | str | None) -> VncGrant | None:
    """A grant from its stored JSON; None for a missing or expired one."""
    if raw is None:
        return None
    try:
        data = json.loads(raw)
        grant = VncGrant(
            host=str(data["host"]),
            port=int(data["port"]),
            session_id=str(data["session_id"]),
            user_id=str(data["user_id"]),
            read_only=bool(data["read_only"]),
            expires_at=float(data["expires_at"]),
            socket=str(data.get("socket", "")),
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise TokenError(f"unreadable VNC token payload: {exc}") from exc
    return None if grant.expired else grant


def valid_token_syntax(token: str) -> bool:
    """Tokens are url-safe base64; anything else is refused before touching Redis."""
    return 16 <= len(token) <= 64 and all(c.isalnum() or c in "-_" for c in token)
