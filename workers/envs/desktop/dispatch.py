"""Map each `Action` kind the desktop supports onto XTEST input; others raise `UnsupportedAction`."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from workers.actions.types import COMPUTER_KINDS, TERMINAL_KINDS, Action, Point
from workers.envs.base import EnvError
from workers.envs.desktop.xinput import BUTTON_LEFT, BUTTON_RIGHT, XInput

if TYPE_CHECKING:
    from workers.envs.desktop.env import DesktopEnv

SUPPORTED_KINDS: frozenset[str] = COMPUTER_KINDS | {"answer", "mcp_call"}
ENDING_KINDS: frozenset[str] = TERMINAL_KINDS & SUPPORTED_KINDS


class UnsupportedAction(EnvError):
    """The action kind has no meaning on this environment (e.g. press_home on a desktop)."""


def execute_action(env: DesktopEnv, xin: XInput, action: Action) -> tuple[bool, dict[str, Any]]:
    """Perform `action`; return (episode done, info). Raises EnvError for bad or unsupported actions."""
    kind = action.kind
    if kind not in SUPPORTED_KINDS:
        raise UnsupportedAction(f"action {kind!r} is not supported on the desktop")
    info: dict[str, Any] = {"action": action.to_json()}
    if kind in {"click", "left_double", "right_single", "hover", "scroll"}:
        point = _screen_point(env, action.point, kind)
        info["executed_point"] = [round(point.x), round(point.y)]
        _pointer(env, xin, action, point)
    elif kind == "drag":
        start = _screen_point(env, action.point, kind)
        end = _screen_point(env, action.end_point, "drag end")
        xin.drag(start.x, start.y, end.x, end.y)
        info["executed_point"] = [round(start.x), round(start.y)]
        info["executed_end_point"] = [round(end.x), round(end.y)]
    elif kind == "hotkey":
        if not action.keys:
            raise EnvError("hotkey needs keys")
        xin.hotkey(action.keys)
    elif kind == "type":
        if action.text is None:
            raise EnvError("type needs text")
        xin.type_text(action.text)
    elif kind == "wait":
        time.sleep(env.config.wait_s)
    elif kind == "mcp_call":
        info["mcp"] = env.mcp_toolbox().call_action(action)
    elif kind in ENDING_KINDS and action.text is not None:
        info["answer"] = action.text
    return kind in ENDING_KINDS, info


def _pointer(env: DesktopEnv, xin: XInput, action: Action, point: Point) -> None:
    if action.kind == "click":
        xin.click(point.x, point.y, BUTTON_LEFT)
    elif action.kind == "left_double":
        xin.click(point.x, point.y, BUTTON_LEFT, count=2)
    elif action.kind == "right_single":
        xin.click(point.x, point.y, BUTTON_RIGHT)
    elif action.kind == "hover":
        xin.move(point.x, point.y)
    else:  # scroll
        xin.scroll(point.x, point.y, action.direction or "down", env.config.scroll_clicks)


def _screen_point(env: DesktopEnv, point: Point | None, what: str) -> Point:
    """The action's point, checked to lie on the screen (coordinates are screen pixels here)."""
    if point is None:
        raise EnvError(f"{what} needs a point")
    width, height = env.config.width, env.config.height
    if not (0 <= point.x < width and 0 <= point.y < height):
        raise EnvError(f"{what} point ({point.x:g}, {point.y:g}) is outside the {width}x{height} screen")
    return point
