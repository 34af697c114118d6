"""The seam for real VMs (workers/envs/osworld/vm.py): our actions become pyautogui code that really
drives a desktop; OSWorld task specs become DesktopEnv task configs; a host without desktop-env's
VM dependencies is refused with the reason, and the default backend stays the Xvfb desktop."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from workers.actions.types import Action, Point
from workers.envs import osworld
from workers.envs.base import EnvError, Environment
from workers.envs.desktop import DesktopConfig, DesktopEnv
from workers.envs.factory import make_desktop
from workers.envs.osworld.vm import OSWorldVMEnv, osworld_task_config, pyautogui_code


def test_actions_map_to_osworld_pyautogui_space() -> None:
    assert pyautogui_code(Action("click", point=Point(10.4, 20.6))) == "pyautogui.click(10, 21)"
    assert pyautogui_code(Action("hotkey", keys=("Ctrl", "s"))) == 'pyautogui.hotkey("ctrl", "s")'
    assert pyautogui_code(Action("scroll", direction="up")) == "pyautogui.scroll(5)"
    assert pyautogui_code(Action("wait")) == "WAIT"
    assert pyautogui_code(Action("finished")) == "DONE"
    assert pyautogui_code(Action("call_user")) == "FAIL"  # OSWorld's infeasible answer
    with pytest.raises(EnvError, match="no OSWorld desktop equivalent"):
        pyautogui_code(Action("press_home"))


@pytest.mark.skipif(osworld.pyautogui_dir() is None, reason="make osworld-apps installs pyautogui")
def test_the_generated_code_drives_a_real_desktop(tmp_path: Path) -> None:
    """What OSWorld's VM would run, run by pyautogui against a real session (its sandbox's python3)."""
    env = DesktopEnv(DesktopConfig(display_range=(170, 180), vnc=False, session_dir=tmp_path))
    try:
        env.reset(osworld.task_spec_from_json(osworld.load_examples()[0], kind="desktop"))
        code = "; ".join(
            [
                pyautogui_code(Action("click", point=Point(200, 200))),
                pyautogui_code(Action("type", text="echo seam > ~/seam.txt\n")),
            ]
        )
        assert env.run_command(["python3", "-c", f"import pyautogui; {code}"], timeout_s=30).ok
        deadline = time.monotonic() + 10
        while not (tmp_path / "seam.txt").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert (tmp_path / "seam.txt").read_text() == "seam\n"
    finally:
        env.close()


def test_task_config_and_refusal_without_vm_dependencies(monkeypatch: pytest.MonkeyPatch) -> None:
    task = osworld.load_examples()[0]
    spec = osworld.task_spec_from_json(task)
    config = osworld_task_config(spec)
    assert config["id"] == task["id"] and config["config"] == task["config"]
    assert config["evaluator"] == task["evaluator"]
    # This host has no gymnasium / docker SDK: the backend says so at construction.
    with pytest.raises(EnvError, match="needs desktop-env's own dependencies"):
        OSWorldVMEnv(provider="docker")
    monkeypatch.setenv("FLYWHEEL_DESKTOP_BACKEND", "osworld-vm")
    with pytest.raises(EnvError, match="needs desktop-env's own dependencies"):
        make_desktop()
    monkeypatch.setenv("FLYWHEEL_DESKTOP_BACKEND", "qemu")
    with pytest.raises(ValueError, match="xvfb' or 'osworld-vm"):
        make_desktop()
    monkeypatch.delenv("FLYWHEEL_DESKTOP_BACKEND")
    default = make_desktop()
    assert isinstance(default, DesktopEnv) and isinstance(default, Environment)
    default.close()
