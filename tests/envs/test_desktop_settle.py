"""ScreenSettler on a real Xvfb: quiet means nothing drawn for `quiet_s`; with `min_area`, drawing
smaller than that (a caret's blink) does not count, larger drawing does."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from collections.abc import Iterator

import pytest
from Xlib.display import Display

from workers.envs.desktop.settle import ScreenSettler

pytestmark = pytest.mark.skipif(shutil.which("Xvfb") is None, reason="needs Xvfb")


@pytest.fixture
def display() -> Iterator[str]:
    """A bare Xvfb on the first free display of :340..:349 (Xvfb's own lock file decides)."""
    for number in range(340, 350):
        read_fd, write_fd = os.pipe()
        xvfb = subprocess.Popen(
            [
                "Xvfb",
                f":{number}",
                # no server reset when the last client leaves: each measurement's clients close, and
                # the next one's connecting during a reset was refused ("Connection reset by peer")
                "-noreset",
                "-displayfd",
                str(write_fd),
                "-screen",
                "0",
                "640x480x24",
                "-nolisten",
                "tcp",
            ],
            pass_fds=(write_fd,),
            stderr=subprocess.DEVNULL,
        )
        os.close(write_fd)
        with os.fdopen(read_fd) as ready:
            started = ready.readline().strip() == str(number)
        if started:
            break
        xvfb.wait(timeout=10)
    else:
        pytest.fail("no free X display in :340..:349")
    try:
        yield f":{number}"
    finally:
        xvfb.terminate()
        xvfb.wait(timeout=10)


def _blinking(display: str, width: int, height: int, drawing: threading.Event, stop: threading.Event) -> None:
    """Redraw a width×height rectangle every 0.1 s, alternating colours, until `stop`; `drawing` is
    set once the window is mapped and drawn on."""
    conn = Display(display)
    screen = conn.screen()
    window = screen.root.create_window(
        0, 0, 300, 300, 0, screen.root_depth, background_pixel=screen.black_pixel
    )
    window.map()
    gcs = [window.create_gc(foreground=screen.white_pixel), window.create_gc(foreground=screen.black_pixel)]
    i = 0
    while not stop.wait(0.1):
        window.fill_rectangle(gcs[i % 2], 10, 10, width, height)
        conn.sync()
        drawing.set()
        i += 1
    conn.close()


def _waited(display: str, min_area: int, draw: tuple[int, int]) -> float:
    drawing, stop = threading.Event(), threading.Event()
    drawer = threading.Thread(target=_blinking, args=(display, *draw, drawing, stop))
    drawer.start()
    try:
        assert drawing.wait(30), "the drawing client did not start"
        settler = ScreenSettler(display, min_area)
        try:
            return settler.wait(0.5, 2.0)
        finally:
            settler.close()
    finally:
        stop.set()
        drawer.join()


def test_min_area_ignores_a_caret_but_not_a_repaint(display: str) -> None:
    assert _waited(display, 32 * 32, (2, 20)) < 1.5  # a caret's blink: quiet after 0.5 s
    assert _waited(display, 0, (2, 20)) >= 2.0  # without min_area any drawing counts: never quiet
    assert _waited(display, 32 * 32, (100, 100)) >= 2.0  # a real repaint counts
