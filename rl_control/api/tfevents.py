"""TensorBoard event files of a run's metrics, streamed: tensorboardX builds the `Event` protobufs
and frames them as TFRecords (length, masked CRC32C, bytes, masked CRC32C), into memory rather than
a file so the export can stream a run of any length. The first event carries
`file_version = "brain.Event:2"`, the others one scalar each."""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator

from tensorboardX.proto.event_pb2 import Event
from tensorboardX.record_writer import RecordWriter
from tensorboardX.summary import scalar


class _MemoryRecords(RecordWriter):
    """tensorboardX's record writer, writing to a buffer that `take` empties (not to a file)."""

    def __init__(self) -> None:
        self._writer = io.BytesIO()

    def take(self) -> bytes:
        data = self._writer.getvalue()
        self._writer.seek(0)
        self._writer.truncate()
        return data


def event_file(points: Iterable[tuple[str, int, float, float]], *, start_time: float) -> Iterator[bytes]:
    """The records of an event file for `points` = (tag, step, wall seconds since start, value):
    the version header, then one event per point (wall_time = start_time + wall)."""
    records = _MemoryRecords()
    records.write(Event(wall_time=start_time, step=0, file_version="brain.Event:2").SerializeToString())
    yield records.take()
    for tag, step, wall, value in points:
        event = Event(wall_time=start_time + wall, step=step, summary=scalar(tag, value))
        records.write(event.SerializeToString())
        yield records.take()
