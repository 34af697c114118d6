"""Running OSWorld's set-up (and postconfig) steps in the session's sandbox."""

from __future__ import annotations

import functools
import json
import logging
import os
import re
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from workers.envs.base import EnvError
from workers.envs.osworld import chrome
from workers.envs.osworld.commands import _as_osworld_shell, _is_focus_click, _opener, _rewrite_command
from workers.envs.osworld.common import MAX_SLEEP_S, CommandRunner, OSWorldError
from workers.envs.osworld.files import (
    _bundle_file,
    _copy_into_session,
    _local,
    _session_path,
    _url_problems,
    local_copy,
)
from workers.envs.osworld.support import _step_problems

log = logging.getLogger(__name__)


def run_setup(
    steps: list[dict[str, Any]],
    runner: CommandRunner,
    bundle_dir: Path | None = None,
    *,
    postconfig: bool = False,
    cache_dir: Path | None = None,
) -> None:
    """Run set-up steps in order on `runner`; a failing step raises OSWorldError. Local files come
        only from `bundle_dir` (see the module docstring). A task's set-up (not an evaluator's
        `postconfig`) first gives the home what OSWorld's VM has before any step runs (`prepare_home`)
        and the evaluation waits for the apps it started (`workers.envs.osworld.settle`). An `execute`'s
    `stdout` / `stderr` file goes to `cache_dir` (the evaluator's cache, as desktop-env's controller
    writes it) or, during a set-up, is kept on the runner until the evaluation's cache exists."""
    if not postconfig:
        prepare_home(runner)
        runner.osworld_outputs = {}  # type: ignore[attr-defined]
    for i, step in enumerate(steps):
        problems = _step_problems(step, bundle_dir)
        if problems:
            raise OSWorldError(f"step {i}: {problems[0]}")
        _run_step(step["type"], step.get("parameters", {}), runner, i, bundle_dir, cache_dir)


def _execute(
    params: dict[str, Any], runner: CommandRunner, index: int, kind: str, cache_dir: Path | None
) -> None:
    """desktop-env's controller `_execute_setup`: run the command (its `shell`), write its output to
    the cache file named by `stdout` / `stderr`, and with `until` ({returncode|stdout|stderr})
    run it again every 0.3 s until one holds (here at most `timeout` s, else the step fails by
    name; OSWorld's would retry forever). Exit codes are otherwise ignored, as OSWorld does (`rm -f`
    or `pkill` often 'fail')."""
    command = _rewrite_command(params["command"], runner)
    until = params.get("until") or {}
    timeout_s = float(params.get("timeout", EXECUTE_TIMEOUT_S))
    deadline = time.monotonic() + timeout_s
    while True:
        result = runner.run_command(
            *_as_osworld_shell(command, params.get("shell")),
            timeout_s=max(1.0, deadline - time.monotonic()),
            separate_stderr=True,
        )
        if result.timed_out:
            raise OSWorldError(f"step {index}: {kind} timed out after {timeout_s:g}s")
        if not until or _until_holds(until, result):
            break
        if time.monotonic() + 0.3 >= deadline:
            raise OSWorldError(f"step {index}: {kind}: 'until' {until} did not hold within {timeout_s:g}s")
        time.sleep(0.3)
    for key, text in (("stdout", result.output), ("stderr", result.stderr)):
        name = params.get(key)
        if name:
            _keep_output(runner, str(name), text or "", cache_dir)


EXECUTE_TIMEOUT_S = 60.0


def _until_holds(until: dict[str, Any], result: Any) -> bool:
    return bool(
        ("returncode" in until and result.returncode == until["returncode"])
        or ("stdout" in until and str(until["stdout"]) in (result.output or ""))
        or ("stderr" in until and str(until["stderr"]) in (result.stderr or ""))
    )


def _keep_output(runner: CommandRunner, name: str, text: str, cache_dir: Path | None) -> None:
    """`name` in the evaluator's cache (a plain file name: the support check refused others)."""
    if cache_dir is not None:
        (cache_dir / name).write_text(text)
        return
    kept: dict[str, str] = getattr(runner, "osworld_outputs", None) or {}
    kept[name] = text
    runner.osworld_outputs = kept  # type: ignore[attr-defined]


def restore_outputs(runner: CommandRunner, cache_dir: Path) -> None:
    """The set-up's `stdout` / `stderr` files into the evaluation's cache."""
    for name, text in (getattr(runner, "osworld_outputs", None) or {}).items():
        (cache_dir / name).write_text(text)


# OSWorld's VM has run Chrome once: its profile exists before a task's set-up, and set-ups edit it
# (3299584d puts `session.startup_urls` into Default/Preferences with jq, then launches Chrome). A
# session without it lost that edit, and Chrome's own later write of a fresh profile made the task
# pass with no action. Chromium fills in the rest of the profile when it starts.
CHROME_PROFILE: dict[str, str] = {
    ".config/google-chrome/Default/Preferences": json.dumps(
        {
            "browser": {"has_seen_welcome_page": True, "check_default_browser": False},
            "profile": {"name": "Person 1", "exit_type": "Normal", "exited_cleanly": True},
        }
    ),
    ".config/google-chrome/Local State": json.dumps(
        {
            "browser": {"enabled_labs_experiments": []},
            "profile": {"info_cache": {"Default": {"name": "Person 1"}}},
        }
    ),
    ".config/google-chrome/First Run": "",
}


# OSWorld's VM's settings where they differ from GNOME's defaults: its screen lock is off (a4d98375
# asks to turn it on; with GNOME's default, on, it passed with no action).
VM_GSETTINGS: tuple[tuple[str, str, str], ...] = (("org.gnome.desktop.screensaver", "lock-enabled", "false"),)


def prepare_home(runner: CommandRunner) -> None:
    """The home as OSWorld's VM user has it before a set-up: ~/Desktop, Chrome's profile (files the
    session already has are kept), the VM's settings (`VM_GSETTINGS`, where GSettings and the schema
    are installed; a failing write is an error, never skipped)."""
    from workers.envs.osworld.commands import _installed_schemas
    from workers.envs.terminal.paths import open_beneath

    os.close(open_beneath(runner.session_dir, "Desktop", os.O_RDONLY | os.O_DIRECTORY, make_parents=True))
    for relative, content in CHROME_PROFILE.items():
        _write_once(runner, relative, content)
    if shutil.which("gsettings") is None:
        return
    for schema, key, value in VM_GSETTINGS:
        if schema not in _installed_schemas():
            continue
        result = runner.run_command(["gsettings", "set", schema, key, value], timeout_s=15.0)
        if not result.ok:
            raise OSWorldError(f"the VM's setting {schema} {key} {value}: {result.output.strip()[:200]}")


def _write_once(runner: CommandRunner, relative: str, content: str) -> bool:
    """Write `relative` under the session's home, owned like it, unless it exists (False then)."""
    from workers.envs.terminal.paths import open_beneath

    try:
        fd = open_beneath(
            runner.session_dir, relative, os.O_WRONLY | os.O_CREAT | os.O_EXCL, make_parents=True
        )
    except EnvError as exc:
        if isinstance(exc.__cause__, FileExistsError):
            return False
        raise
    with os.fdopen(fd, "w") as out:
        owner = runner.session_dir.stat()
        os.fchown(out.fileno(), owner.st_uid, owner.st_gid)
        out.write(content)
    return True


def _run_step(
    kind: str,
    params: dict[str, Any],
    runner: CommandRunner,
    index: int,
    bundle_dir: Path | None,
    cache_dir: Path | None = None,
) -> None:
    if kind in {"execute", "command"} and _is_focus_click(params["command"]):
        return  # the VM's focusing click; sessions here start focused
    if kind in {"execute", "command"}:
        _execute(params, runner, index, kind, cache_dir)
    elif kind == "launch":
        command = _rewrite_command(params["command"], runner)
        _prepare_profile(runner, command)
        before = _window_ids(runner) if _has_window(command) else None
        if _program(command) == "chromium":  # the evaluation waits for its profile write (settle)
            runner.osworld_chrome_started_at = time.time()  # type: ignore[attr-defined]
        runner.spawn_command(command, shell=bool(params.get("shell", False)))
        if before is not None:
            _wait_for_new_window(runner, before)
            _wait_until_idle(runner)
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
        _prepare_profile(runner, opener)
        runner.spawn_command([*opener, inside])
        _wait_for_file_window(runner, path)
        _wait_until_idle(runner)
    elif kind == "chrome_open_tabs":
        chrome.open_tabs(runner, list(params["urls_to_open"]))
    elif kind == "chrome_close_tabs":
        chrome.close_tabs(runner, list(params["urls_to_close"]))
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
{last_version}</oor:items>
"""
# Without the version it last ran, LibreOffice opens under a "running this version for the first
# time — what's new?" bar that pushes the document down (set-up steps click at fixed points).
_LAST_VERSION = (
    '<item oor:path="/org.openoffice.Setup/Product"><prop oor:name="ooSetupLastVersion" oor:op="fuse">'
    "<value>{}</value></prop></item>\n"
)
_LIBREOFFICE_REGISTRY = Path("/usr/lib/libreoffice/share/registry/main.xcd")


@functools.cache
def _libreoffice_profile() -> str:
    """OSWorld's LibreOffice profile, marked as last run by the installed version."""
    try:
        registry = _LIBREOFFICE_REGISTRY.read_text(encoding="utf-8", errors="replace")
    except OSError:
        registry = ""
    match = re.search(r'ooSetupVersion">\s*<value>([0-9.]+)</value>', registry)
    return _LIBREOFFICE_PROFILE.format(last_version=_LAST_VERSION.format(match.group(1)) if match else "")


# ... and VLC without its first-start "Privacy and Network Access Policy" dialog, with its web
# interface on as OSWorld's VM has it (`vlc_playing_info` reads /requests/status.xml on port 8080,
# password "password"); here it listens on the sandbox's own loopback (workers.envs.osworld.vlc).
# Sessions have no sound device: audio goes to VLC's dummy output (playback runs its course) instead
# of an "Audio output failed" dialog over the player.
_VLC_PROFILE = "[qt]\nqt-privacy-ask=0\n[core]\nextraintf=http\naout=adummy\n[lua]\nhttp-password=password\n"

# program -> (profile file in the session's home, its content)
_PROFILES: dict[str, tuple[str, Callable[[], str]]] = {
    "libreoffice": (".config/libreoffice/4/user/registrymodifications.xcu", _libreoffice_profile),
    "soffice": (".config/libreoffice/4/user/registrymodifications.xcu", _libreoffice_profile),
    "vlc": (".config/vlc/vlcrc", lambda: _VLC_PROFILE),
}


def _prepare_profile(runner: CommandRunner, command: str | list[str]) -> None:
    """The started program's profile as OSWorld's VM has it (kept if the session has one)."""
    words = command if isinstance(command, list) else command.split()
    program = Path(str(words[0])).name if words else ""
    if program not in _PROFILES:
        return
    relative, content = _PROFILES[program]
    # a second start (a postconfig restarting the app) keeps what the app wrote
    _write_once(runner, relative, content())


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


# A `launch` of one of these programs returns once the program is ready for input, as OSWorld's VM
# had it when the task's next step ran: set-ups send keys a fixed time after a launch (ef9d12bd:
# F10 and arrows five seconds after `libreoffice --impress`), which on a loaded host otherwise land
# before the window exists and are lost.
_WINDOWED_PROGRAMS = frozenset(
    {"libreoffice", "soffice", "gimp", "vlc", "thunderbird", "chromium", "google-chrome", "mousepad", "gedit"}
)
_WINDOW_TIMEOUT_S = 60.0
# Ready = every thread of the session's box sleeps (it has done what it was asked: loaded, drawn;
# `workers.envs.sandbox.activity`, an event that holds at any load, at most IDLE_MAX_S), then the
# screen drew nothing larger than a caret's blink for IDLE_QUIET_S (at most IDLE_MAX_S).
IDLE_QUIET_S, IDLE_MAX_S, IDLE_MIN_AREA = 1.5, 30.0, 32 * 32
BOX_IDLE_MAX_S = 90.0


def _program(command: str | list[str]) -> str:
    words = command if isinstance(command, list) else command.split()
    return Path(str(words[0])).name if words else ""


def _has_window(command: str | list[str]) -> bool:
    words = command if isinstance(command, list) else command.split()
    if not words or "--headless" in words:
        return False
    return Path(str(words[0])).name in _WINDOWED_PROGRAMS


def _window_ids(runner: CommandRunner) -> set[str] | None:
    """The top-level windows now (None without wmctrl: nothing to wait on)."""
    result = runner.run_command(["wmctrl", "-l"], timeout_s=5.0)
    return {line.split()[0] for line in result.output.splitlines() if line.strip()} if result.ok else None


def _wait_for_new_window(runner: CommandRunner, before: set[str] | None) -> None:
    """Until a window that was not there before maps. A program that shows none in time (it handed
    over to a running instance, it failed) is not an error here: OSWorld's `launch` never waits."""
    if before is None:
        return
    deadline = time.monotonic() + _WINDOW_TIMEOUT_S
    while time.monotonic() < deadline:
        now = _window_ids(runner)
        if now is None or now - before:
            return
        time.sleep(0.3)


def _wait_until_idle(runner: CommandRunner) -> None:
    """Until the session is idle: its box's threads all sleep (its apps wait for input) and then
    its screen is quiet (the app has drawn its window, dialogs included). An environment without a
    box does not wait on the first, one without a screen (no `display`) not on the second."""
    try:
        init_pid = runner.sandbox.init_pid  # type: ignore[attr-defined]
    except (AttributeError, EnvError):  # no box (a VM), or it is gone
        init_pid = None
    if isinstance(init_pid, int):
        from workers.envs.sandbox.activity import wait_quiescent

        quiet = wait_quiescent(init_pid, max_s=BOX_IDLE_MAX_S)
        if not quiet.reached:
            log.info("the session stayed busy for %.0f s (%s)", quiet.waited_s, ", ".join(quiet.busy))
    display = getattr(runner, "display", None)
    if not isinstance(display, str):
        return
    from workers.envs.desktop.settle import ScreenSettler

    settler = ScreenSettler(display, IDLE_MIN_AREA)
    try:
        settler.wait(IDLE_QUIET_S, IDLE_MAX_S)
    finally:
        settler.close()
