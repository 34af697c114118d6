"""Take-over on a real desktop, the whole way: the annotator's VNC grant, input sent over the RFB
protocol through the real token proxy into Xvfb (an xterm), the proxy's recording, the desktop's frame
recorder, and `takeover/end` turning it into steps — each with the screen before its own action."""

from __future__ import annotations

import hashlib
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from django.conf import settings
from django.core.files.storage import default_storage
from django.test import override_settings

from annotation.models import Assignment
from tests.annotation.test_annotation_flow import _wait_candidates, _wait_idle
from tests.envs.test_desktop_vnc import RfbClient, connect
from tests.factories import TaskFactory
from webapp.store.models import Step

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def warm_pool() -> str:
    return "desktop=1"


@pytest.fixture
def vnc_proxy() -> Iterator[str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "workers.envs.vnc.proxy", "--listen", f"127.0.0.1:{port}",
         "--redis-url", settings.REDIS_URL],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    assert proc.stdout is not None and "listening" in proc.stdout.readline().decode()
    with override_settings(VNC_PROXY_PUBLIC_URL=f"ws://127.0.0.1:{port}"):
        yield f"ws://127.0.0.1:{port}"
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(timeout=10)


def _key(ws, keysym: int) -> None:
    ws.send(struct.pack(">BBHI", 4, 1, 0, keysym) + struct.pack(">BBHI", 4, 0, 0, keysym))


def test_desktop_takeover_records_steps_with_their_own_screens(api, users, live_stack, vnc_proxy) -> None:
    task = TaskFactory(
        external_id="xterm-echo", env_kind="desktop", source="custom", setup={"apps": ["xterm"]},
        instruction="Print hi in the terminal",
    )  # fmt: skip
    Assignment.objects.create(user=users["annotator"], task=task)
    client = api("annotator")
    _wait_idle("desktop")
    started = client.post("/api/annotation/sessions/", {"task": task.pk}, format="json")
    assert started.status_code == 201, started.content
    sid = started.json()["id"]
    _wait_candidates(client, sid, 1)

    grant = client.post(f"/api/annotation/sessions/{sid}/vnc/", {"read_only": False}, format="json")
    assert grant.status_code == 200, grant.content
    assert grant.json()["read_only"] is False
    start = client.post(f"/api/annotation/sessions/{sid}/takeover/start/", {}, format="json")
    assert start.status_code == 200 and start.json() == {"recording_frames": True}

    with connect(grant.json()["url"]) as ws:
        rfb = RfbClient(ws)
        width, height = rfb.handshake()
        ws.send(
            struct.pack(">BBHH", 5, 1, width // 2, height // 2)
            + struct.pack(">BBHH", 5, 0, width // 2, height // 2)
        )
        time.sleep(0.6)
        for char in "echo hi":
            _key(ws, ord(char))
        _key(ws, 0xFF0D)  # Enter ends the typed text
        time.sleep(0.8)  # the shell prints; the recorder sees the new screen
        for char in "ls":
            _key(ws, ord(char))
        time.sleep(0.3)
        rfb.request_frame(width, height)  # everything above went through the proxy

    ended = client.post(
        f"/api/annotation/sessions/{sid}/takeover/end/", {"thought": "I typed it myself"}, format="json"
    )
    assert ended.status_code == 200, ended.content
    assert ended.json()["actions"] == 3
    steps = list(Step.objects.filter(trajectory_id=ended.json()["state"]["trajectory_id"]).order_by("index"))
    assert [s.action[0]["kind"] for s in steps] == ["click", "type", "type"]
    assert steps[1].action[0]["text"] == "echo hi\n" and steps[2].action[0]["text"] == "ls"
    assert all(
        s.decision == "takeover" and s.decision_meta["screenshot"] == "before the action" for s in steps
    )
    digests = [hashlib.sha256(default_storage.open(s.screenshot.name).read()).hexdigest() for s in steps]
    assert digests[2] != digests[1]  # "hi" was printed between the two typed actions
    # Control is back with the model: a new observation with candidates for it.
    assert _wait_candidates(client, sid, 2)["candidates"]["status"] in ("ready", "failed")
