"""OSWorld's VM commands on a session: the programs they need (and whether this host has them),
the names mapped onto Debian's, `sudo` dropped, shell commands run by /bin/sh, files opened by
the application the VM would pick."""

from __future__ import annotations

import functools
import re
import shlex
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


# Programs of OSWorld's VM that Debian does not package (no `make osworld-apps` domain installs them).
_NOT_PACKAGED = {
    "code": "needs 'code' (Visual Studio Code), which Debian does not package: the vs_code tasks are "
    "unsupported here (VS Code or VSCodium would come from the vendor's own package, not Debian)",
}


def _missing_tools(command: str | list[str]) -> list[str]:
    """What `command` needs that this host lacks, by name: the programs it runs (every simple
    command of a shell line), the packages it installs, the GSettings schemas it reads."""
    if isinstance(command, list):
        program = _PROGRAM_ALIASES.get(str(command[0]), str(command[0])) if command else ""
        words = {Path(program).name} if program and "/" not in program else set()
        text = " ".join(map(str, command))
        if words & {"sh", "bash", "dash"} and "-c" in command[1:-1]:
            words |= _programs(str(command[-1]))  # sh -c LINE runs LINE's programs
    else:
        text = command
        # the programs it runs, and the VM's tools it names anywhere (`chsh -s $(which zsh)`)
        words = _programs(text) | (set(re.findall(r"[A-Za-z][\w.-]*", text)) & set(_VM_TOOLS))
    problems = [
        f"needs the GSettings schema {schema!r}, which is not installed here"
        for schema in sorted(set(_GSETTINGS.findall(text)))
        if shutil.which("gsettings") is not None and schema not in _installed_schemas()
    ]
    problems += install_problems(text)
    for tool in sorted(words - _INSTALLERS):
        if tool and shutil.which(_PROGRAM_ALIASES.get(tool, tool)) is None:
            if tool in _NOT_PACKAGED:
                problems.append(_NOT_PACKAGED[tool])
                continue
            hint = _APT_HINT.get(tool)
            extra = f" (make osworld-apps DOMAINS={hint})" if hint else ""
            problems.append(f"needs {tool!r}, which is not installed here{extra}")
    return problems


# The shell's own words: not programs to look for.
_SHELL_WORDS = frozenset(
    "cd echo export test [ [[ true false exit source . set unset read printf pwd eval exec wait kill "
    "if then else elif fi for while until do done case esac in function return shift trap umask "
    "alias type command local break continue { } ! time ulimit getopts sudo nohup env".split()
)
_SEPARATORS = re.compile(r"&&|\|\||[;|&\n`()]|\$\(")
_ARITHMETIC = re.compile(r"\$\(\([^)]*\)\)")
_ASSIGNMENT = re.compile(r"^[A-Za-z_]\w*=")
_PROGRAM_NAME = re.compile(r"^[A-Za-z][\w.+-]*$")


def _programs(line: str) -> set[str]:
    """The programs a shell line runs: the first word of each simple command (assignments, `sudo`
    and its options, the shell's own words and paths into the home skipped)."""
    found: set[str] = set()
    line = _ARITHMETIC.sub("0", _SUDO.sub("", line))
    for segment in _SEPARATORS.split(line):
        try:
            words = shlex.split(segment, comments=True)
        except ValueError:
            words = segment.split()
        while words and (_ASSIGNMENT.match(words[0]) or words[0] in {"sudo", "-S", "-E", "nohup", "env"}):
            words = words[1:]
        if not words or words[0] in _SHELL_WORDS:
            continue
        name = words[0].rsplit("/", 1)[-1] if words[0].startswith(("/usr/", "/bin/", "/sbin/")) else words[0]
        if _PROGRAM_NAME.match(name):
            found.add(name)
    return found


# Set-up commands that install packages (OSWorld's VM has root and the network; sessions have
# neither): satisfied when the package is in the image, else refused by name — never run to fail.
_INSTALLERS = frozenset({"apt", "apt-get", "pip", "pip3", "dpkg", "snap"})
_APT_INSTALL = re.compile(r"\b(?:apt-get|apt)\s+(?:-\S+\s+)*install\b([^;&|\n]*)")
_APT_UPDATE = re.compile(r"\b(?:apt-get|apt)\s+(?:-\S+\s+)*(?:update|upgrade)\b[^;&|\n]*")
_PIP_INSTALL = re.compile(r"\b(?:pip3?|python3?\s+-m\s+pip)\s+install\b([^;&|\n]*)")


def _packages(args: str) -> list[str]:
    return [w for w in args.split() if not w.startswith("-") and re.fullmatch(r"[A-Za-z0-9][\w.+:=<>-]*", w)]


def install_problems(text: str) -> list[str]:
    """One line per package `text` installs that this image lacks."""
    problems = [
        f"installs the Debian package {name!r}, which is not in the image here (sessions cannot install)"
        for match in _APT_INSTALL.finditer(text)
        for name in _packages(match.group(1))
        if not _deb_installed(name)
    ]
    problems += [
        f"installs the Python package {name!r}, which the sessions' python3 lacks (sessions cannot install)"
        for match in _PIP_INSTALL.finditer(text)
        for name in _packages(match.group(1))
        if not _pip_installed(re.split(r"[<>=\[]", name)[0])
    ]
    return problems


def _satisfied_installs(command: str) -> str:
    """`command` with its package installs and index updates replaced by `true` (the packages are
    in the image: the support check refused the task otherwise; a step that gets here anyway fails
    by name)."""
    problems = install_problems(command)
    if problems:
        from workers.envs.osworld.common import OSWorldError

        raise OSWorldError(problems[0])
    command = _APT_INSTALL.sub("true", command)
    command = _APT_UPDATE.sub("true", command)
    return _PIP_INSTALL.sub("true", command)


@functools.cache
def _deb_installed(name: str) -> bool:
    import subprocess

    try:
        out = subprocess.run(
            ["dpkg-query", "-W", "-f=${Status}", name.split("=")[0].split(":")[0]],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and out.stdout.endswith("installed") and "not-installed" not in out.stdout


@functools.cache
def _pip_installed(name: str) -> bool:
    """Whether the sessions' python3 (the host's /usr/bin/python3, plus pyautogui's directory) has it."""
    import subprocess

    from workers.envs.osworld.files import pyautogui_dir

    code = "import importlib.metadata, sys; importlib.metadata.version(sys.argv[1])"
    extra = pyautogui_dir()
    env = {"PATH": "/usr/bin:/bin", **({"PYTHONPATH": str(extra)} if extra else {})}
    try:
        out = subprocess.run(["/usr/bin/python3", "-c", code, name], capture_output=True, env=env, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0


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
        command = _satisfied_installs(_KILL_CHROME.sub(r"\1\2chromium", _SUDO.sub("", command)))
        return re.sub(r"(^|[\s;&|(])python(?=\s)", r"\1python3", command)
    parts = [str(part) for part in command]
    if parts[:1] == ["sudo"]:
        parts = parts[1:]
    if parts[:1] and parts[0] in _INSTALLERS and _satisfied_installs(" ".join(parts)) == "true":
        return ["true"]
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
