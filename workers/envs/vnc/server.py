"""One x11vnc per desktop session, bound to localhost; browsers reach it only through the proxy."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from workers.envs.base import EnvError
from workers.envs.desktop.procs import free_port, port_open, spawn, stop, wait_until


@dataclass(frozen=True)
class VncTarget:
    """Where the proxy connects for a session."""

    host: str
    port: int


class X11Vnc:
    """`x11vnc -display :N -localhost -forever -shared -nopw -rfbport P`.

    Read-only viewing is enforced by the proxy (per token), so one server serves both kinds.
    """

    def __init__(self, display: str, port_range: tuple[int, int], log_dir: Path) -> None:
        self._display = display
        self._range = port_range
        self._log = log_dir / "x11vnc.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.target: VncTarget | None = None

    def start(self, timeout_s: float, attempts: int = 3) -> VncTarget:
        """Start x11vnc on a free port and wait until it accepts TCP connections."""
        for _ in range(attempts):
            port = free_port(*self._range)
            self.proc = spawn(self._argv(port), log=self._log)
            try:
                wait_until(partial(self._ready, port), timeout_s, f"x11vnc on port {port}", 0.02)
            except EnvError:
                stop(self.proc)
                self.proc = None
                continue  # most likely another session took the port first
            self.target = VncTarget("127.0.0.1", port)
            return self.target
        raise EnvError(f"x11vnc did not start for {self._display}; see {self._log}")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        stop(self.proc)
        self.proc = None
        self.target = None

    def _ready(self, port: int) -> bool:
        if self.proc is None or self.proc.poll() is not None:
            raise EnvError(f"x11vnc exited early; see {self._log}")
        return port_open("127.0.0.1", port)

    def _argv(self, port: int) -> list[str]:
        return [
            "x11vnc",
            "-display",
            self._display,
            "-localhost",
            "-forever",
            "-shared",
            "-nopw",
            "-rfbport",
            str(port),
            "-quiet",
            # Xvfb has no DPMS/XKB bells; skip the probes that only add boot time and log noise.
            "-nodpms",
            "-nobell",
        ]
