"""Desktop apps a session can launch: argv, the WM_CLASS their window shows, per-session set-up."""

from __future__ import annotations

import json
import os
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
        # A fixed geometry at the top-left so tasks and tests know where it is.
        argv: tuple[str, ...] = (
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
        return AppSpec("xterm", argv, "XTerm")
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
