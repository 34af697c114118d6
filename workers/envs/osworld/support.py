"""Parsing an OSWorld task and saying, one readable line each, what stops it from running here."""

from __future__ import annotations

import functools
import re
import subprocess
from pathlib import Path
from typing import Any

from workers.envs.base import EnvKind, TaskSpec
from workers.envs.osworld import a11y, chrome, vocab
from workers.envs.osworld.commands import _is_focus_click, _missing_tools, _opener, _session_limits
from workers.envs.osworld.common import (
    INFEASIBLE,
    OWN_GETTERS,
    OWN_METRICS,
    SETUP_TYPES,
    OSWorldError,
    _as_list,
)
from workers.envs.osworld.files import _WINDOWS_PATH, _local, _url_problems, pyautogui_dir


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
        for gtype in sorted({"accessibility_tree", "active_url_from_accessTree"} & set(getters)):
            if kind == "terminal":
                problems.append(f"result getter {gtype!r} needs the desktop env")
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
        if kind != "launch" and (bad := _execute_option_problems(params)):
            return bad
        if "pyautogui" in str(command) and pyautogui_dir() is None:
            return [f"{kind} drives pyautogui, which is not installed for the sessions (make osworld-apps)"]
        return _session_limits(command) + _missing_tools(command)
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
    if kind in {"chrome_open_tabs", "chrome_close_tabs"}:
        urls = params.get("urls_to_open" if kind == "chrome_open_tabs" else "urls_to_close")
        if not isinstance(urls, list) or not all(isinstance(u, str) for u in urls):
            return [f"{kind} needs a list of URLs"]
        return [p for u in urls for p in chrome.url_problems(u)] if kind == "chrome_open_tabs" else []
    if kind in {"activate_window", "close_window"}:
        if not isinstance(params.get("window_name"), str):
            return [f"{kind} needs a window_name"]
        return _missing_tools(["wmctrl"])
    return []


_MAX_EXECUTE_TIMEOUT_S = 600.0


def _execute_option_problems(params: dict[str, Any]) -> list[str]:
    """desktop-env's execute options: `stdout` / `stderr` (a file name in the evaluator's cache),
    `until` ({returncode, stdout, stderr}), `timeout` (seconds), `shell`."""
    problems = []
    for key in ("stdout", "stderr"):
        name = params.get(key)
        if name not in (None, "") and (
            not isinstance(name, str) or Path(name).name != name or name in {".", ".."}
        ):
            problems.append(f"{key} must name a file of the evaluator's cache, not {name!r}")
    until = params.get("until")
    if until is not None and (
        not isinstance(until, dict) or not set(until) <= {"returncode", "stdout", "stderr"}
    ):
        problems.append("until must be an object of returncode / stdout / stderr")
    timeout = params.get("timeout")
    if timeout is not None and (
        isinstance(timeout, bool)
        or not isinstance(timeout, (int, float))
        or not 0 < timeout <= _MAX_EXECUTE_TIMEOUT_S
    ):
        problems.append(f"timeout must be seconds in (0, {_MAX_EXECUTE_TIMEOUT_S:g}]")
    return problems


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
    for func, getter, rule in zip(funcs, results, expected or [None] * len(funcs), strict=False):
        problems.extend(_removal_problems(func, getter, rule))
    for i, step in enumerate(evaluator.get("postconfig", []) or []):
        problems.extend(f"postconfig[{i}]: {p}" for p in _step_problems(step, bundle_dir))
    return problems


_DPKG_GREP = re.compile(r"^\s*dpkg\s+-l\s*\|\s*grep\s+([A-Za-z0-9.+-]+)\s*$")


def _removal_problems(func: Any, getter: Any, rule: Any) -> list[str]:
    """A task that removes a package its VM has (ddc75b62: `dpkg -l | grep mahjongg` must not
    list it) passes with no action where the package is not installed: it needs it installed."""
    if func != "check_include_exclude" or not isinstance(getter, dict) or not isinstance(rule, dict):
        return []
    match = (
        _DPKG_GREP.match(str(getter.get("command", ""))) if getter.get("type") == "vm_command_line" else None
    )
    excluded = (rule.get("rules") or {}).get("exclude") or [] if isinstance(rule.get("rules"), dict) else []
    if match is None or match.group(1) not in excluded:
        return []
    name = match.group(1)
    if any(name in package for package in _installed_packages()):
        return []
    return [
        f"removes the package {name!r}, which OSWorld's VM has and this host has not installed "
        "(with it absent the task passes with no action)"
    ]


@functools.cache
def _installed_packages() -> frozenset[str]:
    """The Debian packages installed on this host (the sandboxes see its /usr)."""
    try:
        out = subprocess.run(
            ["dpkg-query", "-W", "-f", "${Package}\n"], capture_output=True, text=True, timeout=20
        )
    except (OSError, subprocess.TimeoutExpired):
        return frozenset()
    return frozenset(out.stdout.split())


# desktop-env getters and the program they need in the session (vm_terminal_output: xprop finds the
# active window's terminal).
_GETTER_TOOLS = {"vm_window_size": "xdotool", "vm_wallpaper": "gsettings", "vm_terminal_output": "xprop"}


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
    if gtype in _GETTER_TOOLS:
        return _missing_tools([_GETTER_TOOLS[gtype]])
    if gtype in {"accessibility_tree", "active_url_from_accessTree"} and (why := a11y.unavailable()):
        return [why]
    return []
