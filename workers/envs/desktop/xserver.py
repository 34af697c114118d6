"""Boot an Xvfb display and the openbox window manager, with readiness detection and no fixed sleeps.

Both run inside the session's sandbox (the X server parses everything the session's clients send,
so it holds no more than they do). The session's X directory (mode 0700, owned by the session's
uid) holds `sockets/`, which the box sees as /tmp/.X11-unix, and the session's cookie file
(`xauth`): Xvfb admits only clients that show that cookie (`-auth`) and listens on that socket only
(no TCP, and no abstract socket, which any process of the network namespace could reach). The host
claims the display number with a lock file /tmp/.X<N>-lock (this process's pid, as Xvfb itself
writes) and points /tmp/.X11-unix/X<N> at the socket, so the host's own X clients (screenshots,
XTEST input, x11vnc) use DISPLAY=:N with their copy of the cookie; another account on the machine
can neither traverse the session's directory nor show the cookie.

Xvfb reports readiness itself: with `-displayfd FD` it writes the display number to FD once it
accepts connections. The window manager is ready when it has set `_NET_SUPPORTING_WM_CHECK` on the
root window; an app is ready when a window of its WM_CLASS is listed in `_NET_CLIENT_LIST`.
"""

from __future__ import annotations

import os
import select
import socket
import stat
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from Xlib import X
from Xlib.display import Display
from Xlib.error import ConnectionClosedError, DisplayError, XError

from workers.envs.base import EnvError
from workers.envs.desktop.procs import stop, wait_until
from workers.envs.desktop.wm import wm_argv
from workers.envs.desktop.xauth import (
    XAUTHORITY_INSIDE,
    host_cookie_add,
    host_cookie_remove,
    new_cookie,
    write_session_authority,
)

X11_DIR = Path("/tmp/.X11-unix")


class XServer:
    """One Xvfb + openbox pair. `display` is ':N' once `claim_display()` returned."""

    def __init__(
        self,
        width: int,
        height: int,
        display_range: tuple[int, int],
        log_dir: Path,
        x11_dir: Path,
        uid: int,
        glx: bool = False,
    ) -> None:
        """`x11_dir`: the session's X directory on the host, made here (0700, owned by `uid`, the
        session's); `glx`: load the GLX extension (Mesa's software renderer, about 90 ms of Xvfb's
        start)."""
        self._glx = glx
        self.width = width
        self.height = height
        self._range = display_range
        self._log_dir = log_dir
        self._uid = uid
        self.x11_dir = x11_dir
        self.socket_dir = x11_dir / "sockets"  # the box's /tmp/.X11-unix
        self.auth_file = x11_dir / "Xauthority"  # the box's XAUTHORITY_INSIDE
        self.number = -1
        self.xvfb: subprocess.Popen[bytes] | None = None
        self.wm: subprocess.Popen[bytes] | None = None
        self.conn: Display | None = None
        self._ready_fd = -1

    @property
    def display(self) -> str:
        return f":{self.number}"

    def claim_display(self) -> int:
        """Take the first free display number in range for this session (before its box starts) and
        give it a fresh cookie."""
        low, high = self._range
        _check_x11_dir()
        for path in (self.x11_dir, self.socket_dir):
            path.mkdir(mode=0o700, exist_ok=True)
            os.chown(path, self._uid, self._uid)
            path.chmod(0o700)
        for number in range(low, high):
            if _claim(number, self.socket_dir / f"X{number}"):
                self.number = number
                cookie = new_cookie()
                write_session_authority(self.auth_file, cookie, self._uid)
                host_cookie_add(number, cookie)
                return number
        raise EnvError(f"no free X display in :{low}..:{high - 1}")

    def spawn_xvfb(self, start: Callable[[list[str], Sequence[int]], subprocess.Popen[bytes]]) -> None:
        """Start Xvfb on the claimed display with `start(argv, pass_fds)` (in the session's box)."""
        read_fd, write_fd = os.pipe()
        argv = [
            "Xvfb",
            self.display,
            "-screen",
            "0",
            f"{self.width}x{self.height}x24",
            "-nolisten",
            "tcp",
            "-nolisten",
            "local",  # Linux's abstract socket: no file permissions guard it
            "-auth",
            XAUTHORITY_INSIDE,
            "-displayfd",
            str(write_fd),
            *([] if self._glx else ["-extension", "GLX"]),
        ]
        try:
            self.xvfb = start(argv, (write_fd,))
        except BaseException:
            os.close(read_fd)
            raise
        finally:
            os.close(write_fd)
        self._ready_fd = read_fd

    def wait_xvfb(self, timeout_s: float) -> None:
        """Wait until Xvfb accepts clients, then connect."""
        assert self.xvfb is not None and self._ready_fd >= 0
        try:
            number = _read_ready(self._ready_fd, self.xvfb, timeout_s)
        finally:
            os.close(self._ready_fd)
            self._ready_fd = -1
        if number != self.number:
            log = (
                (self._log_dir / "xvfb.log").read_text(errors="replace")[-400:]
                if (self._log_dir / "xvfb.log").exists()
                else ""
            )
            raise EnvError(f"Xvfb did not start on {self.display}: {log.strip() or 'no output'}")
        self.conn = Display(self.display)

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
        if self._ready_fd >= 0:
            os.close(self._ready_fd)
            self._ready_fd = -1
        if self.number >= 0:
            host_cookie_remove(self.number)
            _release(self.number)
            self.number = -1

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


def _check_x11_dir() -> None:
    """/tmp/.X11-unix, where the host's X clients look for :N, must be this account's: whoever owns
    it could swap our links for their own X server and read the screens and input we send."""
    X11_DIR.mkdir(mode=0o1777, exist_ok=True)
    info = os.lstat(X11_DIR)
    if info.st_uid != os.geteuid() or not stat.S_ISDIR(info.st_mode):
        raise EnvError(f"{X11_DIR} belongs to uid {info.st_uid}, not to this account; remove it")
    if info.st_mode & stat.S_IWOTH and not info.st_mode & stat.S_ISVTX:
        raise EnvError(f"{X11_DIR} is writable by everyone without the sticky bit (chmod 1777 it)")


def _claim(number: int, socket: Path) -> bool:
    """Claim display `number`: its lock file (created exclusively, with this process's pid) and the
    host's /tmp/.X11-unix/X<N> pointing at the socket the session's Xvfb will make."""
    if _display_taken(number):
        return False
    lock = _lock_path(number)
    try:
        fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444)
    except FileExistsError:
        return False  # another process got there first
    with os.fdopen(fd, "w") as f:
        f.write(f"{os.getpid():>10}\n")
    try:
        os.symlink(socket, X11_DIR / f"X{number}")
    except FileExistsError:
        lock.unlink(missing_ok=True)
        return False
    return True


def _release(number: int) -> None:
    (X11_DIR / f"X{number}").unlink(missing_ok=True)
    _lock_path(number).unlink(missing_ok=True)


def _lock_path(number: int) -> Path:
    return Path(f"/tmp/.X{number}-lock")


def _display_taken(number: int) -> bool:
    """True when display `number` is held: by a live process's lock file, or by a server that
    answers on its socket.

    A lock whose process is gone, and a socket (or our link to one) that refuses connections, are
    what a killed server or env host leaves behind: they are removed so the number can be used
    again."""
    lock = _lock_path(number)
    try:
        text = lock.read_text().strip()
    except FileNotFoundError:
        text = None
    except OSError:
        return True
    if text is not None:
        try:
            os.kill(int(text), 0)
            return True
        except ValueError:
            if time.time() - _mtime(lock) < 5:
                return True  # being written right now
        except ProcessLookupError:
            pass
        except PermissionError:
            return True
        lock.unlink(missing_ok=True)
    path = X11_DIR / f"X{number}"
    if not os.path.lexists(path):
        return False
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(1.0)
        try:
            sock.connect(str(path))
        except (ConnectionRefusedError, FileNotFoundError):
            path.unlink(missing_ok=True)
            return False
        except OSError:
            return True  # e.g. a timeout: something is there; leave it alone
    return True


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


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
