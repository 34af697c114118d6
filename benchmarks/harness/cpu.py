"""Where a benchmark window's CPU time went: the machine's, and its own process tree's by role.

A rollout benchmark on one machine shares its cores between the environments, the policy server and
the trainer. Asynchronous rollout can only beat the synchronous recipe by the environment time the
latter leaves idle; when every part of an episode is CPU work on the same cores, idle environment
time is not idle CPU, and the ratio is bounded by how much of the machine the synchronous mode left
unused. `CpuWindow` measures that: the machine's busy fraction over a window (`psutil.cpu_times`,
all cores), and the CPU seconds each process under a root process spent inside the window, summed
by role. Processes that start or end inside the window are sampled every `every_s` (a process's
last sample before it ends is what it is credited with; at most `every_s` of its time is missed).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import psutil

Key = tuple[int, float]  # (pid, create_time): a pid is reused, the pair is not


def _busy_total(times: Any) -> tuple[float, float]:
    idle = times.idle + getattr(times, "iowait", 0.0)
    total = sum(times)  # guest time is already in user on Linux; counting it twice is < 0.1 % here
    total -= getattr(times, "guest", 0.0) + getattr(times, "guest_nice", 0.0)
    return total - idle, total


class CpuWindow:
    """Start, then `stop()` for the figures. `role(process)` names a process's role from its command
    line (None: ask its parent); processes whose chain names none count as "other"."""

    def __init__(
        self,
        root_pid: int,
        role: Callable[[list[str]], str | None],
        every_s: float = 1.0,
        services: tuple[str, ...] = (),
    ):
        """`services`: names of processes outside the tree whose CPU is reported apart as
        `services_cores` (PostgreSQL, Redis: shared with whatever else on the machine uses them)."""
        self._root, self._role, self._every, self._services = root_pid, role, every_s, services
        self._first: dict[Key, float] = {}  # CPU seconds when first seen inside the window
        self._last: dict[Key, float] = {}
        self._roles: dict[Key, str] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._machine0: tuple[float, float] = (0.0, 0.0)
        self._started_at = 0.0

    def _sample(self, first: bool) -> None:
        try:
            processes = [psutil.Process(self._root), *psutil.Process(self._root).children(recursive=True)]
        except psutil.Error:
            return
        if self._services:
            mine = {p.pid for p in processes}
            processes += [p for p in psutil.process_iter(["name"])
                          if p.info["name"] in self._services and p.pid not in mine]  # fmt: skip
        for process in processes:
            try:
                with process.oneshot():
                    key = (process.pid, process.create_time())
                    times = process.cpu_times()
                    spent = times.user + times.system
                    if key not in self._roles:
                        in_services = process.name() in self._services and process.pid != self._root
                        self._roles[key] = "services" if in_services else self._role_of(process)
            except psutil.Error:
                continue
            if key not in self._first:
                # A process born inside the window spent all its time inside it.
                self._first[key] = spent if first else 0.0
            self._last[key] = spent

    def _role_of(self, process: psutil.Process) -> str:
        chain: psutil.Process | None = process
        while chain is not None:
            try:
                name = self._role(chain.cmdline())
                if name is not None:
                    return name
                chain = chain.parent()
            except psutil.Error:
                return "other"
        return "other"

    def _run(self) -> None:
        while not self._stop.wait(self._every):
            self._sample(first=False)

    def start(self) -> None:
        self._started_at = time.monotonic()
        self._machine0 = _busy_total(psutil.cpu_times())
        self._sample(first=True)
        self._thread = threading.Thread(target=self._run, name="cpu-window", daemon=True)
        self._thread.start()

    def stop(self) -> dict[str, Any]:
        """The window's figures: wall seconds, the machine's cores and busy fraction, and per role the
        cores used on average (CPU seconds ÷ wall seconds); `services_cores` the named services',
        `other_cores` what the rest of the machine used."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._sample(first=False)
        wall = time.monotonic() - self._started_at
        busy1, total1 = _busy_total(psutil.cpu_times())
        busy = busy1 - self._machine0[0]
        total = total1 - self._machine0[1]
        cores = psutil.cpu_count() or 1
        by_role: dict[str, float] = {}
        for key, last in self._last.items():
            role = self._roles[key]
            by_role[role] = by_role.get(role, 0.0) + max(0.0, last - self._first[key])
        services = by_role.pop("services", 0.0)
        own = sum(by_role.values())
        machine_cores_used = busy / total * cores if total > 0 else 0.0
        return {
            "wall_s": round(wall, 1),
            "cores": cores,
            "machine_busy_frac": round(busy / total, 3) if total > 0 else None,
            "own_cores": round(own / wall, 3) if wall > 0 else None,
            "own_cores_by_role": {k: round(v / wall, 3) for k, v in sorted(by_role.items())}
            if wall > 0
            else {},
            "services_cores": round(services / wall, 3) if wall > 0 else None,
            "other_cores": round(max(0.0, machine_cores_used - (own + services) / wall), 3)
            if wall > 0
            else None,
        }


def cpu_ceiling(sync_own_cores: float | None, cores: int) -> float | None:
    """The most async ÷ sync can be when every action costs the same CPU in both modes: async mode
    can at best use every core at sync mode's CPU cost per usable action, so its rate is at most
    cores ÷ (the cores sync mode used) times sync's."""
    if not sync_own_cores:
        return None
    return round(cores / sync_own_cores, 3)
