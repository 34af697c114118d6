"""ADB command lines for driving a real Android device with the same mobile actions as `PhoneEnv`.

NOT EXERCISED HERE: this machine has no device or emulator, so only the command lines this module
builds are unit-tested (tests/envs/test_phone_adb.py); running them against a device is untested.
Screenshot: `adb exec-out screencap -p` (PNG bytes on stdout).
"""

from __future__ import annotations

import shlex

from workers.actions.types import Action
from workers.envs.base import EnvError

KEYCODES = {"enter": "66", "back": "4", "home": "3", "delete": "67", "backspace": "67", "tab": "61"}
SWIPE_PX = 600


def adb_commands(
    action: Action, serial: str | None = None, apps: dict[str, str] | None = None
) -> list[list[str]]:
    """The adb argv lists that carry out `action` (pixels of the device screen)."""
    base = ["adb", *(["-s", serial] if serial else [])]
    shell = [*base, "shell", "input"]
    p, kind = action.point, action.kind
    if kind in ("click", "long_press", "swipe", "drag") and p is None:
        raise EnvError(f"{kind} needs a point")
    if kind == "click":
        return [[*shell, "tap", f"{p.x:.0f}", f"{p.y:.0f}"]]  # type: ignore[union-attr]
    if kind == "long_press":
        return [[*shell, "swipe", f"{p.x:.0f}", f"{p.y:.0f}", f"{p.x:.0f}", f"{p.y:.0f}", "800"]]  # type: ignore[union-attr]
    if kind in ("swipe", "drag"):
        e = action.end_point
        if e is None:
            d = {"up": (0, -SWIPE_PX), "down": (0, SWIPE_PX), "left": (-SWIPE_PX, 0), "right": (SWIPE_PX, 0)}
            if action.direction not in d:
                raise EnvError("swipe needs an end_point or a direction")
            dx, dy = d[action.direction]
            ex, ey = p.x + dx, p.y + dy  # type: ignore[union-attr]
        else:
            ex, ey = e.x, e.y
        return [[*shell, "swipe", f"{p.x:.0f}", f"{p.y:.0f}", f"{ex:.0f}", f"{ey:.0f}", "300"]]  # type: ignore[union-attr]
    if kind == "type":
        text = action.text or ""
        enter = text.endswith("\n")
        body = text.rstrip("\n").replace(" ", "%s")  # `input text` reads %s as a space
        cmds = [[*shell, "text", shlex.quote(body)]] if body else []
        return cmds + ([[*shell, "keyevent", KEYCODES["enter"]]] if enter else [])
    if kind == "press_back":
        return [[*shell, "keyevent", KEYCODES["back"]]]
    if kind == "press_home":
        return [[*shell, "keyevent", KEYCODES["home"]]]
    if kind == "open_app":
        name = (action.text or "").lower()
        if not apps or name not in apps:
            raise EnvError(f"unknown app {action.text!r}")
        return [[*base, "shell", "am", "start", "-n", apps[name]]]
    raise EnvError(f"action {kind!r} has no adb mapping")


def screenshot_command(serial: str | None = None) -> list[str]:
    return ["adb", *(["-s", serial] if serial else []), "exec-out", "screencap", "-p"]
