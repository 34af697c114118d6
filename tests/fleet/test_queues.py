"""Queue depth and oldest wait per Celery queue, read from the broker's Redis lists (the fleet page
and its API), and live think-aloud chunks on their own queue ahead of full passes; on the real
PostgreSQL and Redis, without a worker (the messages stay in the broker to be counted)."""

from __future__ import annotations

import io
import time
import uuid
from collections.abc import Iterator

import numpy as np
import pytest
from django.test import override_settings

from annotation.models import AnnotationSession
from tests.factories import TaskFactory, TrajectoryFactory
from webapp.fleet import queues
from webapp.fleet import services as fleet
from workers.asr.audio import SAMPLE_RATE, encode_audio


@pytest.fixture
def asr_queues() -> Iterator[dict[str, str]]:
    n = uuid.uuid4().hex[:8]
    names = {"THINKALOUD_QUEUE": f"asr.q{n}", "THINKALOUD_LIVE_QUEUE": f"asr.q{n}.live",
             "FLEET_REDIS_PREFIX": f"test:queues:{n}"}  # fmt: skip
    with override_settings(**names):
        fleet.registry.cache_clear()
        yield names
        r = queues.broker()
        r.delete(names["THINKALOUD_QUEUE"], names["THINKALOUD_LIVE_QUEUE"])
        fleet.registry().clear()
    fleet.registry.cache_clear()


def _tone(seconds: float = 1.0) -> bytes:
    t = np.arange(int(seconds * SAMPLE_RATE)) / SAMPLE_RATE
    return encode_audio((0.2 * np.sin(2 * np.pi * 440 * t)).astype(np.float32), "webm")


@pytest.mark.django_db
def test_live_chunks_and_full_passes_queue_apart_and_the_fleet_page_counts_them(
    api, users, asr_queues, django_capture_on_commit_callbacks
) -> None:
    live, full = asr_queues["THINKALOUD_LIVE_QUEUE"], asr_queues["THINKALOUD_QUEUE"]
    task = TaskFactory()
    traj = TrajectoryFactory(task=task, source="annotation", annotator=users["annotator"])
    session = AnnotationSession.objects.create(
        user=users["annotator"], task=task, trajectory=traj, status="active", clock_origin=time.time() - 60
    )
    client = api("annotator")
    base = f"/api/annotation/sessions/{session.pk}/thinkaloud"
    with django_capture_on_commit_callbacks(execute=True):
        for k in range(2):
            url = f"{base}/chunks/{k}/?start_clock={1.0 + k}"
            assert client.put(url, data=_tone(), content_type="audio/webm").status_code == 201
    with django_capture_on_commit_callbacks(execute=True):
        assert client.post(f"{base}/finish/").status_code == 202
    assert queues.queue_depth(live)["depth"] == 2  # the live pass, chunk by chunk
    assert queues.queue_depth(full)["depth"] == 1  # the full pass, on its own queue
    time.sleep(1.1)
    queues.worker_announce(queue=live, worker="asr-live@test", concurrency=2)
    body = api("researcher").get("/api/fleet/").json()
    rows = {q["queue"]: q for q in body["queues"]}
    assert rows[live]["depth"] == 2 and rows[live]["oldest_wait_s"] >= 1.0
    assert rows[live]["workers"] == ["asr-live@test"] and rows[live]["concurrency"] == 2
    assert {"default", "rollout", "train", "asr.live", "asr"} <= set(rows)


def test_a_lapsed_worker_is_not_counted(asr_queues) -> None:
    queues.worker_announce(queue="rollout", worker="gone@test", concurrency=4, ttl_s=-1.0)
    queues.worker_announce(queue="rollout", worker="live@test", concurrency=2)
    assert queues.workers_of("rollout") == {"live@test": 2}
    queues.worker_retire(queue="rollout", worker="live@test")
    assert queues.workers_of("rollout") == {}


def test_fleet_ready_waits_for_every_queue_and_warm_kind_then_says_ready() -> None:
    """`manage.py fleet_ready` (what `make up` waits on before it says "up"): refused naming what is
    missing while a queue has no live worker or a kind no environment, ready once both are there."""
    from django.core.management import CommandError, call_command

    n = uuid.uuid4().hex[:8]
    with override_settings(FLEET_REDIS_PREFIX=f"test:ready:{n}"):
        fleet.registry.cache_clear()
        try:
            args = ["--queue", f"rollout.{n}", "--queue", f"train.{n}", "--kind", "browser"]
            with pytest.raises(CommandError, match=rf"rollout\.{n}'.*train\.{n}'.*a browser environment"):
                call_command("fleet_ready", *args, "--timeout", "0")
            queues.worker_announce(queue=f"rollout.{n}", worker="rollout@here", concurrency=2)
            queues.worker_announce(queue=f"train.{n}", worker="train@here", concurrency=1, ttl_s=-1)  # lapsed
            with pytest.raises(CommandError, match=rf"train\.{n}'.*browser") as refused:
                call_command("fleet_ready", *args, "--timeout", "0")
            assert f"rollout.{n}" not in str(refused.value)
            queues.worker_announce(queue=f"train.{n}", worker="train@here", concurrency=1)
            fleet.registry().register_env(env_id=f"e{n}", kind="browser", worker="envhost1", boot_s=1.0)
            out = io.StringIO()
            call_command("fleet_ready", *args, "--timeout", "0", stdout=out)
            assert "ready" in out.getvalue()
            with pytest.raises(CommandError, match="between 0 and 3600"):
                call_command("fleet_ready", "--timeout", "-1")
        finally:
            fleet.registry().clear()
            fleet.registry.cache_clear()
