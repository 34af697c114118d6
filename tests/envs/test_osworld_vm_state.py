"""Sessions start in OSWorld's VM's state where a task's evaluator reads it, and a task whose VM state
this host cannot give is unsupported with the reason (the full `bench osworld` over OSWorld's own
files found both: os a4d98375 and ddc75b62 passed with no action). Real Xvfb, D-Bus, GSettings."""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import time
from typing import Any

import pytest

from workers.envs import osworld
from workers.envs.desktop import DesktopConfig, DesktopEnv
from workers.envs.osworld.check import no_action_check


def _schema_installed(schema: str) -> bool:
    if shutil.which("gsettings") is None:
        return False
    out = subprocess.run(["gsettings", "list-schemas"], capture_output=True, text=True, check=False)
    return schema in out.stdout.split()


# Our own task in the shape of OSWorld's os a4d98375 ("lock my computer automatically when I leave").
LOCK_TASK: dict[str, Any] = {
    "id": "fw-os-screen-lock",
    "snapshot": "os",
    "instruction": "Have the computer lock the screen automatically when I leave.",
    "source": "test",
    "config": [],
    "related_apps": ["os"],
    "evaluator": {
        "func": "exact_match",
        "result": {
            "type": "vm_command_line",
            "command": "gsettings get org.gnome.desktop.screensaver lock-enabled",
            "shell": True,
        },
        "expected": {"type": "rule", "rules": {"expected": "true\n"}},
    },
}


@pytest.mark.skipif(
    not _schema_installed("org.gnome.desktop.screensaver") or shutil.which("wmctrl") is None,
    reason="make osworld-apps DOMAINS=os (GNOME's schemas, wmctrl)",
)
def test_the_screen_lock_is_off_as_on_osworlds_vm(tmp_path: Any) -> None:
    assert osworld.check_supported(LOCK_TASK, "desktop") == []
    outcome = no_action_check(LOCK_TASK, display_range=(480, 490))
    assert (outcome.verdict, outcome.score) == ("ok", 0.0), outcome  # GNOME's default (on) scored 1
    session = tmp_path / "session"
    session.mkdir()
    tmp_path.chmod(0o755)
    env = DesktopEnv(DesktopConfig(display_range=(480, 490), vnc=False, session_dir=session))
    try:
        env.reset(osworld.task_spec_from_json(LOCK_TASK, kind="desktop"))
        assert env.run_command(
            ["gsettings", "set", "org.gnome.desktop.screensaver", "lock-enabled", "true"]
        ).ok
        assert env.evaluate() == 1.0  # solved
    finally:
        env.close()


def _removal_task(package: str) -> dict[str, Any]:
    task = copy.deepcopy(LOCK_TASK)
    task["id"] = f"fw-os-remove-{package}"
    task["evaluator"] = {
        "func": "check_include_exclude",
        "result": {"type": "vm_command_line", "command": f"dpkg -l | grep {package}", "shell": True},
        "expected": {"type": "rule", "rules": {"include": [], "exclude": [package]}},
    }
    return task


@pytest.mark.skipif(shutil.which("dpkg-query") is None, reason="a Debian host (dpkg)")
def test_a_task_that_removes_a_package_this_host_lacks_is_unsupported() -> None:
    """ddc75b62 ("uninstall Mahjongg"): the VM has the package; where it is not installed, doing
    nothing already 'removed' it, so the task cannot be scored here."""
    problems = osworld.check_supported(_removal_task("flywheel-no-such-package"), "desktop")
    assert len(problems) == 1 and "removes the package 'flywheel-no-such-package'" in problems[0]
    assert osworld.check_supported(_removal_task("coreutils"), "desktop") == []  # installed: it can run


@pytest.mark.skipif(shutil.which("chromium") is None, reason="make osworld-apps DOMAINS=chrome")
def test_a_getter_this_chromium_answers_on_its_own_is_unsupported(tmp_path: Any) -> None:
    """chrome 99146c54: desktop-env's data_delete_automacally says "true" once Chrome's Preferences
    has profile.default_content_setting_values; this Chromium writes it at its first start, untouched
    (when a Chromium stops doing so, this fails: the getter can be offered again)."""
    task = copy.deepcopy(LOCK_TASK)
    task["evaluator"] = {
        "func": "exact_match",
        "result": {"type": "data_delete_automacally"},
        "expected": {"type": "rule", "rules": {"expected": "true"}},
    }
    problems = osworld.check_supported(task, "desktop")
    assert len(problems) == 1 and "data_delete_automacally" in problems[0], problems
    profile = tmp_path / "profile"
    chromium = subprocess.Popen(
        ["chromium", "--headless=new", "--no-sandbox", f"--user-data-dir={profile}", "--no-first-run",
         "--remote-debugging-port=0", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    written = profile / "Default" / "Preferences"
    try:
        deadline = time.monotonic() + 90
        while not written.exists() and time.monotonic() < deadline:
            time.sleep(0.5)  # its profile writer commits a few seconds after the start
    finally:
        chromium.terminate()
        chromium.wait(timeout=30)
    preferences = json.loads(written.read_text())
    assert preferences["profile"].get("default_content_setting_values") is not None
