"""BrowserPool against real Chromium: screenshots, elements, isolation, crash relaunch, idle reclaim."""

from __future__ import annotations

import io
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image

from workers.envs.base import EnvCrashed, EnvError
from workers.envs.browser.pool import BrowserPool, PageSession, SessionReclaimed
from workers.envs.browser.server import get_server

PAGE = """<html><body style="margin:0">
<button id="b" style="position:absolute;left:40px;top:20px;width:60px;height:30px">Go</button>
<input id="i" placeholder="name" style="position:absolute;left:10px;top:100px;width:100px;height:20px">
<div onclick="1" style="position:absolute;left:200px;top:150px;width:50px;height:50px">tile</div>
<a href="#x" style="position:absolute;left:10px;top:400px">offscreen</a>
<span style="display:none">hidden</span>
</body></html>"""


@pytest.fixture(scope="module")
def pool() -> Iterator[BrowserPool]:
    with BrowserPool(probe_interval_s=0.2) as p:
        yield p


async def _set_page(s: PageSession) -> None:
    await s.page.set_content(PAGE)


def test_screenshot_jpeg_and_png_have_viewport_size(pool: BrowserPool) -> None:
    handle = pool.open_session(viewport=(320, 240))
    try:
        handle.call(_set_page)
        for fmt, magic in (("jpeg", b"\xff\xd8"), ("png", b"\x89PNG")):
            data = handle.call(lambda s, f=fmt: s.screenshot(f))
            assert data.startswith(magic)
            assert Image.open(io.BytesIO(data)).size == (320, 240)
    finally:
        handle.close()


def test_elements_have_centres_inside_the_viewport(pool: BrowserPool) -> None:
    handle = pool.open_session(viewport=(320, 240))
    try:
        handle.call(_set_page)
        elements = handle.call(lambda s: s.elements())
        by_text = {e.text: e for e in elements}
        assert by_text["Go"].tag == "button"
        assert by_text["Go"].center == (70.0, 35.0)
        assert by_text["name"].tag == "input:text"
        assert "tile" in by_text  # [onclick] counts as interactive
        assert "offscreen" not in by_text and "hidden" not in by_text
        assert [e.index for e in elements] == list(range(len(elements)))
    finally:
        handle.close()


LABELLED = """<html><body style="margin:0">
<label><input type="checkbox" id="c"> Remember me</label><br>
<label for="r2">Express</label> <input type="radio" id="r2" name="s" checked><br>
<input type="checkbox" value="newsletter"><br>
<label>City <input type="text"></label>
</body></html>"""


def test_controls_are_named_by_their_labels(pool: BrowserPool) -> None:
    """A checkbox reads "[ ] Remember me", not HTML's default value "on"; a value is the fallback."""
    handle = pool.open_session(viewport=(320, 240))
    try:
        handle.call(lambda s: s.page.set_content(LABELLED))
        inputs = [e for e in handle.call(lambda s: s.elements()) if e.tag.startswith("input:")]
        assert [(e.tag, e.text) for e in inputs] == [
            ("input:checkbox", "[ ] Remember me"),
            ("input:radio", "[x] Express"),
            ("input:checkbox", "[ ] newsletter"),
            ("input:text", "City"),
        ]
    finally:
        handle.close()


def test_sessions_are_isolated_contexts(pool: BrowserPool) -> None:
    server = get_server()
    server.mount("pooltest", Path(__file__).parent)
    url = server.url("pooltest", "test_browser_pool.py")
    a, b = pool.open_session(), pool.open_session()
    try:
        for h in (a, b):
            h.call(lambda s: s.page.goto(url))
        a.call(lambda s: s.page.evaluate("localStorage.setItem('k', 'a')"))
        assert a.call(lambda s: s.page.evaluate("localStorage.getItem('k')")) == "a"
        assert b.call(lambda s: s.page.evaluate("localStorage.getItem('k')")) is None
    finally:
        a.close()
        b.close()


def test_calls_from_many_threads(pool: BrowserPool) -> None:
    handles = [pool.open_session(viewport=(200, 200)) for _ in range(4)]
    results: list[int] = []
    errors: list[Exception] = []

    def work(i: int) -> None:
        try:
            for _ in range(5):
                results.append(len(handles[i].call(lambda s: s.screenshot())))
        except Exception as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for h in handles:
        h.close()
    assert not errors and len(results) == 20


def test_closed_session_refuses_calls(pool: BrowserPool) -> None:
    handle = pool.open_session()
    handle.close()
    with pytest.raises(SessionReclaimed):
        handle.call(lambda s: s.screenshot())
    with pytest.raises(EnvError, match="unknown"):
        pool._call_session("nope", lambda s: s.screenshot(), 5)


def test_killed_browser_raises_envcrashed_then_relaunches(pool: BrowserPool) -> None:
    handle = pool.open_session()
    handle.call(_set_page)
    launches = pool.launches
    pid = pool.browser_pid()
    assert pid is not None and pool.is_alive()
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while pool.session_state(handle.session_id) != "crashed" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pool.session_state(handle.session_id) == "crashed"
    with pytest.raises(EnvCrashed):
        handle.call(lambda s: s.screenshot())
    fresh = pool.open_session()
    try:
        assert pool.launches == launches + 1
        assert pool.browser_pid() not in (None, pid)
        fresh.call(_set_page)
        assert fresh.call(lambda s: s.screenshot()).startswith(b"\xff\xd8")
    finally:
        fresh.close()
        handle.close()


def test_idle_sessions_are_reclaimed() -> None:
    with BrowserPool(idle_timeout_s=0.6, probe_interval_s=0.1) as small:
        idle = small.open_session()
        busy = small.open_session()
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            busy.call(lambda s: s.page.evaluate("1"))
            time.sleep(0.1)
        assert small.session_state(idle.session_id) == "reclaimed"
        assert idle.session_id in small.reclaimed
        assert small.session_state(busy.session_id) == "alive"
        with pytest.raises(SessionReclaimed):
            idle.call(lambda s: s.screenshot())
        assert small.session_ids() == [busy.session_id]


def test_sessions_opened_together_on_a_fresh_pool_share_one_chromium(run_together) -> None:
    # An env host's first resets arrive together: each open found no Chromium and launched its own
    # (dropping the others' sessions as crashed), and the launches raced on the pool's sandbox
    # ("the session's sandbox is not running").
    handles = []

    def open_one() -> None:
        handle = pool.open_session(viewport=(200, 200))
        handle.call(lambda s: s.page.evaluate("1 + 1"))
        handles.append(handle)

    with BrowserPool() as pool:
        assert run_together([open_one] * 6) == []
        assert pool.launches == 1
        assert all(h.alive() for h in handles) and len(handles) == 6
