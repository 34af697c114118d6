"""A benchmark owns what it starts (issue 24): stopped by SIGTERM or SIGINT, or ending normally, it
leaves no process behind — children in sessions of their own, orphans whose parent died, and
processes that ignore SIGTERM included."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from webapp.settings.env import database_url

# A "benchmark" that starts what real ones start: a child in its own session (as LocalStack's Celery
# workers), that child's own child which outlives it (re-parented: a policy server started by a
# trainer), and a process that ignores SIGTERM. It prints their pids, then waits to be stopped.
BENCH = textwrap.dedent(
    """
    import os, signal, subprocess, sys, time
    from benchmarks.harness.processes import owned_processes

    STUBBORN = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"
    SPAWNER = (
        "import subprocess, sys, time;"
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'], start_new_session=True);"
        "print(p.pid, flush=True); time.sleep(600)"
    )
    with owned_processes(grace_s=2.0):
        session = subprocess.Popen([sys.executable, "-c", SPAWNER], start_new_session=True, stdout=subprocess.PIPE, text=True)
        grandchild = int(session.stdout.readline())
        stubborn = subprocess.Popen([sys.executable, "-c", STUBBORN])
        orphaner = subprocess.Popen([sys.executable, "-c", SPAWNER], stdout=subprocess.PIPE, text=True)
        orphan = int(orphaner.stdout.readline())
        orphaner.kill(); orphaner.wait()  # its child is re-parented to us (the subreaper), not init
        print(" ".join(map(str, [session.pid, grandchild, stubborn.pid, orphan])), flush=True)
        if sys.argv[1] == "wait":
            time.sleep(600)
    print("clean exit", flush=True)
    """
)


def _start(mode: str) -> tuple[subprocess.Popen[str], list[int]]:
    proc = subprocess.Popen([sys.executable, "-c", BENCH, mode], stdout=subprocess.PIPE, text=True,
                            cwd=os.getcwd(), env={**os.environ, "PYTHONPATH": os.getcwd()})  # fmt: skip
    assert proc.stdout is not None
    pids = [int(p) for p in proc.stdout.readline().split()]
    assert len(pids) == 4, pids
    return proc, pids


def _alive(pids: list[int]) -> list[int]:
    out = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                out.append(pid)
        except psutil.NoSuchProcess:
            pass
    return out


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signalled_bench_ends_every_process_it_started(sig: int) -> None:
    proc, pids = _start("wait")
    try:
        assert _alive(pids) == pids
        assert psutil.Process(pids[3]).ppid() == proc.pid  # the orphan came back to the bench, not init
        proc.send_signal(sig)
        assert proc.wait(timeout=30) == 128 + sig
        deadline = time.monotonic() + 10
        while _alive(pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _alive(pids) == []
    finally:
        for pid in _alive(pids):
            os.kill(pid, signal.SIGKILL)
        proc.kill()


def test_a_bench_that_ends_normally_leaves_nothing_behind() -> None:
    proc, pids = _start("return")
    assert proc.wait(timeout=30) == 0
    assert proc.stdout is not None and "clean exit" in proc.stdout.read()
    assert _alive(pids) == []


@pytest.mark.slow
@pytest.mark.timeout(1200)  # migrations, the starter and three workers take minutes on a loaded machine
def test_bench_rollout_stopped_by_sigterm_leaves_no_worker_browser_or_server() -> None:
    """The real thing (issue 24: a `timeout` left three Celery workers, two Playwright drivers with
    their Chromium trees and a policy server running): `bench rollout --quick` is stopped by SIGTERM
    once its stack is up; nothing it started survives."""
    from django.conf import settings

    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "webapp.settings.dev",
           "DATABASE_URL": database_url(settings.DATABASES["default"]), "REDIS_URL": settings.REDIS_URL}  # fmt: skip
    proc = subprocess.Popen([sys.executable, "manage.py", "bench", "rollout", "--quick"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    seen: dict[int, str] = {}
    try:
        deadline = time.monotonic() + 1000
        while time.monotonic() < deadline:
            for p in psutil.Process(proc.pid).children(recursive=True):
                try:
                    seen[p.pid] = " ".join(p.cmdline())[:120]
                except psutil.Error:
                    pass
            if sum("celery" in c for c in seen.values()) >= 3 and any("chrom" in c for c in seen.values()):
                break
            assert proc.poll() is None, "the bench ended before its stack was up"
            time.sleep(1.0)
        else:
            pytest.fail(f"the stack did not come up: {sorted(seen.values())}")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=120) == 128 + signal.SIGTERM
        time.sleep(2.0)
        survivors = {pid: seen[pid] for pid in _alive(list(seen))}
        assert survivors == {}, survivors
    finally:
        for pid in _alive(list(seen)):
            os.kill(pid, signal.SIGKILL)
        proc.kill()
