"""Issue 33, finding 5: the vs_code domain's metrics are desktop-env's own (metrics/vscode.py); VS
Code itself is not in Debian, so its tasks are unsupported with that reason. Real terminal sessions."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from workers.envs import osworld
from workers.envs.terminal import TerminalConfig, TerminalEnv

SETTINGS = "~/.config/Code/User/settings.json"
EVALUATOR: dict[str, Any] = {
    "func": "check_json_settings",
    "result": {
        "type": "vm_file",
        "path": "/home/user/.config/Code/User/settings.json",
        "dest": "settings.json",
    },
    "expected": {"type": "rule", "rules": {"expected": {"editor.fontSize": 14}}},
}


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[TerminalEnv]:
    env = TerminalEnv(TerminalConfig(session_dir=tmp_path))
    yield env
    env.close()


def test_vscode_metrics_are_desktop_envs_and_score(terminal: TerminalEnv) -> None:
    setup = f"mkdir -p ~/.config/Code/User && echo '{{\"editor.fontSize\": 12}}' > {SETTINGS}"
    task = {
        "id": "fw-vscode-font",
        "instruction": "Set the editor font size to 14.",
        "config": [{"type": "execute", "parameters": {"command": setup, "shell": True}}],
        "evaluator": EVALUATOR,
    }
    assert osworld.check_supported(task, "terminal") == []
    terminal.reset(osworld.task_spec_from_json(task, kind="terminal"))
    assert osworld.evaluate(EVALUATOR, terminal) == 0.0
    (terminal.session_dir / ".config/Code/User/settings.json").write_text('{"editor.fontSize": 14}')
    assert osworld.evaluate(EVALUATOR, terminal) == 1.0


def test_a_task_that_starts_vs_code_is_unsupported_with_the_reason() -> None:
    task = {
        "id": "fw-vscode-launch",
        "instruction": "x",
        "config": [{"type": "launch", "parameters": {"command": ["code", "--disable-workspace-trust"]}}],
        "evaluator": EVALUATOR,
    }
    problems = osworld.check_supported(task, "desktop")
    assert len(problems) == 1 and "Debian does not package" in problems[0], problems
