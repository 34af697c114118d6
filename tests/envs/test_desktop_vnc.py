"""VNC through the token proxy: a real RFB handshake over websockets to x11vnc on a real Xvfb."""

from __future__ import annotations

import struct
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
import redis
from django.conf import settings
from websockets.exceptions import InvalidStatus
from websockets.sync.client import ClientConnection
from websockets.sync.client import connect as ws_connect

from workers.actions.types import Action, Point
from workers.envs.desktop import DesktopConfig, DesktopEnv
from workers.envs.vnc.rfb import ClientStreamFilter, RfbProtocolError
from workers.envs.vnc.server import VncTarget
from workers.envs.vnc.takeover import STREAM_PREFIX, TakeoverFolder, read_events
from workers.envs.vnc.tokens import (
    TOKEN_PREFIX,
    TokenError,
    default_grant_key_file,
    grant_key,
    mint_token,
    revoke_tokens,
)

PROXY_PORT = 16010
REDIS_URL = settings.REDIS_URL  # the test run's Redis (its password included)
KEY = grant_key(default_grant_key_file())  # the proxy started below reads the same file


class RfbClient:
    """Just enough of a noVNC-like client: handshake, framebuffer request, pointer events."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.buf = b""
        self.bytes_per_pixel = 4

    def recv(self, n: int) -> bytes:
        while len(self.buf) < n:
            message = self.ws.recv(timeout=30)  # generous: the machine is shared and often loaded
            assert isinstance(message, bytes)
            self.buf += message
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def handshake(self) -> tuple[int, int]:
        assert self.recv(12) == b"RFB 003.008\n"
        self.ws.send(b"RFB 003.008\n")
        count = self.recv(1)[0]
        assert 1 in self.recv(count)  # security type None offered
        self.ws.send(b"\x01")
        assert struct.unpack(">I", self.recv(4))[0] == 0  # SecurityResult OK
        self.ws.send(b"\x01")  # ClientInit, shared
        width, height = struct.unpack(">HH", self.recv(4))
        self.bytes_per_pixel = self.recv(16)[0] // 8  # pixel format starts with bits-per-pixel
        (name_len,) = struct.unpack(">I", self.recv(4))
        self.recv(name_len)
        return width, height

    def request_frame(self, width: int, height: int) -> int:
        """Ask for a full update and read all of it (raw encoding); return its rectangle count."""
        self.ws.send(struct.pack(">BBHHHH", 3, 0, 0, 0, width, height))
        msg_type, _pad, rects = struct.unpack(">BBH", self.recv(4))
        assert msg_type == 0  # FramebufferUpdate
        for _ in range(rects):
            _x, _y, w, h, encoding = struct.unpack(">HHHHi", self.recv(12))
            assert encoding == 0  # raw: no other encoding was offered
            self.recv(w * h * self.bytes_per_pixel)
        return rects

    def pointer(self, x: int, y: int) -> None:
        self.ws.send(struct.pack(">BBHH", 5, 0, x, y))


def connect(url: str, **kwargs: object) -> ClientConnection:
    """Like noVNC, keep reading whatever the server sends (an unbounded queue), so a frame we do not
    parse cannot stall the closing handshake."""
    return ws_connect(url, max_queue=None, close_timeout=3, **kwargs)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def redis_client() -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(REDIS_URL)
    client.ping()
    yield client
    client.close()


@pytest.fixture(scope="module")
def proxy() -> Iterator[str]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "workers.envs.vnc.proxy",
            "--listen",
            f"127.0.0.1:{PROXY_PORT}",
            "--redis-url",
            REDIS_URL,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().decode()
    assert "listening" in line, line
    yield f"ws://127.0.0.1:{PROXY_PORT}/websockify"
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture(scope="module")
def desktop() -> Iterator[DesktopEnv]:
    env = DesktopEnv(DesktopConfig(display_range=(180, 199), apps=()))
    env.boot()
    yield env
    env.close()


def _target(env: DesktopEnv) -> VncTarget:
    assert env.vnc_target is not None
    return env.vnc_target


def test_handshake_and_frame_through_proxy(
    desktop: DesktopEnv, proxy: str, redis_client: redis.Redis
) -> None:
    token = mint_token(redis_client, "sess-1", 7, _target(desktop), read_only=False, ttl_s=60, key=KEY)
    with connect(f"{proxy}?token={token}", subprotocols=["binary"]) as ws:  # type: ignore[list-item]
        client = RfbClient(ws)
        assert client.handshake() == (1280, 800)
        assert client.request_frame(1280, 800) >= 1
        client.pointer(640, 400)
        assert client.request_frame(1280, 800) >= 1  # the server handled everything sent before it
        deadline = time.monotonic() + 5
        while desktop.xinput.pointer() != (640, 400) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert desktop.xinput.pointer() == (640, 400)
    revoke_tokens(redis_client, "sess-1")


def test_read_only_token_cannot_move_the_pointer(
    desktop: DesktopEnv, proxy: str, redis_client: redis.Redis
) -> None:
    desktop.xinput.move(10, 10)
    token = mint_token(redis_client, "sess-2", 7, _target(desktop), read_only=True, ttl_s=60, key=KEY)
    with connect(f"{proxy}?token={token}") as ws:
        client = RfbClient(ws)
        assert client.handshake() == (1280, 800)
        client.request_frame(1280, 800)
        # x11vnc may put the pointer back where an earlier client left it when a new one connects;
        # what matters is that this client's events do not move it.
        time.sleep(0.2)
        before = desktop.xinput.pointer()
        client.pointer(700, 500)
        ws.send(struct.pack(">BBHI", 4, 1, 0, 0x61))  # KeyEvent 'a' down
        # Both input messages were sent before this request; its reply proves the stream went on.
        assert client.request_frame(1280, 800) >= 1
        time.sleep(0.3)
        assert before != (700, 500)
        assert desktop.xinput.pointer() == before, desktop.xinput.pointer()
    revoke_tokens(redis_client, "sess-2")


def test_unknown_expired_and_revoked_tokens_are_refused(
    desktop: DesktopEnv, proxy: str, redis_client: redis.Redis
) -> None:
    with pytest.raises(InvalidStatus) as unknown:
        connect(f"{proxy}?token=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
    assert unknown.value.response.status_code == 403
    with pytest.raises(InvalidStatus):
        connect(proxy)  # no token at all
    token = mint_token(redis_client, "sess-3", 7, _target(desktop), read_only=False, ttl_s=1, key=KEY)
    time.sleep(1.2)
    with pytest.raises(InvalidStatus):
        connect(f"{proxy}?token={token}")
    token = mint_token(redis_client, "sess-3", 7, _target(desktop), read_only=False, ttl_s=60, key=KEY)
    with connect(f"{proxy}?token={token}") as ws:
        assert RfbClient(ws).handshake() == (1280, 800)
        assert revoke_tokens(redis_client, "sess-3") == 1
        assert redis_client.get(TOKEN_PREFIX + token) is None
        # The proxy re-checks open connections and closes this one.
        with pytest.raises(Exception):  # noqa: B017 - ConnectionClosed or TimeoutError both mean "gone"
            while True:
                ws.recv(timeout=5)
    with pytest.raises(InvalidStatus):
        connect(f"{proxy}?token={token}")


def test_mint_token_rejects_bad_arguments(redis_client: redis.Redis) -> None:
    target = VncTarget("127.0.0.1", 5900)
    with pytest.raises(TokenError):
        mint_token(redis_client, "", 1, target, read_only=True, ttl_s=60, key=KEY)
    with pytest.raises(TokenError):
        mint_token(redis_client, "s", 1, target, read_only=True, ttl_s=0, key=KEY)
    with pytest.raises(TokenError):
        mint_token(redis_client, "s", 1, VncTarget("127.0.0.1", 0), read_only=True, ttl_s=60, key=KEY)


def test_filter_drops_input_in_any_chunking_and_rejects_garbage() -> None:
    stream = (
        b"RFB 003.008\n"
        + b"\x01"  # security None
        + b"\x01"  # ClientInit
        + struct.pack(">BBH", 2, 0, 2)
        + struct.pack(">ii", 0, -223)  # SetEncodings
        + struct.pack(">BBHH", 5, 1, 3, 4)  # PointerEvent
        + struct.pack(">BBHI", 4, 1, 0, 0x61)  # KeyEvent
        + struct.pack(">BxxxI", 6, 3)
        + b"abc"  # ClientCutText
        + struct.pack(">BBHHHH", 3, 1, 0, 0, 10, 10)  # FramebufferUpdateRequest
    )
    kept = b"RFB 003.008\n\x01\x01" + stream[14:26] + stream[-10:]
    for size in (1, 3, 7, len(stream)):
        filt = ClientStreamFilter(read_only=True)
        out = b"".join(filt.feed(stream[i : i + size]) for i in range(0, len(stream), size))
        assert out == kept
        assert filt.dropped == 3
    writer = ClientStreamFilter(read_only=False)
    assert writer.feed(stream) == stream
    with pytest.raises(RfbProtocolError):
        ClientStreamFilter(read_only=True).feed(b"RFB 003.008\n\x01\x01\x63")
    with pytest.raises(RfbProtocolError):
        ClientStreamFilter(read_only=True).feed(b"HTTP/1.1 200\n")


def test_dead_x11vnc_is_restarted(desktop: DesktopEnv, proxy: str, redis_client: redis.Redis) -> None:
    assert desktop._vnc is not None and desktop._vnc.proc is not None  # the test needs the real process
    desktop._vnc.proc.kill()
    desktop._vnc.proc.wait(timeout=5)
    target = desktop.ensure_vnc()
    assert target is not None and desktop._vnc.alive()
    token = mint_token(redis_client, "sess-4", 7, target, read_only=True, ttl_s=60, key=KEY)
    with connect(f"{proxy}?token={token}") as ws:
        assert RfbClient(ws).handshake() == (1280, 800)
    revoke_tokens(redis_client, "sess-4")


def test_read_write_input_is_recorded_for_takeover(
    desktop: DesktopEnv, proxy: str, redis_client: redis.Redis
) -> None:
    session = f"sess-take-{time.monotonic_ns()}"
    token = mint_token(redis_client, session, 7, _target(desktop), read_only=False, ttl_s=60, key=KEY)
    with connect(f"{proxy}?token={token}") as ws:
        client = RfbClient(ws)
        client.handshake()
        ws.send(struct.pack(">BBHH", 5, 1, 120, 80) + struct.pack(">BBHH", 5, 0, 120, 80))  # click
        for char in "ok":
            ws.send(struct.pack(">BBHI", 4, 1, 0, ord(char)) + struct.pack(">BBHI", 4, 0, 0, ord(char)))
        client.request_frame(1280, 800)  # everything above went through the proxy
    deadline = time.monotonic() + 5
    events = read_events(redis_client, session)
    while len(events) < 6 and time.monotonic() < deadline:
        time.sleep(0.05)
        events = read_events(redis_client, session)
    folder = TakeoverFolder()
    recorded = [r.action for _, e in events for r in folder.feed(e)] + [r.action for r in folder.flush()]
    assert recorded == [Action("click", point=Point(120, 80)), Action("type", text="ok")]
    # A read-only viewer's (dropped) input is not recorded.
    viewer = mint_token(redis_client, session, 8, _target(desktop), read_only=True, ttl_s=60, key=KEY)
    with connect(f"{proxy}?token={viewer}") as ws:
        client = RfbClient(ws)
        client.handshake()
        ws.send(struct.pack(">BBHH", 5, 1, 5, 5))
        client.request_frame(1280, 800)
    assert len(read_events(redis_client, session)) == len(events)
    redis_client.delete(STREAM_PREFIX + session)
    revoke_tokens(redis_client, session)
