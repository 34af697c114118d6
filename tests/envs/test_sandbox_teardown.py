"""Closing a sandbox on a loaded machine, against real bwrap boxes."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from workers.envs.sandbox import Sandbox, sandbox_available
from workers.envs.sandbox.uids import uid_pids

pytestmark = pytest.mark.skipif(not sandbox_available(), reason="needs bwrap with user namespaces, as root")


def test_close_waits_for_a_box_whose_killed_processes_are_reaped_late(tmp_path: Path) -> None:
    # A process that joined the box (nsenter's child) is reaped by nsenter, outside the box; until
    # then the box's init is exiting but still listed under the box's uid. On a loaded machine
    # nsenter runs late, and close() reported "processes of sandbox uid … survive SIGKILL" after 2 s.
    box = Sandbox(tmp_path)
    box.start()
    uid = box.uid
    nsenter = box.spawn(["sleep", "300"])
    time.sleep(0.3)
    os.kill(nsenter.pid, signal.SIGSTOP)  # it cannot reap its child for 3 s
    threading.Timer(3.0, os.kill, (nsenter.pid, signal.SIGCONT)).start()
    t0 = time.monotonic()
    box.close()
    assert 2.5 < time.monotonic() - t0 < 15
    assert uid_pids(uid) == []
    nsenter.wait(timeout=10)
