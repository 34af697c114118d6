"""OSWorld task JSON (SPEC §5): parse, say what is unsupported, run set-up, evaluate.

Supported here: set-up / postconfig steps `execute`, `command`, `launch`, `sleep`, and `open` /
`download` of local files; result getters `vm_command_line` (stdout), `vm_command_error`
(stderr) and, on the terminal env, `vm_terminal_output` (its transcript); `infeasible` (1.0 when
the agent's last action was call_user, OSWorld's FAIL); expected `rule` with metrics `exact_match`, `check_include_exclude`, `is_in_list`
(contains), `regex_match`, combined over lists with `conj` 'and' / 'or' as OSWorld does.
OSWorld tasks assume the user `user` with home /home/user; commands and paths here see that
prefix rewritten to the session's home, so real `os` tasks address the session directory, and
`echo password | sudo -S` / `sudo` dropped (there is no sudo in a session's sandbox).

Task code never runs on the host: every command (set-up, `launch`, postconfig, result getters)
runs in the session's sandbox through the runner (`workers.envs.sandbox`). A `download` / `open`
of a local file reads only from the task's own bundle directory (`setup['bundle_dir']`, set by
whoever stored the task's files); a `file://` path anywhere else — /etc/shadow, the project tree,
another task's files, a symlink out — is refused with the reason.
The focusing click most real tasks start with (a pyautogui script of only clicks and sleeps) is
skipped; any other pyautogui step is unsupported.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol
from urllib.parse import urlsplit

from workers.envs.base import EnvError, EnvKind, TaskSpec
from workers.envs.sandbox import CommandResult

SETUP_TYPES = frozenset({"execute", "command", "launch", "sleep", "open", "download"})
GETTER_TYPES = frozenset({"vm_command_line", "vm_command_error", "vm_terminal_output"})
METRICS = frozenset({"exact_match", "check_include_exclude", "is_in_list", "regex_match"})
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


def check_supported(task: dict[str, Any], kind: EnvKind | None = None) -> list[str]:
    """Problems that stop `task` from running here, one readable line each; [] means supported.

    `kind` ('desktop' / 'terminal') adds the checks that depend on the environment kind."""
    problems = [f"missing field {key!r}" for key in ("id", "instruction", "evaluator") if key not in task]
    if not isinstance(task.get("config", []), list):
        problems.append("config must be a list of {type, parameters}")
        return problems
    for i, step in enumerate(task.get("config", [])):
        problems.extend(f"config[{i}]: {p}" for p in _step_problems(step))
    evaluator = task.get("evaluator")
    if isinstance(evaluator, dict):
        problems.extend(_evaluator_problems(evaluator))
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
    problems = check_supported(task, kind)
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


def _step_problems(step: Any) -> list[str]:
    if not isinstance(step, dict) or "type" not in step:
        return ["each step needs a 'type'"]
    kind, params = step["type"], step.get("parameters", {})
    if kind not in SETUP_TYPES:
        return [f"set-up step type {kind!r} is not supported (supported: {', '.join(sorted(SETUP_TYPES))})"]
    if kind in {"execute", "command", "launch"}:
        command = params.get("command")
        if not isinstance(command, (str, list)) or not command:
            return [f"{kind} needs a command"]
        if "pyautogui" in str(command) and not _is_focus_click(command):
            return [f"{kind} drives pyautogui inside the VM, which this platform does not provide"]
        return _missing_tools(command)
    if kind == "download":
        return [
            f"download of {f.get('url')!r} needs the network"
            for f in params.get("files", [])
            if not _local(f.get("url", ""))
        ]
    if kind == "open" and not params.get("path"):
        return ["open needs a path"]
    return []


def _evaluator_problems(evaluator: dict[str, Any]) -> list[str]:
    if evaluator.get("func") == INFEASIBLE:
        return []  # scored from the agent's last action, nothing to run
    problems: list[str] = []
    funcs = _as_list(evaluator.get("func"))
    results = _as_list(evaluator.get("result"))
    expected = _as_list(evaluator.get("expected"))
    if len(results) != len(funcs) or len(expected) != len(funcs):
        problems.append("evaluator func, result and expected lists differ in length")
    if evaluator.get("conj", "and") not in {"and", "or"}:
        problems.append(f"evaluator conj {evaluator.get('conj')!r} is not 'and' or 'or'")
    for func in funcs:
        if func not in METRICS:
            problems.append(f"metric {func!r} is not supported (supported: {', '.join(sorted(METRICS))})")
    for getter in results:
        gtype = getter.get("type") if isinstance(getter, dict) else None
        if gtype not in GETTER_TYPES:
            problems.append(
                f"result getter {gtype!r} is not supported (supported: {', '.join(sorted(GETTER_TYPES))})"
            )
        elif isinstance(getter, dict) and gtype != "vm_terminal_output":
            problems.extend(_missing_tools(getter.get("command", "")))
    for exp in expected:
        if not isinstance(exp, dict) or exp.get("type") != "rule" or not isinstance(exp.get("rules"), dict):
            problems.append("expected must be {'type': 'rule', 'rules': {...}}")
    for i, step in enumerate(evaluator.get("postconfig", []) or []):
        problems.extend(f"postconfig[{i}]: {p}" for p in _step_problems(step))
    return problems


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
)


def _missing_tools(command: str | list[str]) -> list[str]:
    text = command if isinstance(command, str) else " ".join(str(c) for c in command)
    words = set(re.findall(r"[A-Za-z][\w.-]*", text))
    return [
        f"needs {tool!r}, which is not installed here"
        for tool in _VM_TOOLS
        if tool in words and shutil.which(tool) is None
    ]


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
    return all(_FOCUS_STATEMENT.fullmatch(part.strip()) for part in re.split(r"[;\n]", str(code)))


_SUDO = re.compile(r"(echo\s+['\"]?password['\"]?\s*\|\s*)?\bsudo\s+(-S\s+)?")


def _local(url: str) -> bool:
    scheme = urlsplit(url).scheme
    return scheme in {"", "file"}


# set-up ------------------------------------------------------------------------------------------


def run_setup(steps: list[dict[str, Any]], runner: CommandRunner, bundle_dir: Path | None = None) -> None:
    """Run set-up steps in order on `runner`; a failing step raises OSWorldError. Local files come
    only from `bundle_dir` (see the module docstring)."""
    # OSWorld's VM user has a ~/Desktop that many tasks write to.
    from workers.envs.terminal.paths import open_beneath

    os.close(open_beneath(runner.session_dir, "Desktop", os.O_RDONLY | os.O_DIRECTORY, make_parents=True))
    for i, step in enumerate(steps):
        problems = _step_problems(step)
        if problems:
            raise OSWorldError(f"step {i}: {problems[0]}")
        _run_step(step["type"], step.get("parameters", {}), runner, i, bundle_dir)


def _run_step(
    kind: str, params: dict[str, Any], runner: CommandRunner, index: int, bundle_dir: Path | None
) -> None:
    if kind in {"execute", "command"} and _is_focus_click(params["command"]):
        return  # the VM's focusing click; sessions here start focused
    if kind in {"execute", "command"}:
        command = _rewrite_home(params["command"], runner)
        result = runner.run_command(command, shell=bool(params.get("shell", False)), timeout_s=60.0)
        if result.timed_out:
            raise OSWorldError(f"step {index}: {kind} timed out")
        # OSWorld ignores set-up exit codes (commands like `rm -f` or `pkill` often 'fail'); so do we.
    elif kind == "launch":
        runner.spawn_command(_rewrite_home(params["command"], runner), shell=bool(params.get("shell", False)))
    elif kind == "sleep":
        seconds = float(params.get("seconds", 0))
        if not 0 <= seconds <= MAX_SLEEP_S:
            raise OSWorldError(f"step {index}: sleep of {seconds}s is outside 0..{MAX_SLEEP_S:g}")
        time.sleep(seconds)
    elif kind == "download":
        for item in params.get("files", []):
            source = _bundle_file(bundle_dir, str(item.get("url", "")), index)
            _copy_into_session(runner, source, str(item.get("path", "")))
    elif kind == "open":
        path = _session_path(runner, params["path"])
        inside = f"{runner.command_home}/{path.relative_to(runner.session_dir.resolve())}"
        runner.spawn_command([*_opener(path), inside])


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


def _opener(path: Path) -> list[str]:
    """Which local app opens a file: the browser for web pages and PDFs, the editor otherwise."""
    if path.suffix.lower() in {".html", ".htm", ".pdf", ".svg"}:
        from workers.envs.desktop.apps import CHROMIUM_FLAGS

        return ["chromium", *CHROMIUM_FLAGS]
    return ["mousepad", "--disable-server"]


def _rewrite_home(command: str | list[str], runner: CommandRunner) -> str | list[str]:
    """Map /home/user to the session home and drop sudo (see the module docstring)."""
    home = runner.command_home
    if isinstance(command, str):
        return _SUDO.sub("", command.replace(OSWORLD_HOME, home))
    parts = [str(part).replace(OSWORLD_HOME, home) for part in command]
    return parts[1:] if parts[:1] == ["sudo"] else parts


def _session_path(runner: CommandRunner, path: str) -> Path:
    """A set-up path ('/home/user/x', '~/x' or relative) as a real path in the session directory."""
    from workers.envs.terminal.paths import confine

    relative = path[len(OSWORLD_HOME) :].lstrip("/") if path.startswith(OSWORLD_HOME) else path
    return confine(runner.session_dir, relative or ".")


# evaluation --------------------------------------------------------------------------------------


def evaluate(evaluator: dict[str, Any], runner: CommandRunner, bundle_dir: Path | None = None) -> float:
    return evaluate_report(evaluator, runner, bundle_dir).score


def evaluate_report(
    evaluator: dict[str, Any], runner: CommandRunner, bundle_dir: Path | None = None
) -> EvalReport:
    """Run postconfig, every (getter, metric) pair, and combine the scores as OSWorld does:
    'and' → 0 as soon as one metric is 0, else the mean; 'or' → 1 as soon as one is 1, else the max."""
    problems = _evaluator_problems(evaluator)
    if problems:
        raise OSWorldError("; ".join(problems))
    if evaluator.get("func") == INFEASIBLE:
        last = getattr(runner, "last_action_kind", None)
        score = 1.0 if last == "call_user" else 0.0
        return EvalReport(score, "and", [MetricOutcome(INFEASIBLE, score, result=str(last))])
    run_setup(evaluator.get("postconfig", []) or [], runner, bundle_dir)
    conj = evaluator.get("conj", "and")
    report = EvalReport(score=0.0, conj=conj)
    funcs, results, expected = (_as_list(evaluator[k]) for k in ("func", "result", "expected"))
    for func, getter, exp in zip(funcs, results, expected, strict=True):
        outcome = _one_metric(func, getter, exp["rules"], evaluator.get("options"), runner)
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
    func: str, getter: dict[str, Any], rules: dict[str, Any], options: Any, runner: CommandRunner
) -> MetricOutcome:
    if getter["type"] == "vm_terminal_output":
        transcript = getattr(runner, "terminal_transcript", None)
        if transcript is None:
            return MetricOutcome(func, 0.0, error="this environment has no terminal output")
        return _score(func, transcript(), rules)
    command = _rewrite_home(getter.get("command", ""), runner)
    # OSWorld's getters return stdout (vm_command_line) or stderr (vm_command_error), never both.
    result = runner.run_command(
        command, shell=bool(getter.get("shell", False)), timeout_s=30.0, separate_stderr=True
    )
    if result.timed_out:
        return MetricOutcome(func, 0.0, error="result command timed out")
    text = result.stderr if getter["type"] == "vm_command_error" else result.output
    return _score(func, text, rules)


def _score(func: str, text: str, rules: dict[str, Any]) -> MetricOutcome:
    try:
        score = _METRIC_FUNCS[func](text, rules)
    except (KeyError, TypeError, re.error) as exc:
        return MetricOutcome(func, 0.0, result=text, error=f"bad rules for {func}: {exc}")
    return MetricOutcome(func, score, result=text)


def exact_match(result: str, rules: dict[str, Any]) -> float:
    return 1.0 if result == rules["expected"] else 0.0


def check_include_exclude(result: str, rules: dict[str, Any]) -> float:
    include = rules.get("include", [])
    exclude = rules.get("exclude", [])
    return 1.0 if all(s in result for s in include) and not any(s in result for s in exclude) else 0.0


def is_in_list(result: str, rules: dict[str, Any]) -> float:
    """OSWorld's contains check: the expected string occurs in the result."""
    return 1.0 if rules["expected"] in result else 0.0


def regex_match(result: str, rules: dict[str, Any]) -> float:
    """rules {'pattern': ..., 'flags': 'im'?}: re.search over the result (multiline by default)."""
    flags = re.MULTILINE
    for letter in rules.get("flags", ""):
        flags |= {"i": re.IGNORECASE, "s": re.DOTALL, "m": re.MULTILINE}[letter]
    return 1.0 if re.search(rules["pattern"], result, flags) else 0.0


_METRIC_FUNCS = {
    "exact_match": exact_match,
    "check_include_exclude": check_include_exclude,
    "is_in_list": is_in_list,
    "regex_match": regex_match,
}


def load_examples() -> list[dict[str, Any]]:
    """The bundled example `os` tasks (workers/envs/osworld_examples/*.json)."""
    import json

    return [json.loads(p.read_text()) for p in sorted(EXAMPLES_DIR.glob("*.json"))]
