"""One Chromium process hosting many isolated pages, shared by the sessions of a worker process.

Thread model
------------
Playwright objects are bound to the event loop (async API) or thread (sync API) that created them.
A `BrowserPool` therefore owns a private asyncio loop running in a daemon thread ("browser-pool");
every Playwright call happens there. Callers on any thread (a Celery worker's pool threads, the
env manager, a benchmark's threads) use `SessionHandle.call(fn)`, which submits `fn(page_session)`
to the loop with `asyncio.run_coroutine_threadsafe` and blocks for the result. Because the loop is
asynchronous, calls for different sessions overlap (Chromium renders pages in parallel) even though
one thread drives them; calls for the same session run in submission order per caller.

Isolation and lifecycle
-----------------------
Chromium runs in the pool's sandbox (`workers.envs.sandbox`: its own unprivileged uid, no host
files, no network) — one box per pool, i.e. per env-host process — with its own renderer sandbox on
inside it (namespaces and seccomp-BPF per renderer), so the sessions' renderers, which share the
box's uid, cannot reach one another. Pages reach the local task
pages only: requests for the static server's URLs are answered from its folders by Playwright
(`context.route`), and nothing else has a network to go to. Each session gets its own
`BrowserContext` (cookies, storage, viewport, device emulation) and one page. Sessions end by `close_session`, by idle reclamation (no call for `idle_timeout_s`), or by a
crash. Crash detection: the browser's `disconnected` event, each page's `crash` event, and a liveness
probe every `probe_interval_s` (is the Chromium main pid alive and the connection up?). A crash marks
the affected sessions; their next call raises `EnvCrashed`. The next `open_session` relaunches
Chromium, so new sessions work again.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import mimetypes
import os
import secrets
import shutil
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from playwright.async_api import (
    Browser,
    BrowserContext,
    CDPSession,
    Page,
    Playwright,
    Route,
    async_playwright,
)
from playwright.async_api import Error as PlaywrightError

from workers.envs.base import Element, EnvCrashed, EnvError, ImageFormat
from workers.envs.browser.dom import ELEMENTS_JS, elements_from_js
from workers.envs.browser.server import get_server

T = TypeVar("T")

CHROMIUM = "/usr/bin/chromium"
# No --no-sandbox: inside our box Chromium's own sandbox works (a user and pid namespace per
# renderer and seccomp-BPF), so a page that compromises its renderer cannot reach the other
# sessions' renderers that share this browser (Playwright adds --no-sandbox only when the pool runs
# unboxed, i.e. as root).
CHROMIUM_ARGS = (
    "--headless",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
)


_SCREENSHOT_TRIES = 5


class SessionReclaimed(EnvError):
    """The session was closed (idle reclamation or `close_session`); open a new one."""


@dataclass
class PageSession:
    """A session's Playwright objects. Only touched on the pool's loop thread."""

    session_id: str
    generation: int
    context: BrowserContext
    page: Page
    cdp: CDPSession
    viewport: tuple[int, int]
    last_used: float = field(default_factory=time.monotonic)
    crashed: str | None = None  # why, once crashed
    closed: bool = False

    async def screenshot(self, image_format: ImageFormat = "jpeg", quality: int = 80) -> bytes:
        """The viewport as encoded bytes via CDP `Page.captureScreenshot` (no Playwright overhead)."""
        params: dict[str, Any] = {"format": image_format, "optimizeForSpeed": True}
        if image_format == "jpeg":
            params["quality"] = quality
        for attempt in range(_SCREENSHOT_TRIES):
            try:
                result = await self.cdp.send("Page.captureScreenshot", params)
                return base64.b64decode(result["data"])
            except PlaywrightError as exc:
                # A page that has not produced its first compositor frame yet (a fresh tab while
                # other tabs render on a busy machine) answers this; it passes within a frame or two.
                if "Unable to capture screenshot" not in str(exc) or attempt == _SCREENSHOT_TRIES - 1:
                    raise
                await asyncio.sleep(0.05 * (attempt + 1))
        raise AssertionError("unreachable")

    async def elements(self, limit: int = 200) -> tuple[Element, ...]:
        """Visible interactive/text elements in page pixels (see `dom.ELEMENTS_JS`)."""
        return elements_from_js(await self.page.evaluate(ELEMENTS_JS, limit))


class SessionHandle:
    """A caller-side reference to one pooled session; safe to use from any thread."""

    def __init__(self, pool: BrowserPool, session_id: str) -> None:
        self.pool = pool
        self.session_id = session_id

    def call(self, fn: Callable[[PageSession], Awaitable[T]], timeout: float = 30.0) -> T:
        """Run `fn(session)` on the pool loop and return its result.

        Raises `EnvCrashed` if the browser or page died (before or during the call) and
        `SessionReclaimed` if the session was closed.
        """
        return self.pool._call_session(self.session_id, fn, timeout)

    def alive(self) -> bool:
        return self.pool.session_state(self.session_id) == "alive"

    def close(self) -> None:
        self.pool.close_session(self.session_id)


class BrowserPool:
    """A Chromium process with one BrowserContext + page per session; see the module docstring."""

    def __init__(
        self,
        *,
        idle_timeout_s: float = 600.0,
        probe_interval_s: float = 1.0,
        executable: str = CHROMIUM,
        extra_args: tuple[str, ...] = (),
        sandboxed: bool = True,
    ) -> None:
        """`sandboxed`: run Chromium in a sandbox (needs `sandbox_available()`; tests of the pool
        mechanics may turn it off)."""
        if idle_timeout_s <= 0 or probe_interval_s <= 0:
            raise ValueError("idle_timeout_s and probe_interval_s must be positive")
        if not Path(executable).exists():
            raise EnvError(f"Chromium not found at {executable}")
        self.idle_timeout_s = idle_timeout_s
        self.probe_interval_s = probe_interval_s
        self.executable = executable
        self.extra_args = extra_args
        self.launches = 0
        self.sandboxed = sandboxed
        self._box: Any = None
        self._box_dir: Path | None = None
        self.reclaimed: list[str] = []  # session ids reclaimed for idleness, oldest first
        self._playwright: Playwright | None = None
        self._browser: Browser | None = None
        self._browser_pid: int | None = None
        self._generation = 0
        self._sessions: dict[str, PageSession] = {}
        self._ended: dict[str, str] = {}  # session id -> "closed" | "reclaimed" | crash reason
        self._closed = False
        # One launch at a time: sessions opened together on a pool with no running Chromium each
        # found none and launched their own (dropping the others' as crashed) and raced on the box.
        self._launch_lock = asyncio.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="browser-pool", daemon=True)
        self._thread.start()
        self._submit(self._start_housekeeping(), 10.0)

    # ---- caller-side API (any thread) -------------------------------------------------------

    def open_session(
        self,
        session_id: str | None = None,
        *,
        viewport: tuple[int, int] = (1280, 800),
        context_options: dict[str, Any] | None = None,
        timeout: float = 60.0,
    ) -> SessionHandle:
        """A new isolated page; relaunches Chromium first if it is not running.

        `context_options` are passed to `Browser.new_context` (e.g. a Playwright device descriptor);
        `viewport` wins over any viewport in them.
        """
        sid = session_id or secrets.token_hex(8)
        self._submit(self._open(sid, viewport, dict(context_options or {})), timeout)
        return SessionHandle(self, sid)

    def close_session(self, session_id: str) -> None:
        if not self._closed:
            self._submit(self._close_session(session_id, "closed"), 30.0)

    def session_ids(self) -> list[str]:
        """Sessions currently open and not crashed."""
        return [s.session_id for s in list(self._sessions.values()) if s.crashed is None]

    def session_state(self, session_id: str) -> str:
        """ "alive", "crashed", "reclaimed", "closed" or "unknown"."""
        session = self._sessions.get(session_id)
        if session is not None:
            return "alive" if session.crashed is None else "crashed"
        ended = self._ended.get(session_id, "unknown")
        return ended if ended in ("reclaimed", "closed", "unknown") else "crashed"

    def browser_pid(self) -> int | None:
        """The Chromium main process id (None before the first launch or after a crash)."""
        return self._browser_pid

    def is_alive(self) -> bool:
        """True if Chromium runs and its connection is up (the liveness probe's test)."""
        browser, pid = self._browser, self._browser_pid
        return browser is not None and browser.is_connected() and pid is not None and _pid_alive(pid)

    def close(self) -> None:
        """Close every session and Chromium, then stop the loop thread. Idempotent."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(Exception):
            self._submit(self._shutdown(), 30.0)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    def __enter__(self) -> BrowserPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- loop-side implementation ----------------------------------------------------------

    def _submit(self, coro: Awaitable[T], timeout: float) -> T:
        if self._closed and not self._thread.is_alive():
            raise EnvError("browser pool is closed")
        future: Future[T] = asyncio.run_coroutine_threadsafe(coro, self._loop)  # type: ignore[arg-type]
        try:
            return future.result(timeout)
        except FutureTimeout as exc:
            future.cancel()
            raise EnvError(f"browser call timed out after {timeout:.0f} s") from exc

    def _call_session(self, sid: str, fn: Callable[[PageSession], Awaitable[T]], timeout: float) -> T:
        return self._submit(self._run_on(sid, fn), timeout)

    async def _run_on(self, sid: str, fn: Callable[[PageSession], Awaitable[T]]) -> T:
        session = self._live_session(sid)
        session.last_used = time.monotonic()
        try:
            return await fn(session)
        except PlaywrightError as exc:
            # A call that fails because the target vanished is a crash, not a bad action.
            self._probe_once()
            if session.crashed is not None or session.closed:
                raise EnvCrashed(f"session {sid}: {session.crashed or 'closed'} ({exc.message})") from exc
            raise EnvError(f"session {sid}: {exc.message}") from exc
        finally:
            session.last_used = time.monotonic()

    def _live_session(self, sid: str) -> PageSession:
        session = self._sessions.get(sid)
        if session is None:
            ended = self._ended.get(sid)
            if ended in ("reclaimed", "closed"):
                raise SessionReclaimed(f"session {sid} was {ended}")
            if ended is not None:
                raise EnvCrashed(f"session {sid}: {ended}")
            raise EnvError(f"unknown browser session {sid}")
        if session.crashed is not None:
            raise EnvCrashed(f"session {sid}: {session.crashed}")
        return session

    async def _ensure_browser(self) -> Browser:
        async with self._launch_lock:
            return await self._launch_if_down()

    async def _launch_if_down(self) -> Browser:
        if self._browser is not None and self.is_alive():
            return self._browser
        await self._drop_browser("browser relaunched")
        if self._playwright is None:
            self._playwright = await async_playwright().start()
        marker = f"--flywheel-pool={secrets.token_hex(6)}"
        browser = await self._playwright.chromium.launch(
            executable_path=await asyncio.to_thread(self._executable),
            headless=True,
            chromium_sandbox=self.sandboxed,
            args=[*CHROMIUM_ARGS, *self.extra_args, marker],
        )
        self._generation += 1
        generation = self._generation
        browser.on(
            "disconnected", lambda _b: self._mark_generation_crashed(generation, "browser disconnected")
        )
        self._browser = browser
        self._browser_pid = _find_pid(marker)
        self.launches += 1
        return browser

    async def _open(self, sid: str, viewport: tuple[int, int], options: dict[str, Any]) -> None:
        if sid in self._sessions:
            raise EnvError(f"browser session {sid} already open")
        browser = await self._ensure_browser()
        options["viewport"] = {"width": int(viewport[0]), "height": int(viewport[1])}
        context = await browser.new_context(**options)
        if self.sandboxed:
            await context.route(f"http://127.0.0.1:{get_server().port}/**", _serve_task_page)
        page = await context.new_page()
        cdp = await context.new_cdp_session(page)
        session = PageSession(sid, self._generation, context, page, cdp, (int(viewport[0]), int(viewport[1])))
        page.on("crash", lambda _p: self._mark_crashed(session, "page crashed"))
        self._sessions[sid] = session
        self._ended.pop(sid, None)

    async def _close_session(self, sid: str, why: str) -> None:
        session = self._sessions.pop(sid, None)
        if session is None:
            return
        session.closed = True
        self._ended[sid] = why if session.crashed is None else session.crashed
        with contextlib.suppress(PlaywrightError):
            await session.context.close()

    def _mark_crashed(self, session: PageSession, why: str) -> None:
        if session.crashed is None:
            session.crashed = why

    def _mark_generation_crashed(self, generation: int, why: str) -> None:
        for session in list(self._sessions.values()):
            if session.generation == generation:
                self._mark_crashed(session, why)
        if generation == self._generation:
            self._browser = None
            self._browser_pid = None

    def _probe_once(self) -> None:
        """Liveness probe: a dead pid or dropped connection crashes the current generation."""
        if self._browser is not None and not self.is_alive():
            self._mark_generation_crashed(self._generation, "browser process died")

    async def _drop_browser(self, why: str) -> None:
        self._mark_generation_crashed(self._generation, why)
        # Crashed sessions stay listed (so callers get EnvCrashed) until they close or go idle.
        browser, self._browser, self._browser_pid = self._browser, None, None
        if browser is not None:
            with contextlib.suppress(PlaywrightError):
                await browser.close()

    async def _start_housekeeping(self) -> None:
        self._housekeeping = asyncio.get_running_loop().create_task(self._housekeep())

    async def _housekeep(self) -> None:
        while True:
            await asyncio.sleep(min(self.probe_interval_s, self.idle_timeout_s / 4))
            self._probe_once()
            now = time.monotonic()
            for session in list(self._sessions.values()):
                if now - session.last_used > self.idle_timeout_s:
                    if session.crashed is None:
                        self.reclaimed.append(session.session_id)
                    await self._close_session(session.session_id, "reclaimed")

    async def _shutdown(self) -> None:
        self._housekeeping.cancel()
        for sid in list(self._sessions):
            await self._close_session(sid, "closed")
        await self._drop_browser("pool closed")
        if self._playwright is not None:
            with contextlib.suppress(Exception):
                await self._playwright.stop()
            self._playwright = None
        if self._box is not None:
            await asyncio.to_thread(self._box.close)
            self._box = None
        if self._box_dir is not None:
            shutil.rmtree(self._box_dir, ignore_errors=True)

    def _executable(self) -> str:
        """What Playwright starts: Chromium itself, or a launcher that runs it in the pool's box
        (started on first use; kept across Chromium relaunches)."""
        if not self.sandboxed:
            return self.executable
        from workers.envs.sandbox import Sandbox, SandboxPolicy

        if self._box is None or not self._box.alive():
            if self._box is not None:
                self._box.close()  # its uid and whatever of Chromium still runs there
            if self._box_dir is None:
                self._box_dir = Path(tempfile.mkdtemp(prefix="flywheel-browser-"))
                self._box_dir.chmod(0o711)  # the box user binds home/; the launcher stays root's
            home = self._box_dir / "home"
            home.mkdir(exist_ok=True)
            # Many pages share this box: each renderer has a dozen threads, and RLIMIT_NPROC counts them.
            self._box = Sandbox(home, policy=SandboxPolicy(processes=8192, memory_mb=16384, cpus=4.0))
            self._box.start()
        assert self._box_dir is not None  # made with the box above
        launcher = self._box_dir / "chromium-in-sandbox"
        return str(self._box.launcher(launcher, self.executable))


async def _serve_task_page(route: Route) -> None:
    """Answer a sandboxed page's request for a task page from the static server's folders."""
    path = get_server().file_for(route.request.url)
    if path is None:
        await route.fulfill(status=404, body="not found")
    else:
        # The content type the static server would send (Playwright's own guess differs for some).
        kind = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        await route.fulfill(path=str(path), content_type=kind, headers={"Cache-Control": "no-store"})


def _pid_alive(pid: int) -> bool:
    """True unless the process is gone or a zombie (killed but not yet reaped by its parent)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def _find_pid(marker: str) -> int | None:
    """The Chromium main process: its command line has our marker switch and no `--type=`."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        launcher = args[0].rsplit(b"/", 1)[-1] in (b"nsenter", b"prlimit", b"setpriv", b"env", b"sh")
        if marker.encode() in args and not launcher and not any(a.startswith(b"--type=") for a in args):
            return int(entry.name)
    return None


_default_pool: BrowserPool | None = None
_default_lock = threading.Lock()


def get_default_pool() -> BrowserPool:
    """The process-wide pool (one Chromium per worker process), created on first use."""
    global _default_pool
    with _default_lock:
        if _default_pool is None or _default_pool._closed:
            _default_pool = BrowserPool(idle_timeout_s=float(os.environ.get("BROWSER_IDLE_TIMEOUT_S", "600")))
        return _default_pool
