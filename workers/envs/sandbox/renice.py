"""Lowering (or restoring) the CPU priority of a box's running processes: every thread's nice, and
the nice of their autogroup where the box leads a session of its own. Only root (or CAP_SYS_NICE)
may raise a priority again; the env host, which makes boxes, runs as root."""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)
PROC = Path("/proc")


def processes_of_uid(uid: int) -> list[int]:
    """Host pids of the processes whose real uid is `uid` (a box's uid is never shared)."""
    pids = []
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
        except OSError:
            continue  # exited meanwhile
        for line in status.splitlines():
            if line.startswith("Uid:"):
                if int(line.split()[1]) == uid:
                    pids.append(int(entry.name))
                break
    return pids


def renice(pids: list[int], nice: int) -> int:
    """Give every thread of `pids` the nice `nice` (Linux keeps a nice per thread: setpriority on a
    pid changes its main thread only), and the autogroup of each session other than ours the same
    (under autogroup scheduling the CPU is split between sessions first). Returns how many processes
    were changed; processes that exit meanwhile are skipped."""
    ours = os.getsid(0)
    sessions: set[int] = set()
    done = 0
    for pid in pids:
        try:
            threads = [int(t.name) for t in (PROC / str(pid) / "task").iterdir()]
            for tid in threads:
                with contextlib.suppress(ProcessLookupError):
                    os.setpriority(os.PRIO_PROCESS, tid, nice)
            sid = os.getsid(pid)
        except (ProcessLookupError, FileNotFoundError):
            continue
        done += 1
        if sid != ours and sid not in sessions:
            sessions.add(sid)
            try:
                (PROC / str(pid) / "autogroup").write_text(str(nice))
            except OSError as exc:  # no autogroup scheduling here, or the process is gone
                log.debug("autogroup of %s not set: %s", pid, exc)
    return done
