"""The think-aloud end to end on a real Celery worker (its own queue, prefork, one process), real
Whisper (tiny.en, int8, CPU), real PostgreSQL and Redis: upload synthesized speech in chunks of
mixed formats over the API, watch the live pass fill the steps, finish, kill the worker process in
the middle of the full pass, and check the job survives, the steps hold the right words, the
recording is re-encoded for review and the workspace's websocket group got the events.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import psutil
import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.test import override_settings

from annotation import events
from annotation.models import AnnotationSession, ThinkAloudRecording
from benchmarks.asr import score_alignment
from tests.factories import StepFactory, TaskFactory, TrajectoryFactory
from tests.service_urls import subprocess_database_url
from workers.asr.align import StepSpeech
from workers.asr.audio import decode_chunk
from workers.asr.synth import generate_session, split_into_chunks
from workers.asr.types import Word

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

CELERY = [sys.executable, "-m", "celery", "-A", "webapp", "worker", "--without-gossip", "--without-mingle",
          "--without-heartbeat", "-l", "warning"]  # fmt: skip


@pytest.fixture
def asr_worker(monkeypatch: pytest.MonkeyPatch) -> Iterator[subprocess.Popen]:
    """A prefork worker with one child on a queue of its own, on this test's database (the queue is
    also put in the environment, for servers a test starts after this fixture)."""
    queue = f"asr.hpb{uuid.uuid4().hex[:8]}"
    live = f"{queue}.live"
    monkeypatch.setenv("THINKALOUD_QUEUE", queue)
    monkeypatch.setenv("THINKALOUD_LIVE_QUEUE", live)
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "webapp.settings.test", "THINKALOUD_QUEUE": queue,
           "THINKALOUD_LIVE_QUEUE": live, "DATABASE_URL": subprocess_database_url()}  # fmt: skip
    proc = subprocess.Popen(
        [*CELERY, "-n", f"{queue}@%h", "-Q", f"{live},{queue}", "-P", "prefork", "-c", "1"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    with override_settings(THINKALOUD_QUEUE=queue, THINKALOUD_LIVE_QUEUE=live):
        try:
            yield proc
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)


def wait_for(check, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_think_aloud_on_a_real_worker_survives_a_killed_process(api, users, asr_worker) -> None:
    synth = generate_session(seed=23, n_steps=5, voice="en-us", speed_wpm=165, start_clock=3.0)
    task = TaskFactory()
    traj = TrajectoryFactory(task=task, source="annotation", annotator=users["annotator"])
    for i, t in enumerate(synth.action_times):
        StepFactory(trajectory=traj, index=i, clock_start=t - 1.0, clock_end=t)
    session = AnnotationSession.objects.create(
        user=users["annotator"], task=task, trajectory=traj, status="active",
        clock_origin=time.time() - synth.start_clock - synth.duration_s - 5,
    )  # fmt: skip
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(events.group(session.pk), channel)

    client = api("annotator")
    chunks = split_into_chunks(synth, 9.0, ("webm", "ogg", "wav"))
    for k, chunk in enumerate(chunks):
        kind = "audio/" + chunk.name.rsplit(".", 1)[1]
        url = f"/api/annotation/sessions/{session.pk}/thinkaloud/chunks/{k}/?start_clock={chunk.start_clock}"
        assert client.put(url, data=chunk.data, content_type=kind).status_code == 201

    recording = ThinkAloudRecording.objects.get(session=session)
    wait_for(lambda: not recording.chunks.filter(transcribed=False).exists(), 120, "the live pass")
    live = {s.index: s.human_thought_verbatim for s in traj.steps.all()}
    assert sum(bool(v) for v in live.values()) >= 3, live  # words arrived per step before finishing

    assert client.post(f"/api/annotation/sessions/{session.pk}/thinkaloud/finish/").status_code == 202
    wait_for(
        lambda: ThinkAloudRecording.objects.get(pk=recording.pk).status == "running", 60, "the full pass"
    )
    worker = psutil.Process(asr_worker.pid)
    [child] = wait_for(lambda: worker.children(), 10, "the pool process")
    child.kill()  # as the OOM killer would: the job was taken (acks_late) but not finished
    done = wait_for(
        lambda: ThinkAloudRecording.objects.filter(pk=recording.pk, status__in=["done", "failed"]).first(),
        180,
        "the full pass after the kill",
    )
    assert done.status == "done", done.error
    assert done.attempts >= 2  # delivered again after the process died
    assert done.finished and done.transcript["words"]
    # The full recording re-encoded for review, on the session clock.
    with done.audio.open("rb") as fh:
        audio = decode_chunk(fh.read())
    assert abs(len(audio) / 16_000 - synth.duration_s) < 1.0
    assert abs(done.audio_start_clock - synth.start_clock) < 0.05

    steps = list(traj.steps.order_by("index"))
    speech = [StepSpeech(s.index, s.clock_end, tuple(Word(w["w"], w["start"], w["end"], w["p"]) for w in s.human_words)) for s in steps]  # fmt: skip
    final = done.transcript["steps"][-1]
    assert final["final"] is True
    speech.append(StepSpeech(len(steps), None, tuple(Word(w["w"], w["start"], w["end"], w["p"]) for w in final["words"])))  # fmt: skip
    score = score_alignment(speech, synth.reference_words())
    assert score.correct / score.total >= 0.85, (score, [s.human_thought_verbatim for s in steps])

    # The workspace's group got think-aloud events, the last one saying the full pass is done.
    seen = []
    while True:
        try:
            msg = async_to_sync(_receive)(layer, channel, 2.0)
        except TimeoutError:
            break
        if msg.get("type") == "annotation.thinkaloud" and msg.get("session_id") == session.pk:
            seen.append(msg["state"]["status"])
    assert "running" in seen and seen[-1] == "done", seen


async def _receive(layer, channel: str, timeout: float) -> dict:
    import asyncio

    return await asyncio.wait_for(layer.receive(channel), timeout)
