"""Is a box's software waiting for input? Its processes' scheduler states, read from /proc.

A thread with work to do is runnable (R) or in uninterruptible I/O (D) until it has done it, however
long a loaded host makes it wait for a CPU; one that waits for input, a timer or another process
sleeps (S). So "every thread of the box sleeps" is an event the box's software reaches once it has
done what it was asked (an application started, loaded its document, drew its window), at any load
— unlike "nothing was drawn for a while", which a starved application also satisfies. Timers wake
idle applications now and then, so the test allows a few busy samples in a window of them.
"""

from __future__ import annotations

import os
import time
from collections import deque
from dataclasses import dataclass

BUSY_STATES = frozenset("RD")


def box_pids(init_pid: int) -> list[int]:
    """The host pids of the processes in the pid namespace of the box whose init is `init_pid`
    (what its init started and what `Sandbox.run`/`spawn` entered with nsenter, whose parents are
    outside the box). Empty when the box is gone."""
    try:
        namespace = os.readlink(f"/proc/{init_pid}/ns/pid")
    except OSError:
        return []
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            if os.readlink(f"/proc/{name}/ns/pid") == namespace:
                out.append(int(name))
        except OSError:
            continue  # gone while listing, or not ours to read
    return out


def busy_threads(init_pid: int) -> list[str]:
    """The box's threads that are runnable or in I/O now, as 'comm/tid state' (empty: all sleep)."""
    busy: list[str] = []
    for pid in box_pids(init_pid):
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/stat", "rb") as fh:
                    stat = fh.read()
            except OSError:
                continue
            close = stat.rfind(b")")
            state = stat[close + 2 : close + 3].decode()
            if state in BUSY_STATES:
                comm = stat[stat.find(b"(") + 1 : close].decode(errors="replace")
                busy.append(f"{comm}/{tid} {state}")
    return busy


@dataclass(frozen=True)
class Quiescence:
    reached: bool
    waited_s: float
    busy: tuple[str, ...] = ()  # the last busy sample's threads (when not reached)


def wait_quiescent(
    init_pid: int,
    *,
    window: int = 10,
    allowed_busy: int = 2,
    interval_s: float = 0.1,
    max_s: float = 60.0,
) -> Quiescence:
    """Until, of the last `window` samples (`interval_s` apart), at most `allowed_busy` saw a busy
    thread in the box (at most `max_s`)."""
    start = time.monotonic()
    samples: deque[bool] = deque(maxlen=window)
    last_busy: list[str] = []
    while True:
        busy = busy_threads(init_pid)
        # this process's own sampling is not the box's work; a box that is gone is quiet
        samples.append(bool(busy))
        if busy:
            last_busy = busy
        waited = time.monotonic() - start
        if len(samples) == window and sum(samples) <= allowed_busy:
            return Quiescence(True, waited)
        if waited >= max_s:
            return Quiescence(False, waited, tuple(last_busy[:8]))
        time.sleep(interval_s)
