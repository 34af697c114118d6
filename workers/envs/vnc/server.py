"""One x11vnc per desktop session, on a unix socket only the host can reach; browsers reach it only
through the token proxy."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

from workers.envs.base import EnvError
from workers.envs.desktop.procs import spawn, stop, wait_until

# x11vnc runs as the session's uid: none of the env host's environment (the platform's passwords, its
# SECRET_KEY) goes with it, where a compromised x11vnc or anything of that uid could read it.
X11VNC_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}


@dataclass(frozen=True)
class VncTarget:
    """Where the proxy connects for a session: a unix socket path (x11vnc's), or host:port for a
    VNC server elsewhere (a test double, a remote VM)."""

    host: str = ""
    port: int = 0
    socket: str = ""


class X11Vnc:
    """`x11vnc -display :N -rfbport 0 -unixsock PATH -forever -shared -nopw`.

    No TCP port at all: the socket lies in a host directory (mode 0700) that no sandbox mounts, so
    only host processes — the token proxy — can connect. Read-only
    viewing is enforced by the proxy (per token), so one server serves both kinds.
    """

    def __init__(
        self,
        display: str,
        socket_dir: Path,
        log_dir: Path,
        user: int | None = None,
        ipc_of: int | None = None,
    ) -> None:
        """`user`: the uid x11vnc runs as — the session's; `ipc_of`: the pid of a process whose IPC
        namespace x11vnc joins (the session box's, where its Xvfb runs: MIT-SHM segments are shared
        between the two; nothing else of the box). Its socket lies in a directory of its own inside
        `socket_dir`."""
        self._display = display
        self._user = user
        self._ipc_of = ipc_of
        socket_dir.mkdir(mode=0o711, parents=True, exist_ok=True)
        self._dir = socket_dir / f"x11vnc-{display.lstrip(':')}"  # displays are unique per host
        self._socket = self._dir / "vnc.sock"
        self._log = log_dir / "x11vnc.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.target: VncTarget | None = None

    def start(self, timeout_s: float) -> VncTarget:
        """Start x11vnc and wait until its socket accepts connections."""
        self.spawn()
        return self.wait_ready(timeout_s)

    def spawn(self) -> None:
        """Start x11vnc without waiting (a desktop boots its window manager meanwhile)."""
        self._socket.unlink(missing_ok=True)
        self._dir.mkdir(mode=0o700, exist_ok=True)
        if self._user is not None:
            os.chown(self._dir, self._user, self._user)
        if self._ipc_of is None:
            self.proc = spawn(self._argv(), env=X11VNC_ENV, log=self._log, user=self._user)
            return
        # nsenter needs root to join the box's IPC namespace; setpriv then drops to the session's uid.
        drop = (
            [] if self._user is None else [f"--reuid={self._user}", f"--regid={self._user}", "--clear-groups"]
        )
        argv = ["nsenter", f"--ipc=/proc/{self._ipc_of}/ns/ipc", "--", "setpriv", *drop, "--", *self._argv()]
        self.proc = spawn(argv, env=X11VNC_ENV, log=self._log)

    def wait_ready(self, timeout_s: float) -> VncTarget:
        try:
            wait_until(self._ready, timeout_s, f"x11vnc on {self._socket}", 0.02)
        except EnvError:
            stop(self.proc)
            self.proc = None
            raise EnvError(f"x11vnc did not start for {self._display}; see {self._log}") from None
        self.target = VncTarget(socket=str(self._socket))
        return self.target

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        stop(self.proc)
        self.proc = None
        self.target = None
        self._socket.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            self._dir.rmdir()

    def _ready(self) -> bool:
        if self.proc is None or self.proc.poll() is not None:
            raise EnvError(f"x11vnc exited early; see {self._log}")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            try:
                sock.connect(str(self._socket))
            except OSError:
                return False
        return True

    def _argv(self) -> list[str]:
        return [
            "x11vnc",
            "-display",
            self._display,
            "-rfbport",
            "0",
            # libvncserver's rfbGetScreen sets ipv6port = 5900 and rfbInitSockets listens on [::] there
            # whenever ipv6port > 0, whatever the IPv4 port; -noipv6 only governs x11vnc's own
            # sockets, so only -rfbportv6 -1 turns that listener off. (It looked intermittent because
            # the bind fails quietly once another x11vnc on the host holds [::]:5900.)
            "-noipv6",
            "-rfbportv6",
            "-1",
            "-unixsock",
            str(self._socket),
            "-forever",
            "-shared",
            "-nopw",
            "-quiet",
            # Xvfb has no DPMS/XKB bells; skip the probes that only add boot time and log noise.
            "-nodpms",
            "-nobell",
        ]
