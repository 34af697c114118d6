"""Desktop apps on a real session: Chromium downloads land in the session dir the terminal sees;
the editor starts; mcp_call works from the desktop too."""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from workers.actions.types import Action
from workers.envs.base import TaskSpec
from workers.envs.desktop import DesktopConfig, DesktopEnv
from workers.envs.terminal import TerminalConfig, TerminalEnv


class _AttachmentHandler(http.server.SimpleHTTPRequestHandler):
    def end_headers(self) -> None:
        self.send_header("Content-Disposition", "attachment")
        super().end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def file_server(tmp_path: Path) -> Iterator[str]:
    served = tmp_path / "served"
    served.mkdir()
    (served / "report.csv").write_text("a,b\n1,2\n")
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 16080), partial(_AttachmentHandler, directory=str(served))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield "http://127.0.0.1:16080/report.csv"
    server.shutdown()
    server.server_close()


def test_chromium_download_is_visible_to_the_terminal(tmp_path: Path, file_server: str) -> None:
    home = tmp_path / "home"
    desktop = DesktopEnv(
        DesktopConfig(display_range=(150, 160), apps=("chromium",), vnc=False, session_dir=home)
    )
    terminal = TerminalEnv(TerminalConfig(session_dir=home))
    try:
        desktop.reset(TaskSpec(task_id="d", instruction="download", kind="desktop", source="test"))
        target = home / "Downloads" / "report.csv"
        deadline = time.monotonic() + 60
        # Chromium may still be settling after its window maps; retry the address-bar entry.
        while not target.exists() and time.monotonic() < deadline:
            desktop.step(Action("hotkey", keys=("ctrl", "l")))
            desktop.step(Action("type", text=file_server + "\n"))
            for _ in range(50):
                if target.exists():
                    break
                time.sleep(0.2)
        assert target.exists()
        terminal.reset(TaskSpec(task_id="t", instruction="", kind="terminal", source="test"))
        result = terminal.step(Action("type", text="cat ~/Downloads/report.csv\n"))
        assert "a,b\n1,2" in (result.observation.terminal_output or "")
    finally:
        desktop.close()
        terminal.close()


def test_editor_and_mcp_on_the_desktop(tmp_path: Path) -> None:
    env = DesktopEnv(
        DesktopConfig(display_range=(160, 170), apps=("editor",), vnc=False, session_dir=tmp_path)
    )
    try:
        env.reset(TaskSpec(task_id="e", instruction="", kind="desktop", source="test"))
        assert "Mousepad" in env._x.client_classes()  # type: ignore[union-attr]
        result = env.step(Action("mcp_call", name="calculator", arguments={"expression": "6*7"}))
        assert result.info["mcp"]["structured"] == {"result": 42.0}
        result = env.step(Action("mcp_call", name="write_file", arguments={"path": "m.txt", "content": "x"}))
        assert (tmp_path / "m.txt").read_text() == "x"
    finally:
        env.close()
