"""Boot an Xvfb display and the openbox window manager, with readiness detection and no fixed sleeps.

Xvfb reports readiness itself: with `-displayfd FD` it writes the display number to FD once it
accepts connections. The window manager is ready when it has set `_NET_SUPPORTING_WM_CHECK` on the
root window; an app is ready when a window of its WM_CLASS is listed in `_NET_CLIENT_LIST`.
"""

from __future__ import annotations

import os
import select
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from Xlib import X
from Xlib.display import Display
from Xlib.error import ConnectionClosedError, DisplayError, XError

from workers.envs.base import EnvError
from workers.envs.desktop.procs import spawn, stop, wait_until
from workers.envs.desktop.wm import wm_argv


class XServer:
    """One Xvfb + openbox pair. `display` is ':N' once `start()` returned."""

    def __init__(
        self, width: int, height: int, display_range: tuple[int, int], log_dir: Path, user: int | None = None
    ) -> None:
        """`user`: the uid Xvfb runs as (the session's sandbox uid: the X server that sandboxed
        clients talk to holds no root)."""
        self._user = user
        self.width = width
        self.height = height
        self._range = display_range
        self._log_dir = log_dir
        self.number = -1
        self.xvfb: subprocess.Popen[bytes] | None = None
        self.wm: subprocess.Popen[bytes] | None = None
        self.conn: Display | None = None

    @property
    def display(self) -> str:
        return f":{self.number}"

    def start_xvfb(self, timeout_s: float) -> None:
        """Start Xvfb on the first free display number in range and wait until it accepts clients."""
        low, high = self._range
        for number in range(low, high):
            if _display_taken(number):
                continue
            if self._try_xvfb(number, timeout_s):
                self.number = number
                self.conn = Display(self.display)
                return
        raise EnvError(f"no free X display in :{low}..:{high - 1}")

    def start_wm(self, start: Callable[[list[str]], subprocess.Popen[bytes]], timeout_s: float) -> None:
        """Start openbox with `start(argv)` (the desktop runs it in the session's sandbox)."""
        self.wm = start(wm_argv())
        wait_until(self._wm_ready, timeout_s, "openbox to manage the screen")

    def alive(self) -> bool:
        return self.xvfb is not None and self.xvfb.poll() is None

    def client_classes(self) -> list[str]:
        """WM_CLASS class names of the windows the window manager manages now."""
        conn = self._require_conn()
        root = conn.screen().root
        prop = root.get_full_property(conn.intern_atom("_NET_CLIENT_LIST"), X.AnyPropertyType)
        names: list[str] = []
        for wid in prop.value if prop is not None else []:
            try:
                wm_class = conn.create_resource_object("window", wid).get_wm_class()
            except XError:
                continue  # the window went away between the two requests
            if wm_class:
                names.extend(wm_class)
        return names

    def wait_for_window(self, wm_class: str, timeout_s: float) -> None:
        target = wm_class.lower()
        wait_until(
            lambda: any(target == name.lower() for name in self.client_classes()),
            timeout_s,
            f"a {wm_class} window",
            interval_s=0.02,
        )

    def stop(self) -> None:
        if self.conn is not None:
            try:
                self.conn.close()
            except (ConnectionClosedError, DisplayError, OSError, XError):
                pass  # the server may already be gone
            self.conn = None
        stop(self.wm)
        stop(self.xvfb)
        self.wm = self.xvfb = None

    def _try_xvfb(self, number: int, timeout_s: float) -> bool:
        read_fd, write_fd = os.pipe()
        argv = [
            "Xvfb",
            f":{number}",
            "-screen",
            "0",
            f"{self.width}x{self.height}x24",
            "-nolisten",
            "tcp",
            "-displayfd",
            str(write_fd),
        ]
        try:
            proc = spawn(argv, log=self._log_dir / "xvfb.log", pass_fds=[write_fd], user=self._user)
        finally:
            os.close(write_fd)
        try:
            if _read_ready(read_fd, proc, timeout_s) == number:
                self.xvfb = proc
                return True
        finally:
            os.close(read_fd)
        stop(proc)
        return False

    def _wm_ready(self) -> bool:
        conn = self._require_conn()
        prop = conn.screen().root.get_full_property(
            conn.intern_atom("_NET_SUPPORTING_WM_CHECK"), X.AnyPropertyType
        )
        return prop is not None and len(prop.value) > 0

    def _require_conn(self) -> Display:
        if self.conn is None:
            raise EnvError("X server not started")
        return self.conn


def _display_taken(number: int) -> bool:
    """True when a live X server holds display `number`.

    Lock files are not reliable here (they can be missing for live servers), and a SIGKILLed Xvfb
    leaves its socket behind; so the socket is probed: a refused connection means a stale file,
    which is removed so the number can be used again.
    """
    lock = Path(f"/tmp/.X{number}-lock")
    try:
        os.kill(int(lock.read_text().strip()), 0)
        return True
    except (OSError, ValueError):
        pass  # no lock, unreadable, or its process is gone
    path = Path(f"/tmp/.X11-unix/X{number}")
    if not path.exists():
        return False
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(1.0)
        try:
            sock.connect(str(path))
        except (ConnectionRefusedError, FileNotFoundError):
            path.unlink(missing_ok=True)
            lock.unlink(missing_ok=True)
            return False
        except OSError:
            return True  # e.g. a timeout: something is there; leave it alone
    return True


def _read_ready(fd: int, proc: subprocess.Popen[bytes], timeout_s: float) -> int:
    """The display number Xvfb writes to `fd` when ready, or -1 if it exits or times out."""
    deadline = time.monotonic() + timeout_s
    data = b""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.05)
        if ready:
            chunk = os.read(fd, 64)
            if not chunk:
                return -1  # Xvfb closed the pipe without a number: it failed (display in use, ...)
            data += chunk
            if data.endswith(b"\n"):
                return int(data.strip())
        elif proc.poll() is not None:
            return -1
    return -1
