"""pyautogui code strings (OSWorld's `pyautogui` action space) ↔ `Action`s.

Writing: one string per screen-pixel action — `pyautogui.click(640, 400)`, or the special strings
`WAIT` / `DONE` / `FAIL`. Reading: code is parsed with `ast` and only whitelisted, literal-argument
calls are understood (`pyautogui.*`, `time.sleep`, `pyperclip.copy` + ctrl+v, imports, docstrings);
it is never evaluated. Anything else gives a `ConversionResult` with an error, not an exception.
"""

from __future__ import annotations

import ast
import warnings
from collections.abc import Iterable
from typing import Any

from workers.actions.osworld import (
    SPECIAL_ACTIONS,
    SPECIAL_BY_KIND,
    ConversionError,
    ConversionResult,
    Op,
    Unsupported,
    number,
    ops_to_actions,
    pyautogui_key,
    scroll_deltas,
)
from workers.actions.types import Action, Point

DRAG_SECONDS = 0.5  # an instant drag is often not registered by the target application
_MAX_CODE_CHARS = 100_000
_MAX_PRESSES = 100

# Positional parameter names of the pyautogui functions we read (only these arguments are looked at).
_SIGNATURES: dict[str, tuple[str, ...]] = {
    "click": ("x", "y", "clicks", "interval", "button"),
    "doubleClick": ("x", "y", "interval", "button"),
    "rightClick": ("x", "y"),
    "moveTo": ("x", "y"),
    "dragTo": ("x", "y", "duration", "tween", "button", "logScreenshot", "_pause", "mouseDownUp"),
    "mouseDown": ("x", "y", "button"),
    "mouseUp": ("x", "y", "button"),
    "scroll": ("clicks", "x", "y"),
    "vscroll": ("clicks", "x", "y"),
    "hscroll": ("clicks", "x", "y"),
    "write": ("message",),
    "typewrite": ("message",),
    "press": ("keys", "presses"),
    "keyDown": ("key",),
    "keyUp": ("key",),
}
_IGNORED_MODULES = frozenset({"pyautogui", "time", "pyperclip"})


# --- Action -> code --------------------------------------------------------------------------------


def _xy(point: Point | None) -> str:
    if point is None:
        raise Unsupported("missing point")
    return f"{number(point.x)!r}, {number(point.y)!r}"


def action_to_pyautogui(action: Action) -> str:
    """Code (or WAIT/DONE/FAIL) for one screen-pixel action; raises Unsupported."""
    kind = action.kind
    simple = {"click": "click", "left_double": "doubleClick", "right_single": "rightClick", "hover": "moveTo"}
    if kind in simple:
        return f"pyautogui.{simple[kind]}({_xy(action.point)})"
    if kind == "drag":
        return (
            f"pyautogui.moveTo({_xy(action.point)})\n"
            f"pyautogui.dragTo({_xy(action.end_point)}, duration={DRAG_SECONDS}, button='left')"
        )
    if kind == "scroll":
        dx, dy = scroll_deltas(action.direction)
        function, clicks = ("scroll", dy) if dy else ("hscroll", dx)
        if action.point is None:
            return f"pyautogui.{function}({clicks})"
        x, y = number(action.point.x), number(action.point.y)
        return f"pyautogui.{function}({clicks}, x={x!r}, y={y!r})"
    if kind == "type":
        if not action.text:
            raise Unsupported("type needs text")
        return f"pyautogui.write({action.text!r})"
    if kind == "hotkey":
        keys = [pyautogui_key(key) for key in action.keys or ()]
        if not keys:
            raise Unsupported("hotkey needs keys")
        if len(keys) == 1:
            return f"pyautogui.press({keys[0]!r})"
        return f"pyautogui.hotkey({', '.join(repr(k) for k in keys)})"
    if kind in SPECIAL_BY_KIND:
        return SPECIAL_BY_KIND[kind]
    raise Unsupported(f"{kind} has no pyautogui equivalent")


def to_pyautogui(actions: Action | Iterable[Action]) -> ConversionResult[list[str]]:
    """One code string per action (see `action_to_pyautogui`); `finished` text is dropped (DONE)."""
    items = [actions] if isinstance(actions, Action) else list(actions)
    out: list[str] = []
    for index, action in enumerate(items):
        try:
            out.append(action_to_pyautogui(action))
        except Unsupported as exc:
            return ConversionResult(out, ConversionError(exc.message, index))
        except Exception as exc:
            return ConversionResult(out, ConversionError(f"{type(exc).__name__}: {exc}", index))
    return ConversionResult(out)


# --- code -> Action --------------------------------------------------------------------------------


def from_pyautogui(code: str | Iterable[str]) -> ConversionResult[tuple[Action, ...]]:
    """Actions (screen pixels) from pyautogui code strings / WAIT / DONE / FAIL; never raises."""
    snippets = [code] if isinstance(code, str) else code
    ops: list[Op] = []
    try:
        for index, snippet in enumerate(snippets):
            ops.extend(_code_to_ops(snippet, index))
    except Unsupported as exc:
        partial = ops_to_actions(ops)
        return ConversionResult(partial.value, partial.error or ConversionError(exc.message, exc.index))
    except Exception as exc:
        return ConversionResult((), ConversionError(f"cannot read code: {type(exc).__name__}: {exc}"))
    return ops_to_actions(ops)


def _code_to_ops(code: Any, index: int) -> list[Op]:
    if not isinstance(code, str):
        raise Unsupported("code must be a string", index)
    if code.strip() in SPECIAL_ACTIONS:
        return [Op(code.strip(), {}, index)]
    if len(code) > _MAX_CODE_CHARS:
        raise Unsupported("code too long", index)
    try:
        with warnings.catch_warnings():  # invalid escapes in agent code are its problem, not log noise
            warnings.simplefilter("ignore", (SyntaxWarning, DeprecationWarning))
            tree = ast.parse(code, mode="exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise Unsupported(f"not valid Python: {exc}", index) from None
    ops: list[Op] = []
    clipboard: str | None = None
    for statement in tree.body:
        try:
            new_ops, clipboard = _statement_ops(statement, clipboard, index)
        except Unsupported as exc:
            raise Unsupported(f"line {statement.lineno}: {exc.message}", index) from None
        ops.extend(new_ops)
    if clipboard is not None:
        raise Unsupported("pyperclip.copy(...) is never pasted", index)
    return ops


def _statement_ops(statement: ast.stmt, clipboard: str | None, index: int) -> tuple[list[Op], str | None]:
    if isinstance(statement, ast.Import) and all(a.name in _IGNORED_MODULES for a in statement.names):
        return [], clipboard
    if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
        return [], clipboard  # a docstring / comment string
    if isinstance(statement, ast.Assign) and all(_is_pyautogui_setting(t) for t in statement.targets):
        return [], clipboard  # pyautogui.FAILSAFE = False, pyautogui.PAUSE = 0.1
    if not (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call)):
        raise Unsupported(f"unsupported statement {type(statement).__name__}")
    call = statement.value
    func = call.func
    if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)):
        raise Unsupported("only module.function(...) calls are supported")
    module, name = func.value.id, func.attr
    if module == "time" and name == "sleep":
        return [], clipboard
    if module == "pyperclip" and name == "copy":
        text = _literal(call.args[0]) if len(call.args) == 1 and not call.keywords else None
        if not isinstance(text, str):
            raise Unsupported("pyperclip.copy needs one string")
        return [], text
    if module != "pyautogui":
        raise Unsupported(f"unsupported call {module}.{name}")
    if name == "hotkey":
        keys = [_literal(arg) for arg in call.args]
        if not keys or any(isinstance(arg, ast.Starred) for arg in call.args):
            raise Unsupported("pyautogui.hotkey needs literal keys")
        if clipboard is not None and [str(k).lower() for k in keys] in (["ctrl", "v"], ["command", "v"]):
            return [Op("TYPING", {"text": clipboard}, index)], None
        return [Op("HOTKEY", {"keys": keys}, index)], clipboard
    if clipboard is not None:
        raise Unsupported("pyperclip.copy(...) must be followed by a ctrl+v hotkey")
    return _call_ops(name, _bind(name, call), index), None


def _is_pyautogui_setting(target: ast.expr) -> bool:
    return (
        isinstance(target, ast.Attribute)
        and isinstance(target.value, ast.Name)
        and target.value.id == "pyautogui"
    )


def _literal(node: ast.expr) -> Any:
    try:
        return ast.literal_eval(node)  # constants only: no names, calls or attribute access
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise Unsupported(f"argument is not a literal: {ast.dump(node)[:60]}") from None


def _bind(name: str, call: ast.Call) -> dict[str, Any]:
    """Literal values of the arguments we use; others (duration, tween, ...) are ignored unread."""
    if name not in _SIGNATURES:
        raise Unsupported(f"unsupported pyautogui function {name!r}")
    positional = _SIGNATURES[name]
    if len(call.args) > len(positional) or any(isinstance(arg, ast.Starred) for arg in call.args):
        raise Unsupported(f"too many positional arguments for pyautogui.{name}")
    nodes: dict[str, ast.expr] = dict(zip(positional, call.args, strict=False))
    for keyword in call.keywords:
        if keyword.arg is None:
            raise Unsupported("**kwargs are not supported")
        nodes[keyword.arg] = keyword.value
    used = {"x", "y", "clicks", "button", "message", "keys", "presses", "key", "mouseDownUp"}
    values = {key: _literal(node) for key, node in nodes.items() if key in used}
    x = values.get("x")
    if isinstance(x, (tuple, list)) and len(x) == 2 and values.get("y") is None and name != "scroll":
        values["x"], values["y"] = x  # pyautogui.click((x, y))
    return values


def _call_ops(name: str, args: dict[str, Any], index: int) -> list[Op]:
    coords = (
        {"x": args.get("x"), "y": args.get("y")}
        if args.get("x") is not None or args.get("y") is not None
        else {}
    )
    if name == "click":
        params = {"button": args.get("button", "left"), "num_clicks": args.get("clicks", 1), **coords}
        return [Op("CLICK", params, index)]
    if name == "doubleClick":
        if str(args.get("button", "left")).lower() != "left":
            raise Unsupported("only left double clicks are supported")
        return [Op("DOUBLE_CLICK", coords, index)]
    if name in ("rightClick", "moveTo"):
        if name == "moveTo" and not coords:
            raise Unsupported("pyautogui.moveTo needs coordinates")
        return [Op("RIGHT_CLICK" if name == "rightClick" else "MOVE_TO", coords, index)]
    if name == "dragTo":
        if str(args.get("button", "left")).lower() != "left" or args.get("mouseDownUp", True) is not True:
            raise Unsupported("only left-button dragTo with mouseDownUp is supported")
        return [Op("DRAG_TO", coords, index)]
    if name in ("mouseDown", "mouseUp"):
        move = [Op("MOVE_TO", coords, index)] if coords else []
        button = {"button": args["button"]} if "button" in args else {}
        return [*move, Op("MOUSE_DOWN" if name == "mouseDown" else "MOUSE_UP", button, index)]
    if name in ("scroll", "vscroll", "hscroll"):
        clicks = args.get("clicks")
        move = [Op("MOVE_TO", coords, index)] if coords else []
        deltas = {"dx": clicks, "dy": 0} if name == "hscroll" else {"dx": 0, "dy": clicks}
        return [*move, Op("SCROLL", deltas, index)]
    if name in ("write", "typewrite"):
        if not isinstance(args.get("message"), str):
            raise Unsupported(f"pyautogui.{name} needs a string (a list of key names is not supported)")
        return [Op("TYPING", {"text": args["message"]}, index)]
    if name == "press":
        keys, presses = args.get("keys"), args.get("presses", 1)
        key_list = keys if isinstance(keys, list) else [keys]
        if not isinstance(presses, int) or not 1 <= presses <= _MAX_PRESSES:
            raise Unsupported(f"bad presses={presses!r}")
        return [Op("PRESS", {"key": key}, index) for _ in range(presses) for key in key_list]
    return [Op("KEY_DOWN" if name == "keyDown" else "KEY_UP", {"key": args.get("key")}, index)]
