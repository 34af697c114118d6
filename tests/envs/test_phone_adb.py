"""ADB command lines (no device here: only the argv the driver would run is checked)."""

import pytest

from workers.actions.types import Action, Point
from workers.envs.base import EnvError
from workers.envs.phone.adb import adb_commands, screenshot_command


def test_tap_swipe_text_keys() -> None:
    assert adb_commands(Action("click", point=Point(10, 20)), "emu") == [
        ["adb", "-s", "emu", "shell", "input", "tap", "10", "20"]
    ]
    assert adb_commands(Action("swipe", point=Point(100, 700), direction="up"))[0][-5:] == [
        "100",
        "700",
        "100",
        "100",
        "300",
    ]
    assert adb_commands(Action("type", text="a b\n")) == [
        ["adb", "shell", "input", "text", "a%sb"],
        ["adb", "shell", "input", "keyevent", "66"],
    ]
    assert adb_commands(Action("press_back"))[0][-1] == "4"
    assert (
        adb_commands(
            Action("open_app", text="Settings"), apps={"settings": "com.android.settings/.Settings"}
        )[0][-1]
        == "com.android.settings/.Settings"
    )
    assert screenshot_command() == ["adb", "exec-out", "screencap", "-p"]


def test_bad_actions() -> None:
    with pytest.raises(EnvError):
        adb_commands(Action("open_app", text="maps"), apps={})
    with pytest.raises(EnvError):
        adb_commands(Action("click"))
