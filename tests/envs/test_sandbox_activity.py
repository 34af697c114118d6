"""Is a box's software waiting for input (workers.envs.sandbox.activity)? Real bwrap boxes, real busy
loops — inside the box (its work) and outside it (a loaded host, which must not read as quiet)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from workers.envs.sandbox import Sandbox, sandbox_available
from workers.envs.sandbox.activity import box_pids, busy_threads, wait_quiescent

pytestmark = pytest.mark.skipif(not sandbox_available(), reason="needs bwrap with user namespaces, as root")


@pytest.fixture
def box(tmp_path: Path) -> Iterator[Sandbox]:
    sandbox = Sandbox(tmp_path)
    sandbox.start()
    try:
        yield sandbox
    finally:
        sandbox.close()


def test_a_box_is_quiescent_while_its_processes_sleep_however_busy_the_host(box: Sandbox) -> None:
    sleeper = box.spawn(["sleep", "300"])
    host_loops = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2 * (os.cpu_count() or 1))
    ]
    try:
        quiet = wait_quiescent(box.init_pid, max_s=30)
        assert quiet.reached, quiet  # the host's busy loops are not the box's
        assert not {p.pid for p in host_loops} & set(box_pids(box.init_pid))
        assert len(box_pids(box.init_pid)) >= 2  # its init and the sleep entered with nsenter
    finally:
        for loop in host_loops:
            loop.kill()
            loop.wait()
        sleeper.kill()
        sleeper.wait()


def test_a_box_with_work_to_do_is_not_quiescent(box: Sandbox) -> None:
    worker = box.spawn(["/bin/sh", "-c", "while :; do :; done"])
    try:
        quiet = wait_quiescent(box.init_pid, max_s=2.0)
        assert not quiet.reached and quiet.waited_s >= 2.0
        assert any(b.startswith("sh/") for b in quiet.busy), quiet.busy
        assert busy_threads(box.init_pid)
    finally:
        os.killpg(worker.pid, signal.SIGKILL)  # nsenter and the shell it started in the box
        worker.wait()
    assert wait_quiescent(box.init_pid, max_s=30).reached
