"""OSWorld's VM commands on a session: the programs they need (and whether this host has them),
the names mapped onto Debian's, `sudo` dropped, shell commands run by /bin/sh, files opened by
the application the VM would pick."""

from __future__ import annotations

import functools
import re
import shutil
from pathlib import Path
from typing import Any

from workers.envs.osworld.common import CommandRunner

# Tools OSWorld's Ubuntu VM has and a lean Debian desktop may lack; a task needing a missing one
# cannot pass here, so it is reported unsupported rather than scored 0 forever.
_VM_TOOLS = (
    "gsettings",
    "gio",
    "dconf",
    "nautilus",
    "apt-get",
    "apt",
    "snap",
    "loginctl",
    "systemctl",
    "zsh",
    "xdotool",
    "wmctrl",
    "libreoffice",
    "soffice",
    "gimp",
    "vlc",
    "thunderbird",
    "socat",
    "pactl",
    "xclip",
)
# OSWorld's VM names; here Debian's (Chromium stands in for Chrome).
_PROGRAM_ALIASES = {"google-chrome": "chromium", "python": "python3"}
_APT_HINT = {
    "libreoffice": "libreoffice",
    "soffice": "libreoffice",
    "gimp": "gimp",
    "vlc": "vlc",
    "thunderbird": "thunderbird",
}


def _missing_tools(command: str | list[str]) -> list[str]:
    if isinstance(command, list):
        program = _PROGRAM_ALIASES.get(str(command[0]), str(command[0])) if command else ""
        words = {Path(program).name}
        text = ""
    else:
        text = command
        words = set(re.findall(r"[A-Za-z][\w.-]*", text))
    problems = [
        f"needs the GSettings schema {schema!r}, which is not installed here"
        for schema in sorted(set(_GSETTINGS.findall(text if text else " ".join(map(str, command)))))
        if shutil.which("gsettings") is not None and schema not in _installed_schemas()
    ]
    for tool in sorted(words if isinstance(command, list) else words & set(_VM_TOOLS)):
        if tool and shutil.which(tool) is None:
            hint = _APT_HINT.get(tool)
            extra = f" (make osworld-apps DOMAINS={hint})" if hint else ""
            problems.append(f"needs {tool!r}, which is not installed here{extra}")
    return problems


# Commands that cannot do in a session what they do on OSWorld's VM, whatever is installed: the
# session has no root and no login manager, so the set-up step would fail and leave the VM's state.
_NOT_IN_A_SESSION = {
    "chsh": "changes the login shell, which needs root (sessions have none)",
    "loginctl": "ends or changes the login session, which sessions do not have (no logind)",
}


def _session_limits(command: str | list[str]) -> list[str]:
    """What in `command` cannot run in a sandboxed session, one line each."""
    text = command if isinstance(command, str) else " ".join(map(str, command))
    return [f"{name!r} {why}" for name, why in _NOT_IN_A_SESSION.items() if re.search(rf"\b{name}\b", text)]


_GSETTINGS = re.compile(r"\bgsettings\s+(?:get|set|reset|range|list-keys)\s+([A-Za-z0-9_.-]+)")


@functools.cache
def _installed_schemas() -> frozenset[str]:
    """The GSettings schemas of this host's /usr (the sandboxes see the same /usr)."""
    import subprocess

    try:
        out = subprocess.run(["gsettings", "list-schemas"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return frozenset()
    return frozenset(out.stdout.split())


_FOCUS_STATEMENT = re.compile(
    r"(import (pyautogui|time)|pyautogui\.click\([\d\s,.]*\)|time\.sleep\([\d.]+\))?"
)


def _is_focus_click(command: str | list[str]) -> bool:
    """True for OSWorld's `python -c "import pyautogui; pyautogui.click(960, 540); time.sleep(.5)"`."""
    code = command[-1] if isinstance(command, list) else command
    if isinstance(command, str):
        match = re.search(r"-c\s+(['\"])(.*)\1", command, re.DOTALL)
        if match is None:
            return False
        code = match.group(2)
    return "pyautogui.click" in str(code) and all(
        _FOCUS_STATEMENT.fullmatch(part.strip()) for part in re.split(r"[;\n]", str(code))
    )


_SUDO = re.compile(r"(echo\s+['\"]?password['\"]?\s*\|\s*)?\bsudo\s+(-S\s+)?")


_SUFFIX_APPS = {
    ("libreoffice", "--calc"): {".xlsx", ".xls", ".ods", ".csv"},
    ("libreoffice", "--writer"): {".docx", ".doc", ".odt", ".rtf"},
    ("libreoffice", "--impress"): {".pptx", ".ppt", ".odp"},
    ("gimp",): {".png", ".jpg", ".jpeg", ".xcf", ".bmp", ".gif", ".tif", ".tiff", ".webp"},
    ("vlc",): {".mp4", ".mp3", ".avi", ".mkv", ".wav", ".ogg", ".webm", ".flac"},
    ("thunderbird",): {".eml", ".mbox"},
}


def _opener(path: Path) -> list[str]:
    """Which app opens a file, as OSWorld's VM's default application would: LibreOffice for
    documents, GIMP for images, VLC for media, the browser for web pages and PDFs, else the editor."""
    suffix = path.suffix.lower()
    if suffix in {".html", ".htm", ".pdf", ".svg"}:
        from workers.envs.desktop.apps import CHROMIUM_FLAGS

        return ["chromium", *CHROMIUM_FLAGS]
    for argv, suffixes in _SUFFIX_APPS.items():
        if suffix in suffixes:
            return list(argv)
    return ["mousepad", "--disable-server"]


# `pkill chrome` (OSWorld's postconfigs stop Chrome so that it writes its profile) matches
# Chrome's process name; Chromium's processes are named `chromium`.
_KILLERS = frozenset({"pkill", "killall"})
_KILL_CHROME = re.compile(r"\b(pkill|killall)(\s+)(?:google-chrome|chrome)\b(?![.-])")


def _rewrite_command(command: str | list[str], runner: CommandRunner) -> str | list[str]:
    """Map OSWorld's VM onto the session: `sudo` dropped, `python` is python3 (with pyautogui on
    its path), `google-chrome` is Chromium (with the session's flags), `pkill chrome` stops it."""
    if isinstance(command, str):
        command = _KILL_CHROME.sub(r"\1\2chromium", _SUDO.sub("", command))
        return re.sub(r"(^|[\s;&|(])python(?=\s)", r"\1python3", command)
    parts = [str(part) for part in command]
    if parts[:1] == ["sudo"]:
        parts = parts[1:]
    if parts[:1] and parts[0] in _KILLERS:
        return [parts[0], *("chromium" if p in {"chrome", "google-chrome"} else p for p in parts[1:])]
    if parts and parts[0] in _PROGRAM_ALIASES:
        parts[0] = _PROGRAM_ALIASES[parts[0]]
        if parts[0] == "chromium":
            from workers.envs.osworld.chrome import chrome_argv

            return chrome_argv(parts)
    return parts


def _as_osworld_shell(command: str | list[str], shell: Any) -> tuple[str | list[str], bool]:
    """OSWorld's VM server runs `shell: true` commands with Python's subprocess, i.e. /bin/sh (dash),
    whose `echo` and quoting differ from bash's; tasks depend on that, so do the same here."""
    if shell and isinstance(command, str):
        return ["/bin/sh", "-c", command], False
    if shell:
        return ["/bin/sh", "-c", " ".join(command)], False
    return command, False
