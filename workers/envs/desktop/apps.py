"""Desktop apps a session can launch: argv, the WM_CLASS their window shows, per-session set-up."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from workers.envs.base import EnvError
from workers.envs.sandbox import SANDBOX_HOME

# SPEC §3 Chromium flags, minus --headless: here it draws on the session's X display. Its own
# renderer sandbox stays on (it works in the session's box): a web page that compromises its
# renderer — tasks with network egress browse real sites — does not get the session's box.
CHROMIUM_FLAGS: tuple[str, ...] = (
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--no-default-browser-check",
    "--password-store=basic",
)


@dataclass(frozen=True)
class AppSpec:
    name: str
    argv: tuple[str, ...]
    wm_class: str


def app_spec(name: str, session_dir: Path, width: int, height: int) -> AppSpec:
    """How to launch app `name` ('xterm', 'chromium', 'editor'/'mousepad') in a session's sandbox,
    where the session directory (`session_dir` on the host) is the home, SANDBOX_HOME."""
    if name == "xterm":
        return AppSpec("xterm", terminal_argv(), "XTerm")
    if name == "chromium":
        _write_chromium_prefs(session_dir / ".chromium", session_dir / "Downloads")
        argv = (
            "chromium",
            *CHROMIUM_FLAGS,
            f"--user-data-dir={SANDBOX_HOME}/.chromium",
            f"--window-size={width},{height}",
            "--window-position=0,0",
            "about:blank",
        )
        return AppSpec("chromium", argv, "Chromium")
    if name in {"editor", "mousepad"}:
        return AppSpec("mousepad", ("mousepad", "--disable-server"), "Mousepad")
    raise EnvError(f"unknown desktop app {name!r}; known: xterm, chromium, editor")


# Each terminal logs what it shows to TERMINAL_LOG_DIR/<its pid>.log (inside the box, private to
# the session, on its size-capped /tmp so that a flood of output cannot grow memory without bound):
# OSWorld's `vm_terminal_output` getter reads the focused terminal's text (`terminal_text`). The
# pid is the one the window advertises (_NET_WM_PID), so the log of the active window is found by it.
TERMINAL_LOG_DIR = "/tmp/.terminal-logs"
TERMINAL_TEXT_BYTES = 1 << 20  # the last MiB a terminal showed (its scrollback, and then some)


def terminal_argv() -> tuple[str, ...]:
    """The session's terminal: xterm at a fixed geometry at the top-left (so tasks and tests know
    where it is), logging its output for `terminal_text`; the openbox key Ctrl+Alt+T starts another."""
    xterm = (
        "xterm",
        "-T",
        "Terminal",
        "-geometry",
        "100x30+0+0",
        "-fa",
        "Monospace",
        "-fs",
        "11",
    )
    # `exec` keeps the shell's pid, so $$ is the xterm's pid.
    script = f'mkdir -p {TERMINAL_LOG_DIR} && exec {" ".join(xterm)} -l -lf "{TERMINAL_LOG_DIR}/$$.log"'
    return ("/bin/sh", "-c", script)


_CSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")
_OSC = re.compile(r"\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")
_ESC = re.compile(r"\x1b[@-Z\\-_]|\x1b[()*+#][0-9A-Za-z]|\x1b[=>78]")


def terminal_text(raw: bytes) -> str:
    """What a terminal showed, from the bytes it logged: escape sequences (colours, cursor moves,
    titles, bracketed paste) removed, a carriage return rewrites its line, a backspace erases."""
    text = raw.decode("utf-8", errors="replace")
    text = _ESC.sub("", _OSC.sub("", _CSI.sub("", text)))
    lines = []
    for line in text.replace("\r\n", "\n").split("\n"):
        shown: list[str] = []
        for part in line.split("\r"):
            typed: list[str] = []
            for ch in part:
                if ch == "\b":
                    if typed:
                        typed.pop()
                elif ch == "\x07" or (ch < " " and ch != "\t"):
                    continue
                else:
                    typed.append(ch)
            shown = typed + shown[len(typed) :]  # a carriage return writes over the line
        lines.append("".join(shown))
    return "\n".join(lines)


def _write_chromium_prefs(profile: Path, download_dir: Path) -> None:
    """Downloads land in ~/Downloads of the session (as on a normal desktop and in OSWorld's VM),
    in the session directory where its shell and the terminal see them (SPEC §3)."""
    download_dir.mkdir(parents=True, exist_ok=True)
    owner = profile.parent.stat().st_uid  # the sandbox user while the session runs
    default = profile / "Default"
    default.mkdir(parents=True, exist_ok=True)
    prefs = {
        "download": {
            "default_directory": f"{SANDBOX_HOME}/Downloads",
            "prompt_for_download": False,
            "directory_upgrade": True,
        },
        "savefile": {"default_directory": f"{SANDBOX_HOME}/Downloads"},
        "browser": {"has_seen_welcome_page": True},
    }
    (default / "Preferences").write_text(json.dumps(prefs))
    for path in (download_dir, profile, default, default / "Preferences"):
        os.lchown(path, owner, owner)
