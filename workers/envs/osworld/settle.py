"""Before an evaluation: let the apps the set-up started settle, as they have by the time a person
presses Finish.

OSWorld's evaluators read what the apps wrote (Chrome's profile, a saved document). Chromium writes
its profile lazily, up to ten seconds after a change (its profile writer's commit interval), so an
evaluation right after set-up read a profile that did not exist yet, while one at Finish read the
written one: the no-action check said 0 where the annotator who did nothing got 1 (chrome 3299584d).
Every evaluation (at Finish, in a rollout, in the no-action check) therefore waits, in this order:

1. while Chromium runs, until it has written its profile's Preferences since it started (at most
   `CHROME_FLUSH_MAX_S` after its start; measured here: 12 s after the start of an idle Chromium);
2. until no file of the session's home changed for `HOME_QUIET_S` (at most `HOME_MAX_S`);
3. until the screen drew nothing larger than a caret for `setup.IDLE_QUIET_S` (sessions with a screen).

A person takes longer than that anyway; a no-action evaluation waits the same, so it scores what a
Finish with no action would.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from workers.envs.osworld.common import CommandRunner

CHROME_FLUSH_MAX_S = 40.0  # Chromium's profile writer commits 10 s after a change, later under load
PREFERENCES = ".config/google-chrome/Default/Preferences"
HOME_QUIET_S, HOME_MAX_S = 2.0, 20.0
_MAX_ENTRIES = 20_000  # a home is size-capped; past this many files the walk stops counting


def settle(runner: CommandRunner) -> None:
    """Wait as the module docstring says; returns at once for a runner that ran no OSWorld set-up."""
    started = getattr(runner, "osworld_chrome_started_at", None)
    if isinstance(started, float) and _chrome_running(runner):
        wait_written(runner.session_dir / PREFERENCES, started, started + CHROME_FLUSH_MAX_S)
    wait_home_quiet(runner.session_dir)
    from workers.envs.osworld.setup import _wait_until_idle

    _wait_until_idle(runner)


def _chrome_running(runner: CommandRunner) -> bool:
    result = runner.run_command(["pgrep", "-x", "chromium"], timeout_s=5.0)
    return result.ok


def wait_written(path: Path, since: float, until: float) -> bool:
    """Until `path` was modified after `since` (wall clock), at most until `until`; whether it was."""
    while True:
        try:
            if path.stat().st_mtime > since:
                return True
        except OSError:
            pass  # not written yet
        if time.time() >= until:
            return False
        time.sleep(0.25)


def wait_home_quiet(home: Path, quiet_s: float = HOME_QUIET_S, max_s: float = HOME_MAX_S) -> float:
    """Until no file under `home` was modified within the last `quiet_s` (at most `max_s`)."""
    start = time.monotonic()
    while True:
        age = time.time() - newest_mtime(home)
        waited = time.monotonic() - start
        if age >= quiet_s or waited >= max_s:
            return waited
        time.sleep(min(quiet_s - age, max_s - waited) + 0.05)


def newest_mtime(home: Path) -> float:
    """The latest modification time of anything under `home` (symbolic links not followed)."""
    newest, seen = 0.0, 0
    stack = [str(home)]
    while stack and seen < _MAX_ENTRIES:
        try:
            with os.scandir(stack.pop()) as entries:
                for entry in entries:
                    seen += 1
                    try:
                        info = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue  # gone while walking (a temporary file)
                    newest = max(newest, info.st_mtime)
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
        except OSError:
            continue
    return newest
