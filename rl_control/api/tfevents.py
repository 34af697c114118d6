"""TensorBoard event files, written directly (no tensorflow / tensorboardX dependency).

An event file is a sequence of TFRecords: `uint64 length`, `uint32 masked_crc32c(length)`, the
bytes, `uint32 masked_crc32c(bytes)`, all little-endian. Each record is a serialized
`tensorflow.Event` protobuf; the first one carries `file_version = "brain.Event:2"`, the others a
`Summary` with one `simple_value` per scalar:

    Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
    Summary { repeated Value value = 1; }
    Value   { string tag = 1; float simple_value = 2; }
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator

_POLY = 0x82F63B78  # CRC-32C (Castagnoli), reflected


def _table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ _POLY if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _table()


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    table = _TABLE
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc(data: bytes) -> int:
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _varint(n: int) -> bytes:
    if n < 0:
        n += 1 << 64  # int64 two's complement, as protobuf encodes negative int64
    out = bytearray()
    while True:
        bits = n & 0x7F
        n >>= 7
        if n:
            out.append(bits | 0x80)
        else:
            out.append(bits)
            return bytes(out)


def _field_bytes(number: int, payload: bytes) -> bytes:
    return _varint((number << 3) | 2) + _varint(len(payload)) + payload


def event_bytes(
    *, wall_time: float, step: int, scalars: Iterable[tuple[str, float]] = (), file_version: str = ""
) -> bytes:
    """One serialized `Event`."""
    out = bytearray(b"\x09" + struct.pack("<d", wall_time))  # field 1, wire type 1 (64-bit)
    out += b"\x10" + _varint(step)  # field 2, varint
    if file_version:
        out += _field_bytes(3, file_version.encode())
    values = b"".join(
        _field_bytes(1, _field_bytes(1, tag.encode()) + b"\x15" + struct.pack("<f", value))  # field 2, 32-bit
        for tag, value in scalars
    )
    if values:
        out += _field_bytes(5, values)
    return bytes(out)


def record(data: bytes) -> bytes:
    length = struct.pack("<Q", len(data))
    return length + struct.pack("<I", masked_crc(length)) + data + struct.pack("<I", masked_crc(data))


def event_file(points: Iterable[tuple[str, int, float, float]], *, start_time: float) -> Iterator[bytes]:
    """The records of an event file for `points` = (tag, step, wall seconds since start, value):
    the version header, then one event per point (wall_time = start_time + wall)."""
    yield record(event_bytes(wall_time=start_time, step=0, file_version="brain.Event:2"))
    for tag, step, wall, value in points:
        yield record(event_bytes(wall_time=start_time + wall, step=step, scalars=[(tag, value)]))
