"""Desktop apps on a real session: Chromium downloads land in the session dir the terminal sees;
the editor starts; mcp_call works from the desktop too."""

from __future__ import annotations

import time
from pathlib import Path

from workers.actions.types import Action
from workers.envs.base import TaskSpec
from workers.envs.desktop import DesktopConfig, DesktopEnv
from workers.envs.terminal import TerminalEnv


def test_chromium_download_is_visible_to_the_terminal(tmp_path: Path) -> None:
    home = tmp_path / "home"
    desktop = DesktopEnv(
        DesktopConfig(display_range=(150, 160), apps=("chromium",), vnc=False, session_dir=home)
    )
    try:
        desktop.reset(TaskSpec(task_id="d", instruction="download", kind="desktop", source="test"))
        terminal = TerminalEnv(sandbox=desktop.sandbox)
        # The session has no network but its own loopback: serve the file from inside it.
        desktop.run_command("mkdir /tmp/served && printf 'a,b\\n1,2\\n' > /tmp/served/report.bin")
        desktop.spawn_command(
            ["python3", "-m", "http.server", "16080", "-b", "127.0.0.1", "-d", "/tmp/served"]
        )
        file_server = "http://127.0.0.1:16080/report.bin"
        target = home / "Downloads" / "report.bin"
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
        result = terminal.step(Action("type", text="cat ~/Downloads/report.bin\n"))
        assert "a,b\n1,2" in (result.observation.terminal_output or "")
        terminal.close()
    finally:
        desktop.close()


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
