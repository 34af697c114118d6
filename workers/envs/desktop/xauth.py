"""X authorization cookies: every session's X server admits only clients that show its cookie.

Each display gets a random MIT-MAGIC-COOKIE-1 at claim time. The session's own copy (a 0600 file
owned by the session's uid, in its 0700 X directory) is what Xvfb reads with `-auth`, x11vnc with
`-auth`, and the box's processes through XAUTHORITY; the host's own X clients in this process
(python-xlib, mss, and the tools it starts) read one host file, 0600 root in a 0700 directory, with
the cookie of every display this process runs (python-xlib reads only $XAUTHORITY, so it is set for
the process). The file format is Xau's: per entry family, address, display number, name, data.
"""

from __future__ import annotations

import atexit
import os
import secrets
import shutil
import socket
import struct
import tempfile
import threading
from pathlib import Path

FAMILY_LOCAL = 256
FAMILY_WILD = 65535
COOKIE_NAME = b"MIT-MAGIC-COOKIE-1"
# Where a session's box finds its cookie (its XAUTHORITY); a read-only bind of the session's file.
XAUTHORITY_INSIDE = "/run/user/1000/Xauthority"
INSIDE_HOSTNAME = b"session"  # the box's hostname (its own UTS namespace)

_lock = threading.Lock()
_host_cookies: dict[int, bytes] = {}
_host_file: Path | None = None


def new_cookie() -> bytes:
    return secrets.token_bytes(16)


def authority_bytes(entries: list[tuple[int, bytes, bytes, bytes]]) -> bytes:
    """An Xauthority file of (family, address, display number, cookie) MIT-MAGIC-COOKIE-1 entries."""
    out = b""
    for family, address, number, cookie in entries:
        out += struct.pack(">H", family)
        for field in (address, number, COOKIE_NAME, cookie):
            out += struct.pack(">H", len(field)) + field
    return out


def write_session_authority(path: Path, cookie: bytes, uid: int) -> None:
    """The session's cookie file, readable by the session's uid only. It matches any display
    number and host name (clients in the box, python-xlib ones included, and x11vnc on the host)."""
    data = authority_bytes([(FAMILY_LOCAL, INSIDE_HOSTNAME, b"", cookie), (FAMILY_WILD, b"", b"", cookie)])
    _write_private(path, data, uid)


def host_cookie_add(number: int, cookie: bytes) -> Path:
    """Let this process's own X clients use display `number`: its cookie in the host file, which
    $XAUTHORITY names from now on. Returns the file."""
    global _host_file
    with _lock:
        if _host_file is None:
            directory = tempfile.mkdtemp(prefix="flywheel-xauth-")  # 0700
            atexit.register(shutil.rmtree, directory, True)
            _host_file = Path(directory) / "Xauthority"
        _host_cookies[number] = cookie
        _write_host_file(_host_file)
        os.environ["XAUTHORITY"] = str(_host_file)
        return _host_file


def host_cookie_remove(number: int) -> None:
    with _lock:
        if _host_cookies.pop(number, None) is not None and _host_file is not None:
            _write_host_file(_host_file)


def _write_host_file(path: Path) -> None:
    host = socket.gethostname().encode()
    entries = [(FAMILY_LOCAL, host, str(n).encode(), c) for n, c in sorted(_host_cookies.items())]
    _write_private(path, authority_bytes(entries), os.geteuid())


def _write_private(path: Path, data: bytes, uid: int) -> None:
    """Write `data` to `path` atomically (a reader sees the old or the new file), mode 0600, owned by `uid`."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, data)
        os.fchown(fd, uid, uid)
    finally:
        os.close(fd)
    os.replace(tmp, path)
