"""Issue 32 on the real PostgreSQL: a too-long chunk is refused from its container header before any
audio is decoded; stored transcripts of the old word format are migrated to {w, start, end, p}."""

from __future__ import annotations

import importlib
import io
import time
import tracemalloc

import av
import numpy as np
import pytest
from django.apps import apps

from annotation.models import AnnotationSession, ThinkAloudChunk, ThinkAloudRecording
from annotation.thinkaloud.selectors import thinkaloud_state
from tests.factories import TaskFactory, TrajectoryFactory
from workers.asr.audio import encode_audio, probe_duration

pytestmark = pytest.mark.django_db


def long_opus(seconds: float, fmt: str = "ogg") -> bytes:
    """A real `seconds`-long opus file made in ~2 s: 10 s encoded once, its packets muxed again and
    again with shifted timestamps (encoding 25 minutes would take a minute on this machine)."""
    piece = encode_audio(np.zeros(16_000 * 10, np.float32), fmt, bit_rate=6000)
    with av.open(io.BytesIO(piece)) as src:
        stream = src.streams.audio[0]
        packets = [(bytes(p), p.pts, p.duration, p.time_base) for p in src.demux(stream) if p.size]
        span = packets[-1][1] + packets[-1][2] - packets[0][1]
        buffer = io.BytesIO()
        with av.open(buffer, "w", format=fmt) as out:
            target = out.add_stream_from_template(stream)
            for k in range(int(seconds // 10)):
                for data, pts, duration, time_base in packets:
                    packet = av.Packet(data)
                    packet.pts = packet.dts = pts + k * span
                    packet.duration, packet.time_base, packet.stream = duration, time_base, target
                    out.mux(packet)
    return buffer.getvalue()


def test_a_25_minute_chunk_gets_its_413_without_being_decoded(api, users) -> None:
    data = long_opus(25 * 60)
    assert len(data) < 2_000_000  # under the byte limit: only its length can refuse it
    assert probe_duration(data, 120.0) == pytest.approx(1500, abs=2)
    session = AnnotationSession.objects.create(
        user=users["annotator"], task=(task := TaskFactory()), status="active", clock_origin=time.time() - 60,
        trajectory=TrajectoryFactory(task=task, source="annotation", annotator=users["annotator"]),
    )  # fmt: skip
    url = f"/api/annotation/sessions/{session.pk}/thinkaloud/chunks/0/?start_clock=1.0"
    client = api("annotator")
    tracemalloc.start()
    try:
        started = time.perf_counter()
        answer = client.put(url, data=data, content_type="audio/ogg")
        took = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert answer.status_code == 413, answer.content
    assert "lasts 150" in answer.json()["detail"]
    # Decoding would hold 25 min of 16 kHz float32 samples (96 MB) and take seconds.
    assert peak < 30_000_000, peak
    assert took < 5.0, took
    assert not ThinkAloudChunk.objects.exists()


def test_old_transcripts_are_migrated_to_the_one_word_format(users) -> None:
    task = TaskFactory()
    session = AnnotationSession.objects.create(user=users["annotator"], task=task, status="submitted")
    old = {"text": "done", "start": 9.0, "end": 9.4, "probability": 0.8}
    recording = ThinkAloudRecording.objects.create(
        session=session,
        transcript={
            "words": [old],
            "steps": [{"step_index": 0, "final": True, "verbatim": "done", "words": [old]}],
        },
    )
    migration = importlib.import_module("annotation.migrations.0007_thinkaloud_word_format")
    migration.forwards(apps, None)
    recording.refresh_from_db()
    new = {"w": "done", "start": 9.0, "end": 9.4, "p": 0.8}
    assert recording.transcript["words"] == [new] and recording.transcript["steps"][0]["words"] == [new]
    assert thinkaloud_state(session)["final"]["words"] == [new]
    migration.forwards(apps, None)  # running it again changes nothing
    recording.refresh_from_db()
    assert recording.transcript["words"] == [new]
