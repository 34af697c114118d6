"""DesktopEnv against a real Xvfb + openbox + xterm + x11vnc session."""

from __future__ import annotations

import io
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from PIL import Image, ImageChops

from workers.actions.types import Action, Point
from workers.envs.base import EnvCrashed, Environment, TaskSpec
from workers.envs.desktop import DesktopConfig, DesktopEnv

TASK = TaskSpec(task_id="t1", instruction="use the terminal", kind="desktop", source="test")
# Inside the xterm at +0+0 (100x30 cells ≈ 700x480 px).
XTERM_POINT = Point(200, 200)


def _wait_for(check: Callable[[], bool], timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def desktop(tmp_path: Path) -> Iterator[DesktopEnv]:
    env = DesktopEnv(DesktopConfig(display_range=(120, 140), session_dir=tmp_path / "home"))
    env.reset(TASK)
    yield env
    env.close()


def _image(data: bytes) -> Image.Image:
    return Image.open(io.BytesIO(data)).convert("RGB")


def test_desktop_implements_protocol_and_boots_everything(desktop: DesktopEnv) -> None:
    assert isinstance(desktop, Environment)
    assert desktop.is_alive()
    assert desktop.vnc_target is not None
    obs = desktop.observe()
    assert (obs.width, obs.height) == (1280, 800)
    assert obs.instruction == "use the terminal"
    assert _image(obs.screenshot).size == (1280, 800)
    assert obs.screenshot[:2] == b"\xff\xd8"  # JPEG by default
    assert desktop.observe("png").screenshot[:8] == b"\x89PNG\r\n\x1a\n"
    assert set(obs.timings_ms) == {"grab", "encode"}


def test_typing_into_xterm_writes_file_in_session_dir(desktop: DesktopEnv) -> None:
    before = _image(desktop.observe("png").screenshot)
    desktop.step(Action("click", point=XTERM_POINT))
    result = desktop.step(Action("type", text="echo hi > f.txt\n"))
    assert "error" not in result.info
    target = desktop.session_dir / "f.txt"
    assert _wait_for(lambda: target.exists() and target.read_text() == "hi\n")
    after = _image(desktop.observe("png").screenshot)
    assert ImageChops.difference(before, after).getbbox() is not None


def test_uppercase_symbols_and_unicode_are_typed_exactly(desktop: DesktopEnv) -> None:
    text = "Aa Zz !@#$%^&*()_+{}|:<>?~ é ü ✓ 中"
    desktop.step(Action("click", point=XTERM_POINT))
    desktop.step(Action("type", text=f"printf '%s' '{text}' > u.txt\n"))
    target = desktop.session_dir / "u.txt"
    assert _wait_for(lambda: target.exists() and target.read_text() == text), (
        target.read_text() if target.exists() else "missing"
    )


def test_hotkeys_reach_the_focused_app(desktop: DesktopEnv) -> None:
    desktop.step(Action("click", point=XTERM_POINT))
    # ctrl u erases the typed line in bash; if the hotkey were typed as text, 'bad' would be written.
    desktop.step(Action("type", text="echo bad > h.txt"))
    desktop.step(Action("hotkey", keys=("ctrl u",)))
    desktop.step(Action("type", text="echo good > h.txt\n"))
    target = desktop.session_dir / "h.txt"
    assert _wait_for(lambda: target.exists() and target.read_text() == "good\n")


def test_pointer_actions_move_the_pointer(desktop: DesktopEnv) -> None:
    desktop.step(Action("hover", point=Point(321, 123)))
    assert desktop.xinput.pointer() == (321, 123)
    result = desktop.step(Action("drag", point=Point(10, 700), end_point=Point(400, 650)))
    assert result.info["executed_end_point"] == [400, 650]
    assert desktop.xinput.pointer() == (400, 650)
    for kind in ("left_double", "right_single", "scroll"):
        result = desktop.step(Action(kind, point=Point(900, 600), direction="down"))  # type: ignore[arg-type]
        assert "error" not in result.info, result.info
    desktop.step(Action("hotkey", keys=("esc",)))  # close openbox's root menu from the right click


def test_unsupported_and_invalid_actions_give_typed_errors(desktop: DesktopEnv) -> None:
    assert "not supported" in desktop.step(Action("press_home")).info["error"]
    assert "outside" in desktop.step(Action("click", point=Point(5000, 10))).info["error"]
    assert "needs a point" in desktop.step(Action("click")).info["error"]
    assert "unknown key" in desktop.step(Action("hotkey", keys=("ctrl", "nosuchkey"))).info["error"]
    finished = desktop.step(Action("finished", text="done"))
    assert finished.done and finished.info["answer"] == "done"


def test_killing_xvfb_is_detected_as_crash(tmp_path: Path) -> None:
    env = DesktopEnv(DesktopConfig(display_range=(140, 160), apps=(), vnc=False, session_dir=tmp_path))
    try:
        env.boot()
        assert env.is_alive()
        assert env._x is not None and env._x.xvfb is not None  # the test needs the real pid
        os.kill(env._x.xvfb.pid, signal.SIGKILL)
        assert _wait_for(lambda: not env.is_alive(), 5)
        with pytest.raises(EnvCrashed):
            env.observe()
        with pytest.raises(EnvCrashed):
            env.step(Action("click", point=Point(1, 1)))
    finally:
        env.close()
    assert tmp_path.exists()  # a session dir the caller gave is theirs to delete


def test_two_sessions_get_distinct_displays_and_close_cleans_up(tmp_path: Path) -> None:
    envs = [DesktopEnv(DesktopConfig(display_range=(160, 180), apps=(), vnc=False)) for _ in range(2)]
    try:
        for env in envs:
            env.boot()
        assert envs[0].display != envs[1].display
        dirs = [env.session_dir for env in envs]
    finally:
        for env in envs:
            env.close()
    assert not any(d.exists() for d in dirs)
    assert not any(env.is_alive() for env in envs)


def test_xterm_shell_is_confined_to_the_session_dir(desktop: DesktopEnv) -> None:
    desktop.step(Action("click", point=XTERM_POINT))
    desktop.step(
        Action("type", text="cat /etc/shadow > c.txt 2>&1; ls / > r.txt; pwd > p.txt; tty > t.txt\n")
    )
    done = desktop.session_dir / "t.txt"
    assert _wait_for(lambda: done.exists() and done.read_text() != "")
    assert "No such file" in (desktop.session_dir / "c.txt").read_text()
    assert "home" in (desktop.session_dir / "r.txt").read_text()
    assert "work" not in (desktop.session_dir / "r.txt").read_text().split()
    assert (desktop.session_dir / "p.txt").read_text() == "/home/session\n"
    assert done.read_text().startswith("/dev/pts/")  # a real terminal: line editing and job control work


def test_step_screenshot_waits_for_the_app_to_redraw(tmp_path: Path) -> None:
    # A generous quiet window: on a loaded machine xterm may take a while to start drawing.
    config = DesktopConfig(display_range=(120, 140), vnc=False, session_dir=tmp_path, settle_quiet_s=0.3)
    env = DesktopEnv(config)
    try:
        env.reset(TASK)
        env.step(Action("click", point=XTERM_POINT))
        before = _image(env.observe("png").screenshot)
        result = env.step(Action("type", text="echo settled"))
        assert result.info["timings_ms"]["settle"] >= 300 * 0.9
        # The step's own screenshot already shows the typed text (JPEG, so compare coarsely).
        after = _image(result.observation.screenshot)
        diff = ImageChops.difference(before, after).convert("L").point(lambda v: 255 if v > 60 else 0)
        assert diff.getbbox() is not None
    finally:
        env.close()


def test_stale_x_socket_left_by_a_killed_server_is_reused(tmp_path: Path) -> None:
    import socket

    stale = Path("/tmp/.X11-unix/X170")
    if stale.exists():
        pytest.skip("display :170 is in use")
    stale.parent.mkdir(exist_ok=True)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.bind(str(stale))  # bound, never listening: what a SIGKILLed Xvfb leaves behind
    env = DesktopEnv(DesktopConfig(display_range=(170, 171), apps=(), vnc=False, session_dir=tmp_path))
    try:
        env.boot()
        assert env.display == ":170"
    finally:
        env.close()


def test_reset_of_a_used_session_starts_clean() -> None:
    env = DesktopEnv(DesktopConfig(display_range=(170, 180), apps=(), vnc=False))
    try:
        env.reset(TASK)
        (env.session_dir / "left_over.txt").write_text("from the last task")
        env.step(Action("hover", point=Point(5, 5)))
        first_display = env.display
        env.reset(TASK)
        assert not (env.session_dir / "left_over.txt").exists()
        assert env.is_alive() and env.display == first_display  # the freed display is reused
    finally:
        env.close()
