"""One websocket→VNC proxy for all sessions; tokens from Redis decide where and whether input passes.

noVNC connects to `ws://HOST:PORT/websockify?token=T`. The handshake is refused (HTTP 403) for an
unknown, malformed or expired token, and for a grant not signed with the grant key (`tokens`): the
proxy runs as root, so it follows only grants the web app minted, and only to an x11vnc socket under
the sessions' socket root (`server.default_socket_root`), resolved, in a directory of its own. For a read-only token the client's RFB stream is parsed and
input messages are dropped (`rfb.ClientStreamFilter`). Open connections are closed soon after
their token is revoked or expires. Input forwarded for read-write tokens is published to the
session's take-over stream (`takeover.py`).

Run: `REDIS_URL=redis://USER:PASSWORD@127.0.0.1:6379/0 python -m workers.envs.vnc.proxy --listen 127.0.0.1:6080`
(the Redis URL from the environment: a password on the command line is readable by every local user;
`--grant-key-file` and `--socket-root` default to what the web app and the env hosts use).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import time
import weakref
from collections.abc import Sequence
from http import HTTPStatus
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import redis.asyncio as aioredis
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response
from websockets.typing import Subprotocol

from workers.envs.base import EnvError
from workers.envs.vnc.rfb import ClientStreamFilter, InputEvent, RfbProtocolError
from workers.envs.vnc.server import default_socket_root, ensure_socket_root
from workers.envs.vnc.takeover import STREAM_MAXLEN, STREAM_PREFIX, InputThrottle, event_to_fields
from workers.envs.vnc.tokens import (
    TOKEN_PREFIX,
    TokenError,
    VncGrant,
    default_grant_key_file,
    grant_key,
    parse_grant,
    valid_token_syntax,
)
from workers.secret_env import secret_from_env, url_with_password

log = logging.getLogger(__name__)


class VncProxy:
    """The proxy server. `key`: the grant key (`tokens.grant_key`); `socket_root`: the only place
    it connects to; `recheck_s` is how often open connections re-validate their token; `record`
    publishes read-write sessions' input for take-over recording."""

    def __init__(
        self, redis_url: str, *, key: bytes, socket_root: Path, recheck_s: float = 2.0, record: bool = True
    ) -> None:
        self._redis = aioredis.from_url(redis_url)
        self._key = key
        self._root = ensure_socket_root(socket_root)
        self._record = record
        self._recheck_s = recheck_s
        # Grants checked at the HTTP handshake, handed to the connection handler.
        self._grants: weakref.WeakKeyDictionary[ServerConnection, tuple[str, VncGrant, str]] = (
            weakref.WeakKeyDictionary()
        )

    async def serve(self, host: str, port: int) -> Server:
        return await serve(
            self._handle,
            host,
            port,
            process_request=self._authorize,
            select_subprotocol=_select_subprotocol,
            max_size=16 << 20,
            compression=None,  # VNC frames are already encoded; deflate only costs CPU
        )

    async def _lookup(self, token: str) -> VncGrant | None:
        if not valid_token_syntax(token):
            return None
        try:
            return parse_grant(await self._redis.get(TOKEN_PREFIX + token), token=token, key=self._key)
        except TokenError as exc:
            log.warning("VNC token refused: %s", exc)
            return None

    async def _authorize(self, connection: ServerConnection, request: Request) -> Response | None:
        token = parse_qs(urlsplit(request.path).query).get("token", [""])[0]
        grant = await self._lookup(token)
        if grant is None:
            return connection.respond(HTTPStatus.FORBIDDEN, "invalid or expired VNC token\n")
        if (socket := self._allowed_socket(grant)) is None:
            log.warning("VNC grant for session %s names a target outside %s", grant.session_id, self._root)
            return connection.respond(HTTPStatus.FORBIDDEN, "VNC target refused\n")
        self._grants[connection] = (token, grant, socket)
        return None

    def _allowed_socket(self, grant: VncGrant) -> str | None:
        """The grant's socket, resolved, when it lies in a directory of its own directly under the
        socket root (as x11vnc's do); None for anything else, a host:port target included."""
        if not grant.socket:
            return None
        real = os.path.realpath(grant.socket)
        return real if os.path.dirname(os.path.dirname(real)) == str(self._root) else None

    async def _handle(self, ws: ServerConnection) -> None:
        token, grant, socket = self._grants.pop(ws)
        try:
            reader, writer = await asyncio.open_unix_connection(socket)
        except OSError as exc:
            await ws.close(1011, f"VNC server unreachable: {exc}"[:120])
            return
        tasks = [
            asyncio.create_task(
                self._client_to_server(ws, writer, ClientStreamFilter(grant.read_only), grant)
            ),
            asyncio.create_task(_server_to_client(reader, ws)),
            asyncio.create_task(self._watch_token(token)),
        ]
        try:
            _, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in pending:
                task.cancel()
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
            await ws.close()

    async def _client_to_server(
        self, ws: ServerConnection, writer: asyncio.StreamWriter, filt: ClientStreamFilter, grant: VncGrant
    ) -> None:
        throttle = InputThrottle()
        try:
            async for message in ws:
                data = message.encode() if isinstance(message, str) else message
                try:
                    out = filt.feed(data)
                except RfbProtocolError as exc:
                    log.warning("closing VNC connection: %s", exc)
                    return
                if out:
                    writer.write(out)
                    await writer.drain()
                if filt.input_events:
                    events, filt.input_events = filt.input_events, []
                    if self._record:
                        await self._publish(grant, events, throttle)
        except ConnectionClosed:
            return

    async def _publish(self, grant: VncGrant, events: list[InputEvent], throttle: InputThrottle) -> None:
        """Append the forwarded input to the session's take-over stream (see takeover.py)."""
        now = time.monotonic()
        kept = [e for e in events if throttle.keep(e, now)]
        if not kept:
            return
        key = STREAM_PREFIX + grant.session_id
        pipe = self._redis.pipeline(transaction=False)
        for event in kept:
            pipe.xadd(key, event_to_fields(event, now, grant.user_id), maxlen=STREAM_MAXLEN, approximate=True)
        pipe.expire(key, 24 * 3600)
        await pipe.execute()

    async def _watch_token(self, token: str) -> None:
        """Return (ending the connection) once the token is revoked or expired."""
        while await self._lookup(token) is not None:
            await asyncio.sleep(self._recheck_s)


def _select_subprotocol(connection: ServerConnection, offered: Sequence[Subprotocol]) -> Subprotocol | None:
    """noVNC may offer 'binary' (websockify's name for raw frames) or nothing; both are fine."""
    return Subprotocol("binary") if "binary" in offered else None


async def _server_to_client(reader: asyncio.StreamReader, ws: ServerConnection) -> None:
    try:
        while chunk := await reader.read(1 << 16):
            await ws.send(chunk)
    except (ConnectionClosed, OSError):
        return


async def _main(listen: str, redis_url: str, key: bytes, socket_root: Path) -> None:
    host, _, port = listen.rpartition(":")
    proxy = VncProxy(redis_url, key=key, socket_root=socket_root)
    server = await proxy.serve(host or "127.0.0.1", int(port))
    # The line tests and supervisors wait for.
    print(f"vnc-proxy listening on {listen}", flush=True)
    await server.serve_forever()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--listen", default="127.0.0.1:6080", help="host:port for websocket clients")
    # docker compose: REDIS_URL names the user, REDIS_PASSWORD_FILE holds its password (workers.secret_env)
    redis_url = url_with_password(
        os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"), secret_from_env("REDIS_PASSWORD")
    )
    parser.add_argument("--redis-url", default=redis_url)
    parser.add_argument(
        "--grant-key-file", type=Path, default=default_grant_key_file(), help="the key grants are signed with"
    )
    parser.add_argument(
        "--socket-root", type=Path, default=default_socket_root(), help="where x11vnc sockets lie"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO)
    try:
        key = grant_key(args.grant_key_file)
        ensure_socket_root(args.socket_root)
    except (TokenError, OSError, EnvError) as exc:
        parser.error(str(exc))
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_main(args.listen, args.redis_url, key, args.socket_root))


if __name__ == "__main__":
    main()
