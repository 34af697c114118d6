"""Start host processes that die with this process, whichever thread starts them.

PR_SET_PDEATHSIG (and bwrap's --die-with-parent, which uses it) fires when the *thread* that forked
the child exits, not the process; env hosts boot environments on pool threads that come and go.
So every such child is forked by one daemon thread that lives as long as the process.
"""

from __future__ import annotations

import ctypes
import signal
import subprocess
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

_PR_SET_PDEATHSIG = 1


class _Spawner:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._jobs: list[tuple[Future[subprocess.Popen[bytes]], dict[str, Any]]] = []
        self._thread: threading.Thread | None = None

    def popen(self, kwargs: dict[str, Any]) -> subprocess.Popen[bytes]:
        future: Future[subprocess.Popen[bytes]] = Future()
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="sandbox-spawner", daemon=True)
                self._thread.start()
            self._jobs.append((future, kwargs))
            self._wake.notify()
        return future.result()

    def _loop(self) -> None:
        while True:
            with self._lock:
                while not self._jobs:
                    self._wake.wait()
                future, kwargs = self._jobs.pop(0)
            try:
                future.set_result(subprocess.Popen(**kwargs))
            except BaseException as exc:
                future.set_exception(exc)


_SPAWNER = _Spawner()


def popen_tied(
    argv: list[str], *, preexec_fn: Callable[[], None] | None = None, **kwargs: Any
) -> subprocess.Popen[bytes]:
    """`subprocess.Popen(argv, **kwargs)` whose child gets SIGKILL when this process dies."""

    def preexec() -> None:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if preexec_fn is not None:
            preexec_fn()

    return _SPAWNER.popen({"args": argv, "preexec_fn": preexec, **kwargs})
