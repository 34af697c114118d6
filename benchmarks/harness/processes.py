"""A benchmark owns what it starts: `owned_processes()` ends every process started inside it.

Benchmarks start Celery workers, uvicorn servers, policy servers, Playwright drivers with their
Chromium trees; many in sessions of their own (so a `timeout`'s signal to the process group does not
reach them) and some started by those children (a trainer worker starts a run's policy server).
The registry of children is the process tree itself:

- the benchmark process becomes a child subreaper (Linux `PR_SET_CHILD_SUBREAPER`): a descendant
  whose parent dies is re-parented to it, not to init, so nothing started under it can leave the tree;
- SIGTERM, SIGINT and SIGHUP raise `BenchStopped` (a `SystemExit`) in the main thread, so the
  benchmark's own `finally` blocks (stack.stop(), env.close()) run as on an error;
- on the way out (success, error or signal) every descendant started inside the block gets SIGTERM,
  then SIGKILL after a grace period, re-scanned until none is left (those re-parented meanwhile too).
"""

from __future__ import annotations

import ctypes
import logging
import signal
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psutil

log = logging.getLogger(__name__)
PR_SET_CHILD_SUBREAPER = 36
PR_GET_CHILD_SUBREAPER = 37
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class BenchStopped(SystemExit):
    """The benchmark was asked to stop by a signal; its exit status is 128 + the signal number."""


def _prctl(option: int, value: Any) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    return int(libc.prctl(option, value, 0, 0, 0))


def _subreaper(on: bool) -> bool:
    """Set this process's child-subreaper flag; returns the previous value."""
    previous = ctypes.c_int(0)
    _prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(previous))
    _prctl(PR_SET_CHILD_SUBREAPER, 1 if on else 0)
    return bool(previous.value)


def _descendants() -> list[psutil.Process]:
    try:
        return psutil.Process().children(recursive=True)
    except psutil.Error:
        return []


def end_descendants(keep: set[tuple[int, float]] = frozenset(), grace_s: float = 10.0) -> list[int]:  # type: ignore[assignment]
    """SIGTERM every descendant not in `keep` ((pid, create_time) pairs), SIGKILL those still alive
    after `grace_s`, and repeat for descendants re-parented meanwhile. Returns the pids ended."""
    ended: list[int] = []
    for round_ in range(5):
        procs = [p for p in _descendants() if _identity(p) not in keep]
        if not procs:
            break
        for p in procs:
            try:
                p.send_signal(signal.SIGTERM if round_ == 0 else signal.SIGKILL)
            except psutil.Error:
                pass
        _, alive = psutil.wait_procs(procs, timeout=grace_s if round_ == 0 else 5.0)
        for p in alive:
            try:
                p.kill()
            except psutil.Error:
                pass
        psutil.wait_procs(alive, timeout=5.0)
        ended += [p.pid for p in procs]
    return ended


def _identity(p: psutil.Process) -> tuple[int, float]:
    try:
        return (p.pid, p.create_time())
    except psutil.Error:
        return (p.pid, 0.0)


@contextmanager
def owned_processes(grace_s: float = 10.0) -> Iterator[None]:
    """Run a benchmark owning every process it starts (see the module docstring). Signal handlers are
    installed only in the main thread; the previous handlers and subreaper flag are restored."""
    main = threading.current_thread() is threading.main_thread()
    before = {_identity(p) for p in _descendants()}
    was_subreaper = _subreaper(True)
    previous: dict[signal.Signals, Any] = {}
    stopping = {"signal": 0}

    def stop(signum: int, _frame: Any) -> None:
        if stopping["signal"]:
            return  # already on the way out: let the clean-up finish
        stopping["signal"] = signum
        raise BenchStopped(128 + signum)

    if main:
        for sig in STOP_SIGNALS:
            previous[sig] = signal.signal(sig, stop)
    try:
        yield
    finally:
        if main:  # a second signal during the clean-up must not cut it short
            for sig in STOP_SIGNALS:
                signal.signal(sig, signal.SIG_IGN)
        try:
            ended = end_descendants(before, grace_s)
            if ended:
                log.warning("benchmark: ended %d process(es) it had started: %s", len(ended), ended[:20])
        finally:
            _subreaper(was_subreaper)
            if main:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)


def stop_all(procs: list[subprocess.Popen[bytes]], timeout_s: float = 30.0) -> None:
    """SIGTERM every process a bench stack started, then wait for each; kill one that outlives
    `timeout_s`."""
    for proc in procs:
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
