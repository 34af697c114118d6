"""Short-lived VNC access tokens in Redis, minted by Django after its permission check.

`flywheel:vnc:token:<token>` → JSON {host, port, socket, session_id, user_id, read_only, expires_at,
mac} with a Redis TTL. `mac` is an HMAC-SHA256, under the grant key, of the token and the other
fields: the proxy follows only grants it can verify, so whoever can write to Redis still cannot point
it at a socket of their choosing. The key lives in a 0600 file (`grant_key`) that the web app, the
env workers and the proxy read. `flywheel:vnc:session:<session_id>` and `flywheel:vnc:user:<user_id>`
are sets of tokens, so that all of a session's (session ends, lease moves) or a user's (logout, API
token revoked) can be revoked.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from workers.envs.vnc.server import VncTarget

TOKEN_PREFIX = "flywheel:vnc:token:"
SESSION_PREFIX = "flywheel:vnc:session:"
USER_PREFIX = "flywheel:vnc:user:"
MAX_TTL_S = 24 * 3600
KEY_BYTES = 32


class TokenError(ValueError):
    """Bad arguments for a token, or a token payload that cannot be read or verified."""


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


def default_grant_key_file() -> Path:
    """FLYWHEEL_VNC_GRANT_KEY_FILE, else var/secrets/vnc_grant_key under FLYWHEEL_VAR_DIR (default:
    the project's var/)."""
    if path := os.environ.get("FLYWHEEL_VNC_GRANT_KEY_FILE"):
        return Path(path)
    var = os.environ.get("FLYWHEEL_VAR_DIR") or str(Path(__file__).resolve().parents[3] / "var")
    return Path(var) / "secrets" / "vnc_grant_key"


def grant_key(path: Path) -> bytes:
    """The grant key in `path`, made (random, mode 0600, in a 0700 directory) by whichever process
    needs it first. Refuses a key file that other accounts can read or that is too short."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        _create_key(path)
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as f:
        if os.fstat(f.fileno()).st_mode & 0o077:
            raise TokenError(f"the VNC grant key {path} is readable by other accounts (chmod 600 it)")
        key = f.read().strip()
    if len(key) < KEY_BYTES:
        raise TokenError(f"the VNC grant key {path} is shorter than {KEY_BYTES} bytes")
    return key


def _create_key(path: Path) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_hex(KEY_BYTES) + "\n")
    try:
        os.link(tmp, path)  # atomic, and never replaces a key another process made meanwhile
    except FileExistsError:
        pass
    finally:
        tmp.unlink()


def _mac(key: bytes, token: str, fields: dict[str, Any]) -> str:
    message = token.encode() + b"\n" + json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def mint_token(
    redis: Any,
    session_id: str,
    user_id: str | int,
    target: VncTarget,
    read_only: bool,
    ttl_s: int,
    *,
    key: bytes,
) -> str:
    """Store a new token for `target`, signed with `key`, valid for `ttl_s` seconds; return it.

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
    fields = asdict(grant)
    pipe = redis.pipeline()
    pipe.set(TOKEN_PREFIX + token, json.dumps({**fields, "mac": _mac(key, token, fields)}), ex=ttl_s)
    for index in (SESSION_PREFIX + grant.session_id, USER_PREFIX + grant.user_id):
        pipe.sadd(index, token)
        pipe.expire(index, MAX_TTL_S)
    pipe.execute()
    return token


def revoke_tokens(redis: Any, session_id: str) -> int:
    """Delete every token of the session; the proxy drops their open connections within seconds."""
    return _revoke_set(redis, SESSION_PREFIX + str(session_id))


def revoke_user_tokens(redis: Any, user_id: str | int) -> int:
    """Delete every token minted for the user (logout, API token revoked); the proxy drops their
    open connections within seconds."""
    return _revoke_set(redis, USER_PREFIX + str(user_id))


def _revoke_set(redis: Any, key: str) -> int:
    tokens = [t.decode() if isinstance(t, bytes) else t for t in redis.smembers(key)]
    if not tokens:
        return 0
    removed = int(redis.delete(*[TOKEN_PREFIX + t for t in tokens]))
    redis.delete(key)
    return removed


def parse_grant(raw: bytes | str | None, *, token: str, key: bytes) -> VncGrant | None:
    """The grant stored for `token`, verified with `key`; None for a missing or expired one.
    Raises TokenError for one that is unreadable or not signed with `key` (forged, or moved)."""
    if raw is None:
        return None
    try:
        data = json.loads(raw)
        fields: dict[str, Any] = {
            "host": str(data["host"]),
            "port": int(data["port"]),
            "session_id": str(data["session_id"]),
            "user_id": str(data["user_id"]),
            "read_only": bool(data["read_only"]),
            "expires_at": float(data["expires_at"]),
            "socket": str(data.get("socket", "")),
        }
        mac = str(data["mac"])
    except (ValueError, KeyError, TypeError) as exc:
        raise TokenError(f"unreadable VNC token payload: {exc}") from exc
    if not hmac.compare_digest(mac, _mac(key, token, fields)):
        raise TokenError("VNC grant not signed with this proxy's key")
    grant = VncGrant(**fields)
    return None if grant.expired else grant


def valid_token_syntax(token: str) -> bool:
    """Tokens are url-safe base64; anything else is refused before touching Redis."""
    return 16 <= len(token) <= 64 and all(c.isalnum() or c in "-_" for c in token)
