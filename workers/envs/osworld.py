"""OSWorld task JSON (SPEC §5): parse, say what is unsupported, run set-up, evaluate.

Vocabulary (docs/osworld.md): metrics and most getters are OSWorld's own, from the pinned
`desktop-env` package (`workers.envs.osworld_vocab`), run against the session through an adapter;
the getters that talk to OSWorld's VM over HTTP (`vm_command_line`, `vm_command_error`,
`vm_terminal_output`) and `cloud_file` are the platform's: commands run in the session's sandbox
and files come from the task's bundle or the local mirror. `regex_match` is the platform's own
extra metric. Set-up / postconfig steps: `execute` / `command` (pyautogui scripts too, run by the
sandbox's Python against the session's display when `make osworld-apps` installed pyautogui),
`launch`, `sleep`, `open`, `download`, `activate_window`, `close_window`.

A task is supported only if every step, getter and metric it uses is (`check_supported`): a
program it starts must be installed (`make osworld-apps DOMAINS=...`), a URL it downloads must have
a local copy, a metric's Python dependencies must be installed.

OSWorld tasks assume the user `user` with home /home/user; the sandbox has /home/user (the session's
home), and `echo password | sudo -S` / `sudo` are dropped (there is no sudo in a session's sandbox).

Task code never runs on the host: every command (set-up, `launch`, postconfig, result getters)
runs in the session's sandbox through the runner (`workers.envs.sandbox`). A `download` / `open`
of a local file reads only from the task's own bundle directory (`setup['bundle_dir']`, set by
whoever stored the task's files); a `file://` path anywhere else — /etc/shadow, the project tree,
another task's files, a symlink out — is refused with the reason. A web URL is served from the
bundle (`<bundle>/<host>/<path>` or `<bundle>/<file name>`) or the admin's mirror
(`OSWORLD_MIRROR_DIR/<host>/<path>`, the layout `wget -x` writes); with no local copy it is refused
with that reason (sessions have no network).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol
from urllib.parse import urlsplit

from workers.envs import osworld_vocab as vocab
from workers.envs.base import EnvError, EnvKind, TaskSpec
from workers.envs.sandbox import CommandResult

SETUP_TYPES = frozenset(
    {"execute", "command", "launch", "sleep", "open", "download", "activate_window", "close_window"}
)
# The platform's own getters (OSWorld's talk HTTP to its VM or download from the web).
OWN_GETTERS = frozenset({"vm_command_line", "vm_command_error", "vm_terminal_output", "cloud_file"})
OWN_METRICS = frozenset({"regex_match"})  # not OSWorld's; kept for the bundled examples
# OSWorld's infeasible tasks: solved when the agent gives up (computer_13 FAIL = our call_user).
INFEASIBLE = "infeasible"
OSWORLD_HOME = "/home/user"
MAX_SLEEP_S = 60.0
EXAMPLES_DIR = Path(__file__).with_name("osworld_examples")


class OSWorldError(EnvError):
    """A task uses something this platform cannot run, or its JSON is malformed."""


class CommandRunner(Protocol):
    """What set-up and evaluation need from an environment (DesktopEnv and TerminalEnv have it)."""

    session_dir: Path

    @property
    def command_home(self) -> str:
        """The session directory as commands see it (the sandbox maps it to /home/session)."""
        ...

    def run_command(
        self,
        command: str | list[str],
        shell: bool = False,
        timeout_s: float = 30.0,
        separate_stderr: bool = False,
    ) -> CommandResult: ...

    def spawn_command(self, command: str | list[str], shell: bool = False) -> None: ...


@dataclass
class MetricOutcome:
    func: str
    score: float
    result: str | None = None
    error: str | None = None


@dataclass
class EvalReport:
    score: float
    conj: Literal["and", "or"]
    metrics: list[MetricOutcome] = field(default_factory=list)


# parsing ---------------------------------------------------------------------------------------


def check_supported(
    task: dict[str, Any], kind: EnvKind | None = None, bundle_dir: Path | None = None
) -> list[str]:
    """Problems that stop `task` from running here, one readable line each; [] means supported.

    `kind` ('desktop' / 'terminal') adds the checks that depend on the environment kind."""
    problems = [f"missing field {key!r}" for key in ("id", "instruction", "evaluator") if key not in task]
    if not isinstance(task.get("config", []), list):
        problems.append("config must be a list of {type, parameters}")
        return problems
    for i, step in enumerate(task.get("config", [])):
        problems.extend(f"config[{i}]: {p}" for p in _step_problems(step, bundle_dir))
    evaluator = task.get("evaluator")
    if isinstance(evaluator, dict):
        problems.extend(_evaluator_problems(evaluator, bundle_dir))
        getters = [g.get("type") for g in _as_list(evaluator.get("result")) if isinstance(g, dict)]
        if kind == "desktop" and "vm_terminal_output" in getters:
            problems.append(
                "result getter 'vm_terminal_output' needs the terminal env (xterm text is not readable)"
            )
        if kind == "terminal" and any(s.get("type") in {"launch", "open"} for s in _all_steps(task)):
            problems.append("'launch' / 'open' steps need the desktop env")
    elif evaluator is not None:
        problems.append("evaluator must be an object")
    return problems


def task_spec_from_json(
    task: dict[str, Any], kind: EnvKind = "desktop", bundle_dir: Path | None = None
) -> TaskSpec:
    """A TaskSpec for DesktopEnv / TerminalEnv; raises OSWorldError listing unsupported features.
    `bundle_dir` holds the task's files (the only place local `download` sources may come from)."""
    problems = check_supported(task, kind, bundle_dir)
    if problems:
        raise OSWorldError(f"OSWorld task {task.get('id', '?')} is not supported: " + "; ".join(problems))
    # The same shape the task store keeps (webapp/store/importers/osworld.py).
    setup = {
        "osworld": task.get("config", []),
        "snapshot": task.get("snapshot", ""),
        "related_apps": task.get("related_apps", []),
        "source_url": task.get("source", ""),
    }
    if bundle_dir is not None:
        setup["bundle_dir"] = str(bundle_dir)
    return TaskSpec(
        task_id=str(task["id"]),
        instruction=str(task["instruction"]),
        kind=kind,
        source="osworld",
        setup=setup,
        verifier={"osworld": dict(task["evaluator"])},
    )


def setup_steps(spec: TaskSpec) -> list[dict[str, Any]]:
    """The OSWorld `config` steps of a task spec (stored as setup['osworld']; 'config' also read)."""
    steps = spec.setup.get("osworld", spec.setup.get("config", []))
    if not isinstance(steps, list):
        raise OSWorldError("OSWorld set-up must be a list of steps")
    return steps


def bundle_dir_of(spec: TaskSpec) -> Path | None:
    """The directory holding the task's own files (setup['bundle_dir']), if it has one."""
    value = spec.setup.get("bundle_dir")
    return Path(value) if isinstance(value, str) and value else None


def evaluator_of(spec: TaskSpec) -> dict[str, Any] | None:
    """The OSWorld evaluator of a task spec (verifier['osworld'], or a bare evaluator), or None."""
    evaluator = spec.verifier.get("osworld", spec.verifier if "func" in spec.verifier else None)
    if evaluator is not None and not isinstance(evaluator, dict):
        raise OSWorldError("OSWorld evaluator must be an object")
    return evaluator


def _all_steps(task: dict[str, Any]) -> list[dict[str, Any]]:
    evaluator = task.get("evaluator") or {}
    steps = list(task.get("config", [])) + list(evaluator.get("postconfig", []) or [])
    return [s for s in steps if isinstance(s, dict)]


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _step_problems(step: Any, bundle_dir: Path | None = None) -> list[str]:
    if not isinstance(step, dict) or "type" not in step:
        return ["each step needs a 'type'"]
    kind, params = step["type"], step.get("parameters", {})
    if not isinstance(params, dict):
        return [f"{kind} parameters must be an object"]
    if kind not in SETUP_TYPES:
        return [f"set-up step type {kind!r} is not supported (supported: {', '.join(sorted(SETUP_TYPES))})"]
    if kind in {"execute", "command", "launch"}:
        command = params.get("command")
        if not isinstance(command, (str, list)) or not command:
            return [f"{kind} needs a command"]
        if _is_focus_click(command):
            return []
        if "pyautogui" in str(command) and pyautogui_dir() is None:
            return [f"{kind} drives pyautogui, which is not installed for the sessions (make osworld-apps)"]
        return _missing_tools(command)
    if kind == "download":
        files = params.get("files", [])
        if not isinstance(files, list):
            return ["download needs a list of files"]
        return [
            p
            for f in files
            if isinstance(f, dict)
            for p in (
                [] if _local(str(f.get("url", ""))) else _url_problems(str(f.get("url", "")), bundle_dir)
            )
        ] + [
            f"download to {f.get('path')!r}: a Windows VM path (the sessions are Linux desktops)"
            for f in files
            if isinstance(f, dict) and _WINDOWS_PATH.match(str(f.get("path", "")))
        ]
    if kind == "open":
        path = params.get("path")
        if not isinstance(path, str) or not path:
            return ["open needs a path"]
        if _WINDOWS_PATH.match(path):
            return [f"open of {path!r}: a Windows VM path (the sessions are Linux desktops)"]
        return _missing_tools(_opener(Path(path)))
    if kind in {"activate_window", "close_window"}:
        if not isinstance(params.get("window_name"), str):
            return [f"{kind} needs a window_name"]
        return _missing_tools(["wmctrl"])
    return []


def _evaluator_problems(evaluator: dict[str, Any], bundle_dir: Path | None = None) -> list[str]:
    if evaluator.get("func") == INFEASIBLE:
        return []  # scored from the agent's last action, nothing to run
    problems: list[str] = []
    funcs = _as_list(evaluator.get("func"))
    results = _as_list(evaluator.get("result"))
    expected = _as_list(evaluator.get("expected")) if evaluator.get("expected") is not None else []
    if len(results) != len(funcs) or (expected and len(expected) != len(funcs)):
        problems.append("evaluator func, result and expected lists differ in length")
    if evaluator.get("conj", "and") not in {"and", "or"}:
        problems.append(f"evaluator conj {evaluator.get('conj')!r} is not 'and' or 'or'")
    options = evaluator.get("options")
    if options is not None and not isinstance(options, (dict, list)):
        problems.append("evaluator options must be an object or a list of objects")
    for func in funcs:
        if not isinstance(func, str) or not func:
            problems.append("evaluator func must name a metric")
        elif func not in OWN_METRICS:
            problem = vocab.metric_problem(func)
            if problem:
                problems.append(problem)
    for getter in [*results, *(e for e in expected if e is not None)]:
        problems.extend(_getter_problems(getter, bundle_dir))
    for i, step in enumerate(evaluator.get("postconfig", []) or []):
        problems.extend(f"postconfig[{i}]: {p}" for p in _step_problems(step, bundle_dir))
    return problems


def _getter_problems(getter: Any, bundle_dir: Path | None = None) -> list[str]:
    gtype = getter.get("type") if isinstance(getter, dict) else None
    if not isinstance(gtype, str):
        return ["each result / expected getter needs a 'type'"]
    if gtype in {"vm_command_line", "vm_command_error"}:
        return _missing_tools(getter.get("command", ""))
    if gtype == "cloud_file":
        paths = getter.get("path")
        return [p for url in _as_list(paths) for p in _url_problems(str(url), bundle_dir)]
    if gtype in OWN_GETTERS:
        return []
    problem = vocab.getter_problem(gtype)
    if problem:
        return [problem]
    if gtype == "vm_window_size" or gtype == "vm_wallpaper":
        return _missing_tools(["xdotool" if gtype == "vm_window_size" else "gsettings"])
    return []


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


_WINDOWS_PATH = re.compile(r"^[A-Za-z]:[\\/]")
_SUDO = re.compile(r"(echo\s+['\"]?password['\"]?\s*\|\s*)?\bsudo\s+(-S\s+)?")


def _local(url: str) -> bool:
    scheme = urlsplit(url).scheme
    return scheme in {"", "file"}


# local copies of web files ------------------------------------------------------------------------


def mirror_dir() -> Path | None:
    """The admin's local mirror of task files (OSWORLD_MIRROR_DIR, `<host>/<path>` inside)."""
    value = os.environ.get("OSWORLD_MIRROR_DIR", "")
    return Path(value) if value and Path(value).is_dir() else None


def pyautogui_dir() -> Path | None:
    """Where `make osworld-apps` installed pyautogui for the sessions' Python (OSWORLD_PY_DIR)."""
    path = Path(os.environ.get("OSWORLD_PY_DIR", "/opt/flywheel/osworld-py"))
    return path if (path / "pyautogui").is_dir() else None


def _url_candidates(url: str, bundle_dir: Path | None) -> list[tuple[Path, str]]:
    parts = urlsplit(url)
    tail = [p for p in parts.path.split("/") if p]
    if parts.scheme not in {"http", "https"} or not parts.hostname or not tail:
        return []
    if any(p in {".", ".."} or "\0" in p for p in [parts.hostname, *tail]):
        return []
    # `wget -x` keeps the query in the file name (Google Drive's links differ only there).
    relative = "/".join([parts.hostname, *tail]) + (f"?{parts.query}" if parts.query else "")
    out = []
    if bundle_dir is not None:
        out += [
            (bundle_dir, relative),
            (bundle_dir, "/".join([parts.hostname, *tail])),
            (bundle_dir, tail[-1]),
        ]
    mirror = mirror_dir()
    if mirror is not None:
        out.append((mirror, relative))
    return out


def local_copy(url: str, bundle_dir: Path | None) -> Path | None:
    """The bundle's or the mirror's copy of a web file, confined to that directory, or None."""
    from workers.envs.terminal.paths import PathOutsideSession, confine

    for root, relative in _url_candidates(url, bundle_dir):
        try:
            path = confine(root.resolve(), relative)
        except (ValueError, PathOutsideSession):
            continue
        if path.is_file():
            return path
    return None


def _url_problems(url: str, bundle_dir: Path | None = None) -> list[str]:
    if local_copy(url, bundle_dir) is not None:
        return []
    if bundle_dir is None and urlsplit(url).scheme in {"http", "https"} and mirror_dir() is None:
        where = "no local mirror is set (OSWORLD_MIRROR_DIR)"
    else:
        where = "neither the task's bundle nor the local mirror has a copy"
    return [f"{url!r} needs the network: {where}, and sessions have no network"]


# set-up ------------------------------------------------------------------------------------------


def run_setup(steps: list[dict[str, Any]], runner: CommandRunner, bundle_dir: Path | None = None) -> None:
    """Run set-up steps in order on `runner`; a failing step raises OSWorldError. Local files come
    only from `bundle_dir` (see the module docstring)."""
    # OSWorld's VM user has a ~/Desktop that many tasks write to.
    from workers.envs.terminal.paths import open_beneath

    os.close(open_beneath(runner.session_dir, "Desktop", os.O_RDONLY | os.O_DIRECTORY, make_parents=True))
    for i, step in enumerate(steps):
        problems = _step_problems(step, bundle_dir)
        if problems:
            raise OSWorldError(f"step {i}: {problems[0]}")
        _run_step(step["type"], step.get("parameters", {}), runner, i, bundle_dir)


def _run_step(
    kind: str, params: dict[str, Any], runner: CommandRunner, index: int, bundle_dir: Path | None
) -> None:
    if kind in {"execute", "command"} and _is_focus_click(params["command"]):
        return  # the VM's focusing click; sessions here start focused
    if kind in {"execute", "command"}:
        command = _rewrite_command(params["command"], runner)
        result = runner.run_command(*_as_osworld_shell(command, params.get("shell")), timeout_s=60.0)
        if result.timed_out:
            raise OSWorldError(f"step {index}: {kind} timed out")
        # OSWorld ignores set-up exit codes (commands like `rm -f` or `pkill` often 'fail'); so do we.
    elif kind == "launch":
        command = _rewrite_command(params["command"], runner)
        if "libreoffice" in str(command) or "soffice" in str(command):
            _prepare_libreoffice(runner)
        runner.spawn_command(command, shell=bool(params.get("shell", False)))
    elif kind == "sleep":
        seconds = float(params.get("seconds", 0))
        if not 0 <= seconds <= MAX_SLEEP_S:
            raise OSWorldError(f"step {index}: sleep of {seconds}s is outside 0..{MAX_SLEEP_S:g}")
        time.sleep(seconds)
    elif kind == "download":
        for item in params.get("files", []):
            url = str(item.get("url", ""))
            if _local(url):
                source = _bundle_file(bundle_dir, url, index)
            else:
                found = local_copy(url, bundle_dir)
                if found is None:
                    raise OSWorldError(f"step {index}: download of {_url_problems(url, bundle_dir)[0]}")
                source = found
            _copy_into_session(runner, source, str(item.get("path", "")))
    elif kind == "open":
        path = _session_path(runner, params["path"])
        inside = f"{runner.command_home}/{path.relative_to(runner.session_dir.resolve())}"
        opener = _opener(path)
        if opener[0] == "libreoffice":
            _prepare_libreoffice(runner)
        runner.spawn_command([*opener, inside])
        _wait_for_file_window(runner, path)
    elif kind in {"activate_window", "close_window"}:
        flag = "-a" if kind == "activate_window" else "-c"
        argv = [
            "wmctrl",
            *(["-x"] if params.get("by_class") else []),
            *(["-F"] if params.get("strict") else []),
        ]
        deadline = time.monotonic() + 10.0
        while True:  # the window may still be mapping (OSWorld's server retries as well)
            result = runner.run_command([*argv, flag, str(params["window_name"])], timeout_s=10.0)
            if result.ok or time.monotonic() > deadline:
                break
            time.sleep(0.3)
        if not result.ok:
            raise OSWorldError(f"step {index}: {kind}: no window named {params['window_name']!r}")


# OSWorld's VM image has LibreOffice set up: no first-start wizard or tip, and saving in a
# Microsoft format without the "keep current format?" question (its tasks save .xlsx with Ctrl+S).
_LIBREOFFICE_PROFILE = """<?xml version="1.0" encoding="UTF-8"?>
<oor:items xmlns:oor="http://openoffice.org/2001/registry" xmlns:xs="http://www.w3.org/2001/XMLSchema" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
<item oor:path="/org.openoffice.Office.Common/Save/Document"><prop oor:name="WarnAlienFormat" oor:op="fuse"><value>false</value></prop></item>
<item oor:path="/org.openoffice.Setup/Office"><prop oor:name="ooSetupInstCompleted" oor:op="fuse"><value>true</value></prop></item>
<item oor:path="/org.openoffice.Office.Common/Misc"><prop oor:name="FirstRun" oor:op="fuse"><value>false</value></prop></item>
<item oor:path="/org.openoffice.Office.Common/Misc"><prop oor:name="ShowTipOfTheDay" oor:op="fuse"><value>false</value></prop></item>
<item oor:path="/org.openoffice.Office.Recovery/RecoveryInfo"><prop oor:name="Enabled" oor:op="fuse"><value>false</value></prop></item>
</oor:items>
"""


def _prepare_libreoffice(runner: CommandRunner) -> None:
    """The session's LibreOffice profile as OSWorld's VM has it (kept if the session has one)."""
    from workers.envs.terminal.paths import open_beneath

    relative = ".config/libreoffice/4/user/registrymodifications.xcu"
    try:
        fd = open_beneath(
            runner.session_dir, relative, os.O_WRONLY | os.O_CREAT | os.O_EXCL, make_parents=True
        )
    except FileExistsError:
        return
    with os.fdopen(fd, "w") as out:
        owner = runner.session_dir.stat()
        os.fchown(out.fileno(), owner.st_uid, owner.st_gid)
        out.write(_LIBREOFFICE_PROFILE)


def _wait_for_file_window(runner: CommandRunner, path: Path, timeout_s: float = 60.0) -> None:
    """OSWorld's `open` returns once the file's window shows; wait for a window whose title names it."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        result = runner.run_command(["wmctrl", "-l"], timeout_s=5.0)
        if not result.ok:
            return  # no wmctrl: nothing to wait on
        if path.name in result.output or path.stem in result.output:
            return
        time.sleep(0.5)
    raise OSWorldError(f"open {path.name}: no window showed it within {timeout_s:g}s")


def _bundle_file(bundle_dir: Path | None, url: str, index: int) -> Path:
    """The real path of a local `download` source; it must lie in the task's bundle directory."""
    if bundle_dir is None:
        raise OSWorldError(
            f"step {index}: download of {url!r}: this task has no bundle of files to copy from"
        )
    from workers.envs.terminal.paths import PathOutsideSession, confine

    path = urlsplit(url).path
    root = bundle_dir.resolve()
    try:
        relative = str(Path(path).resolve().relative_to(root)) if path.startswith("/") else path
        source = confine(root, relative)
    except (ValueError, PathOutsideSession):
        raise OSWorldError(
            f"step {index}: download of {url!r} refused: local files must lie in the task's bundle {bundle_dir}"
        ) from None
    if not source.is_file():
        raise OSWorldError(f"step {index}: download of {url!r}: no such file in the task's bundle")
    return source


def _copy_into_session(runner: CommandRunner, source: Path, path: str) -> None:
    """Copy a bundle file to `path` in the session, never through a symlink the session planted;
    the copy (and any directory made for it) belongs to the session's user."""
    from workers.envs.terminal.paths import open_beneath

    target = _session_path(runner, path)  # refuses paths outside, with the reason
    relative = str(target.relative_to(runner.session_dir.resolve()))
    fd = open_beneath(runner.session_dir, relative, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, make_parents=True)
    with os.fdopen(fd, "wb") as out, source.open("rb") as src:
        owner = runner.session_dir.stat()
        os.fchown(out.fileno(), owner.st_uid, owner.st_gid)
        shutil.copyfileobj(src, out)


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


def _rewrite_command(command: str | list[str], runner: CommandRunner) -> str | list[str]:
    """Map OSWorld's VM onto the session: `sudo` dropped, `python` is python3 (with pyautogui on
    its path), `google-chrome` is Chromium (with the session's flags)."""
    if isinstance(command, str):
        command = _SUDO.sub("", command)
        return re.sub(r"(^|[\s;&|(])python(?=\s)", r"\1python3", command)
    parts = [str(part) for part in command]
    if parts[:1] == ["sudo"]:
        parts = parts[1:]
    if parts and parts[0] in _PROGRAM_ALIASES:
        parts[0] = _PROGRAM_ALIASES[parts[0]]
        if parts[0] == "chromium":
            from workers.envs.desktop.apps import CHROMIUM_FLAGS

            parts[1:1] = list(CHROMIUM_FLAGS)
    return parts


def _as_osworld_shell(command: str | list[str], shell: Any) -> tuple[str | list[str], bool]:
    """OSWorld's VM server runs `shell: true` commands with Python's subprocess, i.e. /bin/sh (dash),
    whose `echo` and quoting differ from bash's; tasks depend on that, so do the same here."""
    if shell and isinstance(command, str):
        return ["/bin/sh", "-c", command], False
    if shell:
        return ["/bin/sh", "-c", " ".join(command)], False
    return command, False


def _session_path(runner: CommandRunner, path: str) -> Path:
    """A set-up path ('/home/user/x', '~/x' or relative) as a real path in the session directory."""
    from workers.envs.terminal.paths import confine

    relative = path[len(OSWORLD_HOME) :].lstrip("/") if path.startswith(OSWORLD_HOME) else path
    return confine(runner.session_dir, relative.removeprefix("~/") or ".")


# evaluation --------------------------------------------------------------------------------------


def evaluate(evaluator: dict[str, Any], runner: CommandRunner, bundle_dir: Path | None = None) -> float:
    return evaluate_report(evaluator, runner, bundle_dir).score


def evaluate_report(
    evaluator: dict[str, Any], runner: CommandRunner, bundle_dir: Path | None = None
) -> EvalReport:
    """Run postconfig, every (getter, metric) pair, and combine the scores as OSWorld does:
    'and' → 0 as soon as one metric is 0, else the mean; 'or' → 1 as soon as one is 1, else the max.
    As in OSWorld, giving up (FAIL, our call_user) scores 1 on an infeasible task and 0 elsewhere."""
    problems = _evaluator_problems(evaluator, bundle_dir)
    if problems:
        raise OSWorldError("; ".join(problems))
    last = getattr(runner, "last_action_kind", None)
    if evaluator.get("func") == INFEASIBLE:
        score = 1.0 if last == "call_user" else 0.0
        return EvalReport(score, "and", [MetricOutcome(INFEASIBLE, score, result=str(last))])
    run_setup(evaluator.get("postconfig", []) or [], runner, bundle_dir)
    conj = evaluator.get("conj", "and")
    report = EvalReport(score=0.0, conj=conj)
    if last == "call_user":
        report.metrics.append(MetricOutcome("FAIL", 0.0, error="the agent gave up on a feasible task"))
        return report
    funcs = _as_list(evaluator["func"])
    results = _as_list(evaluator["result"])
    expected = _as_list(evaluator.get("expected")) if evaluator.get("expected") else [None] * len(funcs)
    raw_options = evaluator.get("options")
    options = raw_options if isinstance(raw_options, list) else [raw_options or {}] * len(funcs)
    with tempfile.TemporaryDirectory(prefix="flywheel-osworld-eval-") as cache:
        adapter = vocab.SessionAdapter(runner, Path(cache))
        for func, getter, exp, opts in zip(funcs, results, expected, options, strict=True):
            outcome = _one_metric(func, getter, exp, opts or {}, runner, adapter, bundle_dir)
            report.metrics.append(outcome)
            if conj == "and" and outcome.score == 0.0:
                return report
            if conj == "or" and outcome.score == 1.0:
                report.score = 1.0
                return report
    scores = [m.score for m in report.metrics]
    report.score = sum(scores) / len(scores) if conj == "and" else max(scores)
    return report


def _one_metric(
    func: str,
    getter: dict[str, Any],
    expected: dict[str, Any] | None,
    options: dict[str, Any],
    runner: CommandRunner,
    adapter: vocab.SessionAdapter,
    bundle_dir: Path | None,
) -> MetricOutcome:
    try:
        result = _get(getter, runner, adapter, bundle_dir)
        exp = _get(expected, runner, adapter, bundle_dir) if expected else None
    except OSWorldError as exc:
        return MetricOutcome(func, 0.0, error=str(exc))
    except FileNotFoundError as exc:  # OSWorld scores a missing file 0
        return MetricOutcome(func, 0.0, error=f"file not found: {exc}")
    fn = regex_match if func == "regex_match" else vocab.metric(func)
    try:
        value = fn(result, exp, **options) if expected else fn(result, **options)
    except Exception as exc:  # OSWorld's metrics raise on files the agent left malformed
        return MetricOutcome(func, 0.0, result=_shown(result), error=f"{func} failed: {exc!r}"[:500])
    try:
        score = float(value)
    except (TypeError, ValueError):
        return MetricOutcome(func, 0.0, result=_shown(result), error=f"{func} returned {value!r}")
    return MetricOutcome(func, score, result=_shown(result))


def _shown(value: Any) -> str | None:
    return None if value is None else str(value)[:2000]


def _get(
    getter: dict[str, Any], runner: CommandRunner, adapter: vocab.SessionAdapter, bundle_dir: Path | None
) -> Any:
    gtype = getter["type"]
    if gtype == "vm_terminal_output":
        transcript = getattr(runner, "terminal_transcript", None)
        if transcript is None:
            raise OSWorldError("this environment has no terminal output")
        return transcript()
    if gtype in {"vm_command_line", "vm_command_error"}:
        command = _rewrite_command(getter.get("command", ""), runner)
        # OSWorld's getters return stdout (vm_command_line) or stderr (vm_command_error), never both.
        result = runner.run_command(
            *_as_osworld_shell(command, getter.get("shell")), timeout_s=30.0, separate_stderr=True
        )
        if result.timed_out:
            raise OSWorldError("result command timed out")
        return result.stderr if gtype == "vm_command_error" else result.output
    if gtype == "cloud_file":
        return _cloud_file(getter, adapter, bundle_dir)
    return vocab.getter(gtype)(adapter, getter)


def _cloud_file(config: dict[str, Any], adapter: vocab.SessionAdapter, bundle_dir: Path | None) -> Any:
    """OSWorld's `get_cloud_file`, offline: each URL from the bundle or the mirror into the cache."""
    multi = bool(config.get("multi", False))
    paths = _as_list(config["path"]) if multi else [config["path"]]
    dests = _as_list(config["dest"]) if multi else [config["dest"]]
    gives = set(config.get("gives", [0]))
    out = []
    for i, (url, dest) in enumerate(zip(paths, dests, strict=False)):
        source = local_copy(str(url), bundle_dir)
        if source is None:
            raise OSWorldError(_url_problems(str(url), bundle_dir)[0])
        target = Path(adapter.cache_dir) / Path(str(dest)).name
        shutil.copyfile(source, target)
        if i in gives:
            out.append(str(target))
    return out[0] if len(out) == 1 else out


def regex_match(result: str, rules: dict[str, Any]) -> float:
    """rules {'pattern': ..., 'flags': 'im'?}: re.search over the result (multiline by default)."""
    flags = re.MULTILINE
    for letter in rules.get("flags", ""):
        flags |= {"i": re.IGNORECASE, "s": re.DOTALL, "m": re.MULTILINE}[letter]
    try:
        return 1.0 if re.search(rules["pattern"], result, flags) else 0.0
    except (KeyError, TypeError, re.error):
        return 0.0


def load_examples() -> list[dict[str, Any]]:
    """The bundled example `os` tasks (workers/envs/osworld_examples/*.json)."""
    import json

    return [json.loads(p.read_text()) for p in sorted(EXAMPLES_DIR.glob("*.json"))]
