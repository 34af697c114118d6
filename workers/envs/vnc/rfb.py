"""Parse the RFB (VNC) client→server byte stream message by message, so the proxy can drop input.

A read-only viewer must not move the pointer, press keys, paste, resize or power-cycle. The
stream has no framing, so the filter must know every message length the client may send; an
unknown message type closes the connection rather than risk forwarding input it did not parse.
Message layouts: RFC 6143 §7 plus the noVNC extensions (fences, continuous updates, QEMU keys,
SetDesktopSize, xvp).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

# Client messages that change the machine's state; dropped for read-only tokens.
INPUT_TYPES: frozenset[int] = frozenset({4, 5, 6, 250, 251, 255})
MAX_CUT_TEXT = 8 << 20


class RfbProtocolError(ValueError):
    """The client sent something the filter cannot parse; the connection must close."""


class ClientStreamFilter:
    """Feed client bytes in arbitrary chunks; get back the bytes to forward to the server."""

    def __init__(self, read_only: bool) -> None:
        self.read_only = read_only
        self.dropped = 0  # input messages dropped, for logs and tests
        # Forwarded pointer / key events, decoded, for take-over recording; the caller drains it.
        self.input_events: list[InputEvent] = []
        self._buf = bytearray()
        self._state = "version"
        self._version = (3, 8)

    def feed(self, data: bytes) -> bytes:
        self._buf.extend(data)
        out = bytearray()
        while True:
            size = self._next_size()
            if size is None or len(self._buf) < size:
                return bytes(out)
            chunk = bytes(self._buf[:size])
            del self._buf[:size]
            if self._keep(chunk):
                out.extend(chunk)
                if self._state == "messages" and chunk[0] in (4, 5):
                    self.input_events.append(decode_input(chunk))
            self._advance(chunk)

    # handshake -------------------------------------------------------------------------------

    def _next_size(self) -> int | None:
        """Bytes the next client message needs, or None until enough is buffered to tell."""
        if self._state == "version":
            return 12
        if self._state in {"security", "init"}:
            return 1
        if self._state == "vncauth":
            return 16
        return _message_size(self._buf)

    def _advance(self, chunk: bytes) -> None:
        if self._state == "version":
            self._version = _parse_version(chunk)
            # RFB 3.3: the server picks the security type and the client only sends ClientInit.
            self._state = "init" if self._version < (3, 7) else "security"
        elif self._state == "security":
            if chunk[0] == 1:
                self._state = "init"
            elif chunk[0] == 2:
                self._state = "vncauth"
            else:
                raise RfbProtocolError(f"unsupported security type {chunk[0]}")
        elif self._state == "vncauth":
            self._state = "init"
        elif self._state == "init":
            self._state = "messages"

    def _keep(self, chunk: bytes) -> bool:
        if self._state != "messages" or not self.read_only or chunk[0] not in INPUT_TYPES:
            return True
        self.dropped += 1
        return False


@dataclass(frozen=True)
class InputEvent:
    """A forwarded KeyEvent (kind 'key': keysym, down) or PointerEvent (kind 'pointer': x, y,
    buttons = RFB button mask, bit 0 = left, 1 = middle, 2 = right, 3/4 = wheel up/down,
    5/6 = wheel left/right)."""

    kind: str
    x: int = 0
    y: int = 0
    buttons: int = 0
    keysym: int = 0
    down: bool = False


def decode_input(chunk: bytes) -> InputEvent:
    if chunk[0] == 4:
        down, keysym = struct.unpack_from(">BxxI", chunk, 1)
        return InputEvent("key", keysym=keysym, down=bool(down))
    buttons, x, y = struct.unpack_from(">BHH", chunk, 1)
    return InputEvent("pointer", x=x, y=y, buttons=buttons)


def _parse_version(chunk: bytes) -> tuple[int, int]:
    if not (chunk.startswith(b"RFB ") and chunk.endswith(b"\n") and chunk[7:8] == b"."):
        raise RfbProtocolError(f"bad ProtocolVersion {chunk!r}")
    try:
        return int(chunk[4:7]), int(chunk[8:11])
    except ValueError as exc:
        raise RfbProtocolError(f"bad ProtocolVersion {chunk!r}") from exc


def _message_size(buf: bytearray) -> int | None:
    """Total length of the normal-phase message at the head of `buf` (None: need more bytes)."""
    if not buf:
        return None
    kind = buf[0]
    fixed = {0: 20, 3: 10, 4: 8, 5: 6, 150: 10, 250: 4}
    if kind in fixed:
        return fixed[kind]
    if kind == 2:  # SetEncodings: u8 type, pad, u16 count, count × s32
        return None if len(buf) < 4 else 4 + 4 * struct.unpack_from(">H", buf, 2)[0]
    if kind == 6:  # ClientCutText: u8 type, 3 pad, s32 length (negative = extended clipboard)
        if len(buf) < 8:
            return None
        length: int = abs(struct.unpack_from(">i", buf, 4)[0])
        if length > MAX_CUT_TEXT:
            raise RfbProtocolError(f"ClientCutText of {length} bytes is too large")
        return 8 + length
    if kind == 248:  # ClientFence: u8 type, 3 pad, u32 flags, u8 length, payload
        return None if len(buf) < 9 else 9 + buf[8]
    if kind == 251:  # SetDesktopSize: u8, pad, u16 w, u16 h, u8 screens, pad, screens × 16
        return None if len(buf) < 8 else 8 + 16 * buf[6]
    if kind == 255:  # QEMU: u8 type, u8 submessage
        return _qemu_size(buf)
    raise RfbProtocolError(f"unknown RFB client message type {kind}")


def _qemu_size(buf: bytearray) -> int | None:
    if len(buf) < 2:
        return None
    if buf[1] == 0:  # extended key event
        return 12
    if buf[1] == 1:  # audio: u16 operation, 'set format' carries 6 more bytes
        if len(buf) < 4:
            return None
        return 10 if struct.unpack_from(">H", buf, 2)[0] == 2 else 4
    raise RfbProtocolError(f"unknown QEMU submessage {buf[1]}")
