"""Execute computer-kind `Action`s on a pooled page with Playwright's mouse and keyboard.

Coordinates are page (CSS) pixels of the session's viewport, i.e. `Convention.SCREEN` for these
environments; callers convert model coordinates first (`workers.actions.coords`). Points outside
the viewport are refused with `EnvError` rather than silently clamped, so a wrong conversion shows.
"""

from __future__ import annotations

from workers.actions.types import INPUT_KINDS, Action, Point
from workers.envs.base import EnvError
from workers.envs.browser.pool import PageSession

# Model key names (UI-TARS / pyautogui style, lower-case) → Playwright key names.
KEY_NAMES: dict[str, str] = {
    "ctrl": "Control",
    "control": "Control",
    "alt": "Alt",
    "option": "Alt",
    "shift": "Shift",
    "cmd": "Meta",
    "command": "Meta",
    "meta": "Meta",
    "win": "Meta",
    "super": "Meta",
    "enter": "Enter",
    "return": "Enter",
    "esc": "Escape",
    "escape": "Escape",
    "tab": "Tab",
    "backspace": "Backspace",
    "delete": "Delete",
    "del": "Delete",
    "space": "Space",
    "up": "ArrowUp",
    "down": "ArrowDown",
    "left": "ArrowLeft",
    "right": "ArrowRight",
    "arrowup": "ArrowUp",
    "arrowdown": "ArrowDown",
    "arrowleft": "ArrowLeft",
    "arrowright": "ArrowRight",
    "pageup": "PageUp",
    "pagedown": "PageDown",
    "home": "Home",
    "end": "End",
    "insert": "Insert",
}
SCROLL_STEP_PX = 120  # one wheel notch; a scroll action turns the wheel `SCROLL_NOTCHES` times
SCROLL_NOTCHES = 3


def key_name(key: str) -> str:
    """Map one model key name to Playwright's; raises `EnvError` for names it does not know."""
    k = key.strip()
    low = k.lower()
    if low in KEY_NAMES:
        return KEY_NAMES[low]
    if len(k) == 1:
        return k
    if low.startswith("f") and low[1:].isdigit() and 1 <= int(low[1:]) <= 12:
        return f"F{int(low[1:])}"
    raise EnvError(f"unknown key {key!r}")


def require_point(action: Action, viewport: tuple[int, int], end: bool = False) -> Point:
    """The action's (end) point, checked to lie inside the viewport."""
    point = action.end_point if end else action.point
    if point is None:
        raise EnvError(f"{action.kind} needs {'an end_point' if end else 'a point'}")
    width, height = viewport
    if not (0 <= point.x < width and 0 <= point.y < height):
        raise EnvError(
            f"{action.kind} point ({point.x:.0f},{point.y:.0f}) is outside the {width}x{height} page"
        )
    return point


def scroll_delta(direction: str | None) -> tuple[int, int]:
    """Wheel (dx, dy) for one scroll action in `direction`."""
    amount = SCROLL_STEP_PX * SCROLL_NOTCHES
    deltas = {"down": (0, amount), "up": (0, -amount), "right": (amount, 0), "left": (-amount, 0)}
    if direction not in deltas:
        raise EnvError(f"scroll direction must be one of up/down/left/right, not {direction!r}")
    return deltas[direction]


async def perform(session: PageSession, action: Action, wait_s: float = 1.0) -> None:
    """Carry out one browser action. `finished`-like kinds are the caller's business, not ours."""
    page, viewport = session.page, session.viewport
    kind = action.kind
    if kind not in INPUT_KINDS:
        raise EnvError(f"action {kind!r} is not supported in a browser page")
    if kind == "click":
        p = require_point(action, viewport)
        await page.mouse.click(p.x, p.y)
    elif kind == "left_double":
        p = require_point(action, viewport)
        await page.mouse.dblclick(p.x, p.y)
    elif kind == "right_single":
        p = require_point(action, viewport)
        await page.mouse.click(p.x, p.y, button="right")
    elif kind == "hover":
        p = require_point(action, viewport)
        await page.mouse.move(p.x, p.y)
    elif kind == "drag":
        start, end = require_point(action, viewport), require_point(action, viewport, end=True)
        await page.mouse.move(start.x, start.y)
        await page.mouse.down()
        await page.mouse.move(end.x, end.y, steps=8)  # intermediate moves so drag handlers fire
        await page.mouse.up()
    elif kind == "type":
        if not action.text:
            raise EnvError("type needs non-empty text")
        await page.keyboard.type(action.text)  # "\n" (also trailing) is pressed as Enter
    elif kind == "hotkey":
        if not action.keys:
            raise EnvError("hotkey needs keys")
        await page.keyboard.press("+".join(key_name(k) for k in action.keys))
    elif kind == "scroll":
        p = require_point(action, viewport)
        dx, dy = scroll_delta(action.direction)
        await page.mouse.move(p.x, p.y)
        await page.mouse.wheel(dx, dy)
    elif kind == "wait":
        await page.wait_for_timeout(wait_s * 1000)
