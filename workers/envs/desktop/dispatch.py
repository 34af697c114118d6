"""Map each `Action` kind the desktop supports onto XTEST input; others raise `UnsupportedAction`."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from workers.actions.types import COMPUTER_KINDS, TERMINAL_KINDS, Action, Point
from workers.envs.base import EnvError
from workers.envs.desktop.config import DesktopConfig
from workers.envs.desktop.xinput import BUTTON_LEFT, BUTTON_RIGHT, XInput

SUPPORTED_KINDS: frozenset[str] = COMPUTER_KINDS | {"answer", "mcp_call"}
ENDING_KINDS: frozenset[str] = TERMINAL_KINDS & SUPPORTED_KINDS


class UnsupportedAction(EnvError):
    """The action kind has no meaning on this environment (e.g. press_home on a desktop)."""


def execute_action(
    config: DesktopConfig, xin: XInput, action: Action, mcp_toolbox: Callable[[], Any]
) -> tuple[bool, dict[str, Any]]:
    """Perform `action` on a screen of `config`'s size; return (episode done, info). `mcp_toolbox`
    gives the session's MCP client for `mcp_call`. Raises EnvError for bad or unsupported actions."""
    kind = action.kind
    if kind not in SUPPORTED_KINDS:
        raise UnsupportedAction(f"action {kind!r} is not supported on the desktop")
    info: dict[str, Any] = {"action": action.to_json()}
    if kind in {"click", "left_double", "right_single", "hover", "scroll"}:
        point = _screen_point(config, action.point, kind)
        info["executed_point"] = [round(point.x), round(point.y)]
        _pointer(config, xin, action, point)
    elif kind == "drag":
        start = _screen_point(config, action.point, kind)
        end = _screen_point(config, action.end_point, "drag end")
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
        time.sleep(config.wait_s)
    elif kind == "mcp_call":
        info["mcp"] = mcp_toolbox().call_action(action)
    elif kind in ENDING_KINDS and action.text is not None:
        info["answer"] = action.text
    return kind in ENDING_KINDS, info


def _pointer(config: DesktopConfig, xin: XInput, action: Action, point: Point) -> None:
    if action.kind == "click":
        xin.click(point.x, point.y, BUTTON_LEFT)
    elif action.kind == "left_double":
        xin.click(point.x, point.y, BUTTON_LEFT, count=2)
    elif action.kind == "right_single":
        xin.click(point.x, point.y, BUTTON_RIGHT)
    elif action.kind == "hover":
        xin.move(point.x, point.y)
    else:  # scroll
        xin.scroll(point.x, point.y, action.direction or "down", config.scroll_clicks)


def _screen_point(config: DesktopConfig, point: Point | None, what: str) -> Point:
    """The action's point, checked to lie on the screen (coordinates are screen pixels here)."""
    if point is None:
        raise EnvError(f"{what} needs a point")
    width, height = config.width, config.height
    if not (0 <= point.x < width and 0 <= point.y < height):
        raise EnvError(f"{what} point ({point.x:g}, {point.y:g}) is outside the {width}x{height} screen")
    return point
