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


def default_socket_root() -> Path:
    """Where every session's x11vnc socket lies, in a directory of its own (`X11Vnc`), and the only
    place the token proxy connects to: FLYWHEEL_VNC_SOCKET_DIR (a volume shared with the proxy's
    container), else /run/flywheel-vnc (/tmp/flywheel-vnc where /run is not writable)."""
    if path := os.environ.get("FLYWHEEL_VNC_SOCKET_DIR"):
        return Path(path)
    return Path("/run/flywheel-vnc") if os.access("/run", os.W_OK) else Path("/tmp/flywheel-vnc")


def ensure_socket_root(root: Path) -> Path:
    """Make the socket root (mode 0711: others may traverse to their own socket directory, not list
    or write it) and check that only this account can change it; returns its resolved path."""
    try:
        root.mkdir(parents=True)
        root.chmod(0o711)  # whatever the umask (`make up` runs with 027): others must traverse it
    except FileExistsError:
        pass
    info = os.lstat(root)
    if not os.path.isdir(root) or os.path.islink(root):
        raise EnvError(f"VNC socket root {root} is not a directory")
    if info.st_uid != os.geteuid() or info.st_mode & 0o022:
        raise EnvError(
            f"VNC socket root {root} must belong to uid {os.geteuid()} and not be writable by others "
            f"(owner {info.st_uid}, mode {info.st_mode & 0o7777:o})"
        )
    return root.resolve()


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
        socket_root: Path,
        log_dir: Path,
        user: int | None = None,
        ipc_of: int | None = None,
        auth: Path | None = None,
    ) -> None:
        """`user`: the uid x11vnc runs as — the session's; `ipc_of`: the pid of a process whose IPC
        namespace x11vnc joins (the session box's, where its Xvfb runs: MIT-SHM segments are shared
        between the two; nothing else of the box). Its socket lies in a directory of its own inside
        `socket_root` (`ensure_socket_root`); `auth`: the X server's cookie file (readable by `user`)."""
        self._display = display
        self._auth = auth
        self._user = user
        self._ipc_of = ipc_of
        self._dir = (
            ensure_socket_root(socket_root) / f"x11vnc-{display.lstrip(':')}"
        )  # displays are unique per host
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
            *(["-auth", str(self._auth)] if self._auth is not None else []),
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
