"""A local static HTTP server for task pages (MiniWoB++ html, games, mobile web tasks).

Some MiniWoB++ tasks refuse `file://` (XHR for data files, same-origin checks), so every page-based
environment loads its pages over http from 127.0.0.1. One server per process serves several folders,
each under its own URL prefix ("mount"): `/wob/miniwob/click-test.html`, `/games/2048.html`, ...
The server binds port 0 (OS-assigned) and runs in a daemon thread; it is started lazily on first use.
"""

from __future__ import annotations

import functools
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from workers.envs.base import EnvError


class _MountHandler(SimpleHTTPRequestHandler):
    """Maps `/<mount>/<rest>` to `<folder>/<rest>`; anything outside a mount is a 404."""

    def __init__(self, *args: Any, mounts: dict[str, Path], **kwargs: Any) -> None:
        self._mounts = mounts
        super().__init__(*args, **kwargs)

    def translate_path(self, path: str) -> str:
        parts = unquote(urlsplit(path).path).lstrip("/").split("/", 1)
        root = self._mounts.get(parts[0])
        if root is None:
            return str(Path("/nonexistent-mount") / parts[0])
        target = (root / (parts[1] if len(parts) > 1 else "")).resolve()
        # Refuse `..` escapes out of the mounted folder.
        if target != root and root not in target.parents:
            return str(Path("/nonexistent-mount"))
        return str(target)

    def end_headers(self) -> None:
        # Task pages change while developing; never let Chromium serve a stale copy.
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        """Silence per-request logging (hundreds of requests per episode batch)."""


class StaticServer:
    """A ThreadingHTTPServer on 127.0.0.1:0 serving named folders. Thread-safe `mount`."""

    def __init__(self) -> None:
        self._mounts: dict[str, Path] = {}
        handler = functools.partial(_MountHandler, mounts=self._mounts)
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="task-http", daemon=True)
        self._thread.start()
        self._lock = threading.Lock()

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    def mount(self, name: str, folder: Path) -> str:
        """Serve `folder` under `/<name>/`; returns the base URL (with trailing slash)."""
        folder = folder.resolve()
        if not folder.is_dir():
            raise EnvError(f"cannot serve {folder}: not a directory")
        if not name or "/" in name:
            raise EnvError(f"bad mount name {name!r}")
        with self._lock:
            existing = self._mounts.get(name)
            if existing is not None and existing != folder:
                raise EnvError(f"mount {name!r} already serves {existing}, not {folder}")
            self._mounts[name] = folder
        return self.url(name)

    def file_for(self, url: str) -> Path | None:
        """The file a URL of this server names (None: not ours, outside every mount, or missing).
        Sandboxed browsers have no network: their requests for these URLs are answered from it."""
        parts = urlsplit(url)
        if parts.hostname != "127.0.0.1" or parts.port != self.port:
            return None
        name, _, rest = unquote(parts.path).lstrip("/").partition("/")
        with self._lock:
            root = self._mounts.get(name)
        if root is None:
            return None
        target = (root / rest).resolve()
        if (target != root and root not in target.parents) or not target.is_file():
            return None
        return target

    def url(self, name: str, path: str = "") -> str:
        return f"http://127.0.0.1:{self.port}/{name}/{path}"

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


_server: StaticServer | None = None
_server_lock = threading.Lock()


def get_server() -> StaticServer:
    """The process-wide server, started on first call."""
    global _server
    with _server_lock:
        if _server is None:
            _server = StaticServer()
        return _server
