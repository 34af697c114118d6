"""OSWorld task import, set-up and evaluation on real terminal and desktop sessions."""

from __future__ import annotations

import copy
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from workers.actions.types import Action, Point
from workers.envs import osworld
from workers.envs.base import TaskSpec
from workers.envs.desktop import DesktopConfig, DesktopEnv
from workers.envs.terminal import TerminalConfig, TerminalEnv

EXAMPLES = {task["id"]: task for task in osworld.load_examples()}
# The shell lines that solve each bundled example (typed into the terminal env).
SOLUTIONS = {
    "fw-os-001-make-dirs": "mkdir -p ~/projects/flywheel",
    "fw-os-002-write-file": "echo 'Hello, Flywheel!' > ~/hello.txt",
    "fw-os-003-make-executable": "chmod u+x ~/greet.sh",
    "fw-os-004-count-lines": "wc -l < ~/data/records.csv > ~/line_count.txt",
    "fw-os-005-rename": "mv ~/notes.txt ~/notes.markdown",
}

# Shaped like the real OSWorld `os` tasks: the focusing pyautogui click, `sudo -S`, ~/Desktop.
REAL_SHAPED: dict[str, Any] = {
    "id": "rename-dir-like-osworld",
    "snapshot": "os",
    "instruction": "Rename the directory todo_list_Jan_1 on my Desktop to todo_list_Jan_2.",
    "source": "test",
    "trajectory": "trajectories/",
    "config": [
        {
            "type": "execute",
            "parameters": {
                "command": "echo 'password' | sudo -S mkdir ~/Desktop/todo_list_Jan_1",
                "shell": True,
            },
        },
        {
            "type": "execute",
            "parameters": {
                "command": [
                    "python",
                    "-c",
                    "import pyautogui; import time; pyautogui.click(960, 540); time.sleep(0.5);",
                ]
            },
        },
    ],
    "related_apps": ["os"],
    "evaluator": {
        "func": "exact_match",
        "result": {
            "type": "vm_command_line",
            "command": "[ -d ~/Desktop/todo_list_Jan_2 ] && echo 'Directory exists.' || echo 'Directory does not exist.'",
            "shell": True,
        },
        "expected": {"type": "rule", "rules": {"expected": "Directory exists.\n"}},
    },
}


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[TerminalEnv]:
    env = TerminalEnv(TerminalConfig(session_dir=tmp_path))
    yield env
    env.close()


def test_bundled_examples_are_supported_everywhere() -> None:
    assert len(EXAMPLES) == len(SOLUTIONS) == 5
    for task in EXAMPLES.values():
        assert osworld.check_supported(task, "desktop") == []
        assert osworld.check_supported(task, "terminal") == []
        spec = osworld.task_spec_from_json(task, kind="terminal")
        assert spec.source == "osworld" and spec.instruction == task["instruction"]


@pytest.mark.parametrize("task_id", sorted(SOLUTIONS))
def test_example_scores_one_when_solved_and_zero_when_not(terminal: TerminalEnv, task_id: str) -> None:
    spec = osworld.task_spec_from_json(EXAMPLES[task_id], kind="terminal")
    terminal.reset(spec)
    assert terminal.evaluate() == 0.0
    result = terminal.step(Action("type", text=SOLUTIONS[task_id] + "\n"))
    assert result.info["commands"][0]["returncode"] == 0, result.observation.terminal_output
    assert terminal.evaluate() == 1.0
    # reset runs the set-up again, which undoes the solution.
    terminal.reset(spec)
    assert terminal.evaluate() == 0.0


def test_and_conj_needs_every_metric(terminal: TerminalEnv) -> None:
    terminal.reset(osworld.task_spec_from_json(EXAMPLES["fw-os-003-make-executable"], kind="terminal"))
    terminal.step(Action("type", text="chmod 755 ~/greet.sh && echo 'echo nope' > ~/greet.sh\n"))
    report = osworld.evaluate_report(EXAMPLES["fw-os-003-make-executable"]["evaluator"], terminal)
    assert [m.score for m in report.metrics] == [1.0, 0.0]
    assert report.score == 0.0


def test_real_shaped_task_runs_with_sudo_and_focus_click(terminal: TerminalEnv) -> None:
    assert osworld.check_supported(REAL_SHAPED, "terminal") == []
    terminal.reset(osworld.task_spec_from_json(REAL_SHAPED, kind="terminal"))
    assert (terminal.session_dir / "Desktop" / "todo_list_Jan_1").is_dir()
    assert terminal.evaluate() == 0.0
    terminal.step(Action("type", text="cd Desktop\nmv todo_list_Jan_1 todo_list_Jan_2\n"))
    assert terminal.evaluate() == 1.0


def test_terminal_output_getter_reads_the_transcript(terminal: TerminalEnv) -> None:
    task = copy.deepcopy(REAL_SHAPED)
    task["evaluator"] = {
        "func": "check_include_exclude",
        "result": {"type": "vm_terminal_output"},
        "expected": {"type": "rule", "rules": {"include": ["3\n"], "exclude": []}},
    }
    terminal.reset(osworld.task_spec_from_json(task, kind="terminal"))
    assert terminal.evaluate() == 0.0
    terminal.step(Action("type", text="printf 'a\\nb\\nc\\n' | wc -l\n"))
    assert terminal.evaluate() == 1.0
    assert osworld.check_supported(task, "desktop") == []  # the desktop's terminals log their text


def test_unsupported_features_are_named() -> None:
    task = copy.deepcopy(REAL_SHAPED)
    task["config"] += [
        {
            "type": "download",
            "parameters": {"files": [{"url": "https://example.org/setup.sh", "path": "setup.sh"}]},
        },
        {"type": "chrome_open_tabs", "parameters": {"urls_to_open": ["https://example.org"]}},
        {"type": "launch", "parameters": {"command": ["no-such-program-here", "--x"]}},
        {
            "type": "execute",
            "parameters": {"command": "echo password | sudo -S chsh -s /bin/zsh", "shell": True},
        },
    ]
    task["evaluator"] = {
        "func": ["compare_table", "exact_match", "no_such_metric", "compare_image_text"],
        "result": [
            {"type": "vm_file", "path": "/home/user/a.xlsx", "dest": "a.xlsx"},
            {"type": "vm_command_line", "command": "true"},
            {"type": "active_tab_info"},
            {"type": "vm_file", "path": "/home/user/a.docx", "dest": "a.docx"},
        ],
        "expected": [
            {"type": "cloud_file", "path": "https://example.org/gold.xlsx", "dest": "gold.xlsx"},
            {"type": "rule", "rules": {"expected": ""}},
            {"type": "rule", "rules": {}},
            {"type": "rule", "rules": {}},
        ],
        "conj": "xor",
    }
    problems = " | ".join(osworld.check_supported(task))
    for needle in (
        "'https://example.org/setup.sh' needs the network",
        "'https://example.org/gold.xlsx' needs the network",
        "opens the web page 'https://example.org', a live site",
        "'no-such-program-here', which is not installed",
        "'chsh' changes the login shell, which needs root",
        "metric 'no_such_metric' is not one of OSWorld's metrics",
        "metric 'compare_image_text' (docs) needs easyocr",  # the one docs metric easyocr runs
        "getter 'active_tab_info' is not supported",
        "conj",
    ):
        assert needle in problems, needle
    with pytest.raises(osworld.OSWorldError):
        osworld.task_spec_from_json(task)
    assert osworld.check_supported({"config": "nope"}) == [
        "missing field 'id'",
        "missing field 'instruction'",
        "missing field 'evaluator'",
        "config must be a list of {type, parameters}",
    ]


def test_local_download_and_bad_rules(
    terminal: TerminalEnv, tmp_path_factory: pytest.TempPathFactory
) -> None:
    source = tmp_path_factory.mktemp("assets") / "data.txt"
    source.write_text("payload\n")
    task = copy.deepcopy(EXAMPLES["fw-os-002-write-file"])
    task["config"] = [
        {
            "type": "download",
            "parameters": {"files": [{"url": f"file://{source}", "path": "/home/user/in/data.txt"}]},
        }
    ]
    task["evaluator"]["expected"]["rules"] = {"wrong_key": 1}
    terminal.reset(osworld.task_spec_from_json(task, kind="terminal", bundle_dir=source.parent))
    assert (terminal.session_dir / "in" / "data.txt").read_text() == "payload\n"
    report = osworld.evaluate_report(task["evaluator"], terminal)
    assert report.score == 0.0 and "exact_match failed: KeyError" in (report.metrics[0].error or "")


def test_desktop_end_to_end_by_typing_into_xterm(tmp_path: Path) -> None:
    task = EXAMPLES["fw-os-003-make-executable"]
    env = DesktopEnv(DesktopConfig(display_range=(110, 120), vnc=False, session_dir=tmp_path))
    try:
        spec = osworld.task_spec_from_json(task, kind="desktop")
        env.reset(spec)
        assert (tmp_path / "greet.sh").stat().st_mode & 0o777 == 0o644
        assert env.evaluate() == 0.0
        env.step(Action("click", point=Point(200, 200)))
        env.step(Action("type", text="chmod u+x greet.sh\n"))
        deadline = time.monotonic() + 10
        while (tmp_path / "greet.sh").stat().st_mode & 0o100 == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert env.evaluate() == 1.0
    finally:
        env.close()


def test_store_shape_and_bare_shape_specs_both_run(terminal: TerminalEnv) -> None:
    task = EXAMPLES["fw-os-002-write-file"]
    spec = osworld.task_spec_from_json(task, kind="terminal")
    assert spec.setup["osworld"] == task["config"] and spec.verifier == {"osworld": task["evaluator"]}
    bare = TaskSpec(
        task_id="b",
        instruction="",
        kind="terminal",
        source="osworld",
        setup={"config": task["config"]},
        verifier=task["evaluator"],
    )
    for candidate in (spec, bare):
        terminal.reset(candidate)
        assert terminal.evaluate() == 0.0
        terminal.step(Action("type", text=SOLUTIONS["fw-os-002-write-file"] + "\n"))
        assert terminal.evaluate() == 1.0


def test_infeasible_task_is_solved_by_giving_up(terminal: TerminalEnv) -> None:
    task = copy.deepcopy(REAL_SHAPED)
    task["evaluator"] = {"func": "infeasible"}
    assert osworld.check_supported(task, "terminal") == []
    spec = osworld.task_spec_from_json(task, kind="terminal")
    terminal.reset(spec)
    terminal.step(Action("type", text="ls\n"))
    assert terminal.evaluate() == 0.0
    terminal.step(Action("call_user"))
    assert terminal.evaluate() == 1.0
    terminal.reset(spec)
    terminal.step(Action("finished", text="done"))
    assert terminal.evaluate() == 0.0


def test_tools_the_vm_has_but_this_host_lacks_are_named() -> None:
    task = copy.deepcopy(REAL_SHAPED)
    task["evaluator"]["result"]["command"] = ["gsettings", "get", "org.gnome.desktop.session", "idle-delay"]
    problems = osworld.check_supported(task)
    assert problems == ["needs 'gsettings', which is not installed here"] or shutil.which("gsettings")
    task["config"].append(
        {
            "type": "execute",
            "parameters": {"command": "echo password | sudo -S chsh -s $(which zsh)", "shell": True},
        }
    )
    assert any("'zsh'" in p for p in osworld.check_supported(task)) or shutil.which("zsh")


@pytest.mark.skipif(
    shutil.which("dbus-daemon") is None
    or shutil.which("gsettings") is None
    or osworld.pyautogui_dir() is None,
    reason="make osworld-apps DOMAINS=os (dbus, gsettings, pyautogui)",
)
def test_desktop_session_has_its_own_bus_and_pyautogui(tmp_path: Path) -> None:
    """What OSWorld set-up steps and getters rely on: gsettings writes go to the session's own dconf
    database (in its home, over its own D-Bus), and the sandbox's python3 imports pyautogui."""
    env = DesktopEnv(DesktopConfig(display_range=(120, 130), vnc=False, session_dir=tmp_path, apps=()))
    try:
        env.boot()
        key = "org.gnome.desktop.interface text-scaling-factor"
        assert env.run_command(["/bin/sh", "-c", f"gsettings set {key} 1.25"]).ok
        assert env.run_command(["/bin/sh", "-c", f"gsettings get {key}"]).output.strip() == "1.25"
        assert (tmp_path / ".config" / "dconf" / "user").is_file()
        assert env.run_command(["python3", "-c", "import pyautogui; print(pyautogui.size())"]).ok
    finally:
        env.close()


def test_url_metrics_read_the_bundled_public_suffix_list_offline() -> None:
    """desktop-env's compare_urls uses tldextract, which would fetch the Public Suffix List from the
    web on first use; loading the metric module points it at the snapshot tldextract ships."""
    from tldextract import tldextract

    from workers.envs.osworld import vocab

    assert not isinstance(vocab._module("metrics", "utils"), str)
    assert tldextract.TLD_EXTRACTOR.suffix_list_urls == ()
    assert tldextract.extract("docs.example.co.uk").suffix == "co.uk"


def test_getters_read_files_larger_than_a_commands_output(terminal: TerminalEnv) -> None:
    """desktop-env's file getters read a task's document whole through the sandbox (a command's
    output is capped at 64 kB; a document is often larger): 1 MB comes back byte for byte."""
    import os

    from workers.envs.osworld.vocab import SessionController

    blob = os.urandom(1 << 20)
    terminal.reset(osworld.task_spec_from_json(REAL_SHAPED, kind="terminal"))
    (terminal.session_dir / "big.bin").write_bytes(blob)
    assert SessionController(terminal).get_file("/home/user/big.bin") == blob
    assert SessionController(terminal).get_file("/home/user/missing.bin") is None


def test_an_apps_profile_is_written_once(terminal: TerminalEnv) -> None:
    """Starting an app writes OSWorld's profile for it (VLC: no privacy dialog, its web interface);
    starting it again (a postconfig's `pkill vlc` + `launch vlc`) keeps what the app saved."""
    from workers.envs.osworld.setup import _prepare_profile

    terminal.reset(osworld.task_spec_from_json(REAL_SHAPED, kind="terminal"))
    _prepare_profile(terminal, "vlc")
    vlcrc = terminal.session_dir / ".config" / "vlc" / "vlcrc"
    assert "extraintf=http" in vlcrc.read_text()
    vlcrc.write_text("[qt]\nqt-bgcone=0\n")  # what VLC saved when it quit
    _prepare_profile(terminal, ["vlc", "--no-video-title-show"])
    assert vlcrc.read_text() == "[qt]\nqt-bgcone=0\n"


@pytest.mark.skipif(shutil.which("libreoffice") is None, reason="make osworld-apps DOMAINS=libreoffice")
def test_libreoffice_profile_is_marked_as_run_by_the_installed_version(terminal: TerminalEnv) -> None:
    """Without it LibreOffice opens under a "first time with this version" bar that moves the
    document down, under OSWorld's set-up clicks."""
    import re

    from workers.envs.osworld.setup import _LIBREOFFICE_REGISTRY, _prepare_profile

    terminal.reset(osworld.task_spec_from_json(REAL_SHAPED, kind="terminal"))
    _prepare_profile(terminal, ["libreoffice", "--impress"])
    profile = terminal.session_dir / ".config/libreoffice/4/user/registrymodifications.xcu"
    installed = re.search(r'ooSetupVersion">\s*<value>([0-9.]+)<', _LIBREOFFICE_REGISTRY.read_text())
    assert installed is not None
    assert f'"ooSetupLastVersion" oor:op="fuse"><value>{installed.group(1)}</value>' in profile.read_text()
