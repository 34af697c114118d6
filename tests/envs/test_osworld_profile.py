"""Issue 33, finding 1: sessions start with Chrome's profile, as OSWorld's VM does, and the no-action
check evaluates after the apps settled, as an evaluation at Finish does. Real Xvfb, Chromium, jq."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from workers.envs import osworld
from workers.envs.desktop import DesktopConfig, DesktopEnv
from workers.envs.osworld.check import no_action_check

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        any(shutil.which(t) is None for t in ("chromium", "jq")),
        reason="make osworld-apps DOMAINS=chrome (chromium, jq)",
    ),
]

_LAUNCH = {"type": "launch", "parameters": {"command": ["google-chrome", "--remote-debugging-port=1337"]}}
# Our own task in the shape of OSWorld's chrome 3299584d ("Chrome always opens a site at start"): the
# set-up edits the profile's Preferences with jq before Chrome starts; the evaluator reads the
# startup setting back (desktop-env's `new_startup_page`: "true" once the startup page is the new tab).
STARTUP_TASK: dict[str, Any] = {
    "id": "fw-chrome-startup-page",
    "snapshot": "chrome",
    "instruction": "Chrome always opens example.org when it starts. Make it open the New Tab page.",
    "source": "test",
    "config": [
        {
            "type": "execute",
            "parameters": {
                "command": "echo password | sudo -S apt update -y && echo password | sudo -S apt install jq -y",
                "shell": True,
            },
        },
        {
            "type": "execute",
            "parameters": {
                "command": "cd /home/user/.config/google-chrome/Default && jq '. + "
                '{"session":{"restore_on_startup":4, "startup_urls":["http://example.org/"]}}'
                "' Preferences > temp && mv temp Preferences",
                "shell": True,
            },
        },
        _LAUNCH,
    ],
    "related_apps": ["chrome"],
    "evaluator": {
        "func": "exact_match",
        "result": {"type": "new_startup_page"},
        "expected": {"type": "rule", "rules": {"expected": "true"}},
    },
}


def _preferences(session: Path) -> dict[str, Any]:
    return json.loads((session / ".config/google-chrome/Default/Preferences").read_text())


def test_a_setup_that_edits_chromes_profile_takes_effect_and_the_task_is_solvable(tmp_path: Path) -> None:
    env = DesktopEnv(DesktopConfig(display_range=(460, 470), vnc=False, session_dir=tmp_path, apps=()))
    try:
        env.reset(osworld.task_spec_from_json(STARTUP_TASK, kind="desktop"))
        # The profile existed before the set-up, so its jq edit took effect (it failed without one).
        assert _preferences(tmp_path)["session"]["restore_on_startup"] == 4
        report = osworld.evaluate_report(STARTUP_TASK["evaluator"], env)
        assert report.score == 0.0, report  # after Chromium wrote its profile: still the edited one
        assert _preferences(tmp_path)["session"]["startup_urls"] == ["http://example.org/"]
        # Solved: Chrome stopped (it writes its profile), the startup page set to the new tab.
        env.run_command(["pkill", "-x", "chromium"])
        env.run_command(["sh", "-c", "while pgrep -x chromium >/dev/null; do sleep 0.2; done"], timeout_s=30)
        prefs = _preferences(tmp_path)
        prefs["session"] = {"restore_on_startup": 5}
        (tmp_path / ".config/google-chrome/Default/Preferences").write_text(json.dumps(prefs))
        assert osworld.evaluate(STARTUP_TASK["evaluator"], env) == 1.0
    finally:
        env.close()


def test_no_action_check_catches_a_task_chrome_solves_by_writing_its_profile() -> None:
    """Without the set-up's edit the task passes with no action once Chromium's profile is there —
    as an annotator pressing Finish saw; the check evaluated before that and said "ok"."""
    task = copy.deepcopy(STARTUP_TASK)
    task["config"] = [_LAUNCH]
    outcome = no_action_check(task, display_range=(470, 480))
    assert outcome.verdict == "passes_without_action", outcome
    assert outcome.score == 1.0


def test_no_action_check_waits_for_chromes_lazy_profile_write_and_counts_partial_scores() -> None:
    """An evaluator reading what Chromium writes some seconds after it starts (its profile writer
    commits 10 s after a change): evaluated at once it scored 0, at Finish more. A score between 0
    and 1 with no action is a pass without action too."""
    task = copy.deepcopy(STARTUP_TASK)
    task["config"] = [_LAUNCH]
    probe = "grep -q '\"extensions\"' ~/.config/google-chrome/Default/Preferences && echo written || true"
    task["evaluator"] = {
        "func": "fuzzy_match",
        "result": {"type": "vm_command_line", "command": probe, "shell": True},
        "expected": {"type": "rule", "rules": {"expected": "writtenXYZ"}},
    }
    outcome = no_action_check(task, display_range=(480, 490))
    assert outcome.verdict == "passes_without_action", outcome
    assert 0.0 < (outcome.score or 0.0) < 1.0
