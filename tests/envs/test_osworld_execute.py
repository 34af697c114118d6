"""Issue 33, finding 2: `execute` / `command` options as desktop-env's controller has them (`stdout`,
`stderr`, `until`, `timeout`, `shell`), the programs a task needs named when missing, and package
installs satisfied from the image or refused by name. Real sandboxed terminal sessions."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from workers.envs import osworld
from workers.envs.terminal import TerminalConfig, TerminalEnv

ABSENT = "flywheel-no-such-tool"


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[TerminalEnv]:
    env = TerminalEnv(TerminalConfig(session_dir=tmp_path))
    yield env
    env.close()


def _task(config: list[dict[str, Any]], evaluator: dict[str, Any]) -> dict[str, Any]:
    return {"id": "fw-execute", "instruction": "x", "config": config, "evaluator": evaluator}


# Shaped like OSWorld's multi_apps f8369178: the postconfig's output file is what the metric reads.
THEME_EVALUATOR: dict[str, Any] = {
    "postconfig": [{"type": "execute", "parameters": {"command": ["cat", "theme"], "stdout": "theme.out"}}],
    "func": "check_list",
    "result": {"type": "cache_file", "path": "theme.out"},
    "expected": {"type": "rule", "rules": {"expect": ["Orchis"]}},
}


def _reset(env: TerminalEnv, task: dict[str, Any]) -> None:
    env.reset(osworld.task_spec_from_json(task, kind="terminal"))


def test_postconfig_stdout_is_the_file_the_evaluator_reads(terminal: TerminalEnv) -> None:
    task = _task(
        [{"type": "command", "parameters": {"command": "echo Adwaita > ~/theme", "shell": True}}],
        THEME_EVALUATOR,
    )
    _reset(terminal, task)
    assert osworld.evaluate(task["evaluator"], terminal) == 0.0
    (terminal.session_dir / "theme").write_text("Orchis-Dark\n")
    assert osworld.evaluate(task["evaluator"], terminal) == 1.0


def test_setup_stdout_and_stderr_reach_the_evaluation(terminal: TerminalEnv) -> None:
    config = [
        {
            "type": "execute",
            "parameters": {
                "command": "echo out-line; echo err-line >&2",
                "shell": True,
                "stdout": "o.txt",
                "stderr": "e.txt",
            },
        }
    ]
    evaluator = {
        "func": ["check_list", "check_list"],
        "result": [{"type": "cache_file", "path": "o.txt"}, {"type": "cache_file", "path": "e.txt"}],
        "expected": [
            {"type": "rule", "rules": {"expect": ["^out-line$"], "unexpect": ["err-line"]}},
            {"type": "rule", "rules": {"expect": ["^err-line$"], "unexpect": ["out-line"]}},
        ],
    }
    task = _task(config, evaluator)
    _reset(terminal, task)
    report = osworld.evaluate_report(evaluator, terminal)
    assert report.score == 1.0, report


def test_until_repeats_the_command_and_fails_by_name_when_it_never_holds(terminal: TerminalEnv) -> None:
    count = "n=$(cat ~/n 2>/dev/null || echo 0); n=$((n+1)); echo $n > ~/n; echo $n"
    step = {"type": "execute", "parameters": {"command": count, "shell": True, "until": {"stdout": "3"}}}
    task = _task([step], THEME_EVALUATOR)
    _reset(terminal, task)
    assert (terminal.session_dir / "n").read_text() == "3\n"
    never = {
        "type": "execute",
        "parameters": {"command": "false", "shell": True, "until": {"returncode": 0}, "timeout": 1},
    }
    with pytest.raises(osworld.OSWorldError, match=r"'until'.*did not hold within 1s"):
        osworld.run_setup([never], terminal)


def test_bad_options_are_named() -> None:
    step = {
        "type": "execute",
        "parameters": {"command": "true", "stdout": "../../etc/x", "until": ["x"], "timeout": 10_000},
    }
    problems = " ".join(osworld.check_supported(_task([step], THEME_EVALUATOR)))
    assert "stdout must name a file of the evaluator's cache, not '../../etc/x'" in problems
    assert "until must be an object" in problems
    assert "timeout must be seconds" in problems


def test_every_program_a_task_runs_is_looked_for_by_name() -> None:
    evaluator = {
        "func": "exact_match",
        "result": {"type": "vm_command_line", "command": f"{ABSENT} --clipboard --output", "shell": True},
        "expected": {"type": "rule", "rules": {"expected": "x"}},
    }
    setup = [
        {
            "type": "execute",
            "parameters": {"command": f"cd ~ && X=1 sudo {ABSENT}-two -q | sort", "shell": True},
        }
    ]
    problems = osworld.check_supported(_task(setup, evaluator))
    assert f"config[0]: needs '{ABSENT}-two', which is not installed here" in problems
    assert f"needs '{ABSENT}', which is not installed here" in problems
    assert not any("'cd'" in p or "'sort'" in p or "'X" in p for p in problems)  # builtins, present tools


@pytest.mark.skipif(shutil.which("xsel") is not None, reason="xsel is installed here")
def test_the_clipboard_tool_an_evaluator_calls_is_named() -> None:
    evaluator = {
        "func": "exact_match",
        "result": {"type": "vm_command_line", "command": "xsel --clipboard --output", "shell": True},
        "expected": {"type": "rule", "rules": {"expected": "x"}},
    }
    assert "needs 'xsel', which is not installed here" in osworld.check_supported(_task([], evaluator))


@pytest.mark.skipif(shutil.which("jq") is None, reason="jq (make osworld-apps DOMAINS=chrome)")
def test_an_install_of_a_package_the_image_has_is_satisfied(terminal: TerminalEnv) -> None:
    install = "echo password | sudo -S apt update -y && echo password | sudo -S apt install jq -y && jq -n 41+1 > ~/ok"
    task = _task([{"type": "execute", "parameters": {"command": install, "shell": True}}], THEME_EVALUATOR)
    assert osworld.check_supported(task) == []
    _reset(terminal, task)
    assert (terminal.session_dir / "ok").read_text() == "42\n"


def test_an_install_of_a_package_the_image_lacks_is_refused_by_name(terminal: TerminalEnv) -> None:
    install = "echo password | sudo -S apt-get install -y flywheel-no-such-package && true"
    pip = "pip install flywheel-no-such-module"
    task = _task(
        [{"type": "execute", "parameters": {"command": c, "shell": True}} for c in (install, pip)],
        THEME_EVALUATOR,
    )
    problems = osworld.check_supported(task)
    assert problems[0].startswith("config[0]: installs the Debian package 'flywheel-no-such-package'")
    assert problems[1].startswith("config[1]: installs the Python package 'flywheel-no-such-module'")
    with pytest.raises(osworld.OSWorldError, match="flywheel-no-such-package"):
        osworld.run_setup(task["config"][:1], terminal)
