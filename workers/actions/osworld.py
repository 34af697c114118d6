"""OSWorld's `computer_13` action dicts ↔ `Action`s.

computer_13 (desktop_env/actions.py): MOVE_TO{x,y}, CLICK{button?,x?,y?,num_clicks?},
MOUSE_DOWN{button?}, MOUSE_UP{button?}, RIGHT_CLICK{x?,y?}, DOUBLE_CLICK{x?,y?}, DRAG_TO{x,y}
(drag from the cursor with the left button), SCROLL{dx,dy} (positive dy scrolls up), TYPING{text},
PRESS{key}, KEY_DOWN{key}, KEY_UP{key}, HOTKEY{keys}, and WAIT / FAIL / DONE (also as bare strings).

Actions must already be in screen pixels (`coords.action_to_screen`). One action can become several
dicts (drag = MOVE_TO + DRAG_TO); reading back recognises those patterns and tracks the cursor, so
`CLICK{}` after `MOVE_TO` is a click there. Nothing raises: unsupported input yields a
`ConversionResult` with an `error` and whatever converted before it.
"""

from __future__ import annotations

import math
import string
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from workers.actions.parse import split_keys
from workers.actions.types import Action, Point

T = TypeVar("T")
SCROLL_CLICKS = 5  # wheel clicks per scroll action, as UI-TARS's own pyautogui converter uses

# pyautogui's key names (what OSWorld validates PRESS / HOTKEY keys against).
KEYBOARD_KEYS: frozenset[str] = frozenset(
    list("\t\n\r " + string.punctuation + string.digits + string.ascii_lowercase)
    + [f"f{n}" for n in range(1, 25)]
    + [f"num{n}" for n in range(10)]
    + """accept add alt altleft altright apps backspace browserback browserfavorites browserforward
    browserhome browserrefresh browsersearch browserstop capslock clear convert ctrl ctrlleft ctrlright
    decimal del delete divide down end enter esc escape execute final fn hanguel hangul hanja help home
    insert junja kana kanji launchapp1 launchapp2 launchmail launchmediaselect left modechange multiply
    nexttrack nonconvert numlock pagedown pageup pause pgdn pgup playpause prevtrack print printscreen
    prntscrn prtsc prtscr return right scrolllock select separator shift shiftleft shiftright sleep
    space stop subtract tab up volumedown volumemute volumeup win winleft winright yen command option
    optionleft optionright""".split()
)
# Names models use that pyautogui spells differently.
KEY_ALIASES = {
    "arrowleft": "left",
    "arrowright": "right",
    "arrowup": "up",
    "arrowdown": "down",
    "control": "ctrl",
    "cmd": "command",
    "meta": "win",
    "super": "win",
    "pgdown": "pgdn",
}
# Whitespace keys read back under a name that survives `hotkey(key='...')`.
_WHITESPACE_KEYS = {" ": "space", "\n": "enter", "\r": "return", "\t": "tab"}
SPECIAL_ACTIONS = {"WAIT": "wait", "DONE": "finished", "FAIL": "call_user"}
SPECIAL_BY_KIND = {kind: name for name, kind in SPECIAL_ACTIONS.items()}


@dataclass(frozen=True)
class ConversionError:
    """Why a conversion stopped; `index` is the input item (action, dict or code string) at fault."""

    message: str
    index: int | None = None


@dataclass(frozen=True)
class ConversionResult(Generic[T]):
    """The converted value (partial when `error` is set)."""

    value: T
    error: ConversionError | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


class Unsupported(Exception):
    def __init__(self, message: str, index: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.index = index


# --- Action -> computer_13 -------------------------------------------------------------------------


def number(value: float) -> int | float:
    """Whole pixel values as int (what OSWorld and pyautogui expect), others unchanged."""
    return int(value) if float(value).is_integer() else float(value)


def _xy(point: Point | None, kind: str) -> dict[str, int | float]:
    if point is None:
        raise Unsupported(f"{kind} needs a point")
    if not (math.isfinite(point.x) and math.isfinite(point.y)) or point.x < 0 or point.y < 0:
        raise Unsupported(f"bad screen coordinates {point}")
    return {"x": number(point.x), "y": number(point.y)}


def pyautogui_key(key: str) -> str:
    """A key name pyautogui / OSWorld accepts; raises Unsupported for unknown names."""
    name = key if key in KEYBOARD_KEYS else key.lower()
    name = KEY_ALIASES.get(name, name)
    if name == "space":
        name = " "  # OSWorld's key list has ' ' but not 'space'
    if name not in KEYBOARD_KEYS:
        raise Unsupported(f"unknown key {key!r}")
    return name


def scroll_deltas(direction: str | None) -> tuple[int, int]:
    """(dx, dy) wheel clicks for a direction; positive dy scrolls up, positive dx right."""
    deltas = {"up": (0, SCROLL_CLICKS), "down": (0, -SCROLL_CLICKS), "left": (-SCROLL_CLICKS, 0)}
    deltas["right"] = (SCROLL_CLICKS, 0)
    if direction not in deltas:
        raise Unsupported(f"bad scroll direction {direction!r}")
    return deltas[direction]


def _op(action_type: str, **parameters: Any) -> dict[str, Any]:
    return {"action_type": action_type, "parameters": parameters}


def action_to_computer13(action: Action) -> list[dict[str, Any]]:
    """The computer_13 dicts for one screen-pixel action; raises Unsupported."""
    kind = action.kind
    if kind == "click":
        return [_op("CLICK", button="left", num_clicks=1, **_xy(action.point, kind))]
    if kind == "left_double":
        return [_op("DOUBLE_CLICK", **_xy(action.point, kind))]
    if kind == "right_single":
        return [_op("RIGHT_CLICK", **_xy(action.point, kind))]
    if kind == "hover":
        return [_op("MOVE_TO", **_xy(action.point, kind))]
    if kind == "drag":
        return [_op("MOVE_TO", **_xy(action.point, kind)), _op("DRAG_TO", **_xy(action.end_point, kind))]
    if kind == "scroll":
        dx, dy = scroll_deltas(action.direction)
        move = [_op("MOVE_TO", **_xy(action.point, kind))] if action.point is not None else []
        return [*move, _op("SCROLL", dx=dx, dy=dy)]
    if kind == "type":
        if not action.text:
            raise Unsupported("type needs text")
        return [_op("TYPING", text=action.text)]
    if kind == "hotkey":
        keys = [pyautogui_key(key) for key in action.keys or ()]
        if not keys:
            raise Unsupported("hotkey needs keys")
        return [_op("PRESS", key=keys[0])] if len(keys) == 1 else [_op("HOTKEY", keys=keys)]
    if kind in SPECIAL_BY_KIND:
        return [_op(SPECIAL_BY_KIND[kind])]
    raise Unsupported(f"{kind} has no computer_13 equivalent")


def to_computer13(actions: Action | Iterable[Action]) -> ConversionResult[list[dict[str, Any]]]:
    """computer_13 dicts for screen-pixel actions. `finished`/`call_user` text is dropped (DONE/FAIL)."""
    items = [actions] if isinstance(actions, Action) else list(actions)
    out: list[dict[str, Any]] = []
    for index, action in enumerate(items):
        try:
            out.extend(action_to_computer13(action))
        except Unsupported as exc:
            return ConversionResult(out, ConversionError(exc.message, index))
        except Exception as exc:  # malformed Action objects: report, never crash the caller
            return ConversionResult(out, ConversionError(f"{type(exc).__name__}: {exc}", index))
    return ConversionResult(out)


# --- computer_13 -> Action -------------------------------------------------------------------------


@dataclass(frozen=True)
class Op:
    """One normalised low-level step: computer_13 type, parameters, and the input item it came from."""

    type: str
    params: dict[str, Any]
    index: int


def normalise_computer13(item: Any, index: int) -> Op:
    if isinstance(item, str):
        if item.strip() in SPECIAL_ACTIONS:
            return Op(item.strip(), {}, index)
        raise Unsupported(f"unknown action string {item[:40]!r}", index)
    if not isinstance(item, dict) or not isinstance(item.get("action_type"), str):
        raise Unsupported("expected a dict with an action_type", index)
    params = item.get("parameters")
    if params is None:
        params = {k: v for k, v in item.items() if k != "action_type"}
    if not isinstance(params, dict):
        raise Unsupported("parameters must be a dict", index)
    return Op(item["action_type"].upper(), params, index)


def from_computer13(items: Any) -> ConversionResult[tuple[Action, ...]]:
    """Actions (screen pixels) from computer_13 dicts or WAIT/DONE/FAIL strings."""
    if isinstance(items, (dict, str)):
        items = [items]
    ops: list[Op] = []
    try:
        for index, item in enumerate(items):
            ops.append(normalise_computer13(item, index))
    except Unsupported as exc:
        partial = ops_to_actions(ops)
        return ConversionResult(partial.value, partial.error or ConversionError(exc.message, exc.index))
    except Exception as exc:
        return ConversionResult((), ConversionError(f"not a list of actions: {type(exc).__name__}"))
    return ops_to_actions(ops)


def ops_to_actions(ops: Sequence[Op]) -> ConversionResult[tuple[Action, ...]]:
    """Match low-level steps to actions, tracking where the cursor is."""
    actions: list[Action] = []
    cursor: Point | None = None
    i = 0
    while i < len(ops):
        try:
            action, consumed, cursor = _match(ops, i, cursor)
        except Unsupported as exc:
            return ConversionResult(tuple(actions), ConversionError(exc.message, ops[i].index))
        except Exception as exc:
            return ConversionResult(
                tuple(actions), ConversionError(f"{type(exc).__name__}: {exc}", ops[i].index)
            )
        actions.append(action)
        i += consumed
    return ConversionResult(tuple(actions))


def _point(params: dict[str, Any]) -> Point | None:
    """The x, y parameters as a point, None when both are absent."""
    if params.get("x") is None and params.get("y") is None:
        return None
    return _need_point(params)


def _need_point(params: dict[str, Any]) -> Point:
    x, y = params.get("x"), params.get("y")
    if not (_is_coordinate(x) and _is_coordinate(y)):
        raise Unsupported(f"bad coordinates x={x!r}, y={y!r}")
    return Point(float(x), float(y))  # type: ignore[arg-type]


def _is_coordinate(value: Any) -> bool:
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value >= 0
    )


def _at(params: dict[str, Any], cursor: Point | None, what: str) -> Point:
    point = _point(params)
    if point is None:
        if cursor is None:
            raise Unsupported(f"{what} without coordinates and the cursor position is unknown")
        return cursor
    return point


def _click_kind(op: Op) -> str:
    if op.type == "DOUBLE_CLICK":
        return "left_double"
    if op.type == "RIGHT_CLICK":
        return "right_single"
    button = str(op.params.get("button") or "left").lower()
    clicks = op.params.get("num_clicks", 1)
    kinds = {("left", 1): "click", ("left", 2): "left_double", ("right", 1): "right_single"}
    if (button, clicks) not in kinds:
        raise Unsupported(f"CLICK with button={button!r}, num_clicks={clicks!r} is not supported")
    return kinds[(button, clicks)]


def _direction(params: dict[str, Any]) -> str:
    dx, dy = params.get("dx", 0) or 0, params.get("dy", 0) or 0
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (dx, dy)):
        raise Unsupported(f"bad scroll amounts dx={dx!r}, dy={dy!r}")
    if (dx == 0) == (dy == 0):
        raise Unsupported(f"SCROLL needs exactly one of dx, dy non-zero, got dx={dx}, dy={dy}")
    if dy:
        return "up" if dy > 0 else "down"
    return "right" if dx > 0 else "left"


def action_key(key: Any) -> str:
    """A key name as hotkey(key='...') can carry it."""
    if not isinstance(key, str) or not key:
        raise Unsupported(f"bad key {key!r}")
    name = _WHITESPACE_KEYS.get(key, key)
    try:
        single = split_keys(name) == (name,)
    except ValueError:
        single = False
    if not single:
        raise Unsupported(f"key {key!r} cannot be written as a hotkey")
    return name


def _is_plain_button(op: Op, action_type: str) -> bool:
    return op.type == action_type and str(op.params.get("button") or "left").lower() == "left"


def _match(ops: Sequence[Op], i: int, cursor: Point | None) -> tuple[Action, int, Point | None]:
    """The action starting at ops[i], how many ops it used, and the cursor afterwards."""
    op = ops[i]
    nxt = ops[i + 1] if i + 1 < len(ops) else None
    if op.type == "MOVE_TO":
        p = _need_point(op.params)
        if nxt is not None and nxt.type == "DRAG_TO":
            q = _need_point(nxt.params)
            return Action(kind="drag", point=p, end_point=q), 2, q
        if nxt is not None and nxt.type == "SCROLL":
            return Action(kind="scroll", point=p, direction=_direction(nxt.params)), 2, p
        if (
            nxt is not None
            and nxt.type in ("CLICK", "DOUBLE_CLICK", "RIGHT_CLICK")
            and _point(nxt.params) is None
        ):
            return Action(kind=_click_kind(nxt), point=p), 2, p  # type: ignore[arg-type]
        if nxt is not None and _is_plain_button(nxt, "MOUSE_DOWN"):
            return _press_drag(ops, i + 1, p, lead=1)
        return Action(kind="hover", point=p), 1, p
    if op.type in ("CLICK", "DOUBLE_CLICK", "RIGHT_CLICK"):
        p = _at(op.params, cursor, op.type)
        return Action(kind=_click_kind(op), point=p), 1, p  # type: ignore[arg-type]
    if op.type == "DRAG_TO":
        q = _need_point(op.params)
        if cursor is None:
            raise Unsupported("DRAG_TO with the cursor position unknown")
        return Action(kind="drag", point=cursor, end_point=q), 1, q
    if op.type == "MOUSE_DOWN" and cursor is not None and _is_plain_button(op, "MOUSE_DOWN"):
        return _press_drag(ops, i, cursor, lead=0)
    if op.type == "SCROLL":
        return Action(kind="scroll", direction=_direction(op.params)), 1, cursor
    if op.type == "TYPING":
        text = op.params.get("text")
        if isinstance(text, list) and all(isinstance(c, str) for c in text):
            text = "".join(text)
        if not isinstance(text, str) or not text:
            raise Unsupported("TYPING needs non-empty text")
        return Action(kind="type", text=text), 1, cursor
    if op.type == "PRESS":
        return Action(kind="hotkey", keys=(action_key(op.params.get("key")),)), 1, cursor
    if op.type == "HOTKEY":
        keys = op.params.get("keys")
        if not isinstance(keys, list) or not keys:
            raise Unsupported("HOTKEY needs a non-empty list of keys")
        return Action(kind="hotkey", keys=tuple(action_key(k) for k in keys)), 1, cursor
    if op.type == "KEY_DOWN":
        return _held_keys(ops, i, cursor)
    if op.type in SPECIAL_ACTIONS:
        return Action(kind=SPECIAL_ACTIONS[op.type]), 1, cursor  # type: ignore[arg-type]
    raise Unsupported(f"{op.type} has no equivalent action here")


def _press_drag(ops: Sequence[Op], i: int, start: Point, lead: int) -> tuple[Action, int, Point | None]:
    """MOUSE_DOWN at ops[i], MOVE_TO/DRAG_TO q, MOUSE_UP → drag(start, q); `lead` ops came before."""
    if (
        i + 2 < len(ops)
        and ops[i + 1].type in ("MOVE_TO", "DRAG_TO")
        and _is_plain_button(ops[i + 2], "MOUSE_UP")
    ):
        q = _need_point(ops[i + 1].params)
        return Action(kind="drag", point=start, end_point=q), 3 + lead, q
    raise Unsupported("MOUSE_DOWN is only supported as MOUSE_DOWN, MOVE_TO, MOUSE_UP (a drag)")


def _held_keys(ops: Sequence[Op], i: int, cursor: Point | None) -> tuple[Action, int, Point | None]:
    """KEY_DOWN k1..kn followed by KEY_UP of the same keys → hotkey(k1..kn)."""
    j = i
    down: list[str] = []
    while j < len(ops) and ops[j].type == "KEY_DOWN":
        down.append(action_key(ops[j].params.get("key")))
        j += 1
    up: list[str] = []
    while j < len(ops) and ops[j].type == "KEY_UP" and len(up) < len(down):
        up.append(action_key(ops[j].params.get("key")))
        j += 1
    if sorted(up) != sorted(down):
        raise Unsupported("KEY_DOWN is only supported as held keys released together (a hotkey)")
    return Action(kind="hotkey", keys=tuple(down)), j - i, cursor
