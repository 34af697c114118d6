"""Desktop apps a session can launch: argv, the WM_CLASS their window shows, per-session set-up."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from workers.envs.base import EnvError

# SPEC §3 Chromium flags, minus --headless: here it draws on the session's X display.
CHROMIUM_FLAGS: tuple[str, ...] = (
    "--no-sandbox",
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


def app_spec(name: str, session_dir: Path, width: int, height: int, confine_shell: bool = False) -> AppSpec:
    """How to launch app `name` ('xterm', 'chromium', 'editor'/'mousepad') in a session.

    With `confine_shell` the xterm's shell runs in the terminal sandbox (the session directory as
    /home/session, nothing else of the host), like the terminal environment's commands.
    """
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
        if confine_shell:
            from workers.envs.terminal.sandbox import sandbox_argv

            argv = (*argv, "-e", *sandbox_argv(session_dir, r"export PS1='user@session:\w\$ '; exec bash -i"))
        return AppSpec("xterm", argv, "XTerm")
    if name == "chromium":
        profile = session_dir / ".chromium"
        _write_chromium_prefs(profile, session_dir / "Downloads")
        argv = (
            "chromium",
            *CHROMIUM_FLAGS,
            f"--user-data-dir={profile}",
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
    inside the session directory where the terminal sandbox sees them (SPEC §3)."""
    download_dir.mkdir(parents=True, exist_ok=True)
    default = profile / "Default"
    default.mkdir(parents=True, exist_ok=True)
    prefs = {
        "download": {
            "default_directory": str(download_dir),
            "prompt_for_download": False,
            "directory_upgrade": True,
        },
        "savefile": {"default_directory": str(download_dir)},
        "browser": {"has_seen_welcome_page": True},
    }
    (default / "Preferences").write_text(json.dumps(prefs))
