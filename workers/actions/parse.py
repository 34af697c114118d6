"""Parse UI-TARS-family model responses into `Action`s (SPEC §4).

    Thought: I should open the File menu.
    Action: click(start_box='<|box_start|>(52,13)<|box_end|>')

`parse_response` never raises: malformed text yields a `ParsedResponse` whose `error` says what and
where, with the raw text and every action parsed before the error.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from workers.actions._lexer import (
    LexError,
    RawArg,
    RawCall,
    read_box,
    read_json_object,
    read_literal,
    scan_call,
)
from workers.actions.types import Action, Convention, ParsedResponse, ParseError, Point


@dataclass(frozen=True)
class ApiActionSpec:
    """An extra call an environment accepts (seed 001 §2.1), e.g. `open_url(url='...')`.

    `params` lists the accepted argument names in positional order; `required` those that must
    appear. Built-in action names cannot be overridden.
    """

    params: tuple[str, ...] = ()
    required: tuple[str, ...] = ()


DIRECTIONS = frozenset({"up", "down", "left", "right"})
COORDINATE_LIMITS: dict[Convention, float] = {Convention.RELATIVE_1000: 1000, Convention.RELATIVE_999: 999}

_POINT = ("point", ("start_box", "point", "start_point"))
_END = ("end_point", ("end_box", "end_point"))
_DIRECTION = ("direction", ("direction",))
_CONTENT = ("text", ("content",))
_TEXT = ("text", ("text", "content"))

# kind -> accepted (field, argument names); the first name is canonical (what `format_action` writes)
# and the first argument of a call may be given positionally. "button" is read, not stored.
ACTION_SCHEMA: dict[str, tuple[tuple[str, tuple[str, ...]], ...]] = {
    "click": (_POINT, ("button", ("button",))),
    "left_double": (_POINT,),
    "right_single": (_POINT,),
    "hover": (_POINT,),
    "long_press": (_POINT,),
    "drag": (_POINT, _END),
    "swipe": (_POINT, _END, _DIRECTION),
    "scroll": (_POINT, _DIRECTION),
    "hotkey": (("keys", ("key", "hotkey", "keys")),),
    "type": (_CONTENT,),
    "wait": (),
    "finished": (_CONTENT,),
    "call_user": (_CONTENT,),
    "open_app": (("text", ("app_name",)),),
    "press_home": (),
    "press_back": (),
    "answer": (_TEXT,),
    "ask_user": (_TEXT,),
    "mcp_call": (("name", ("name",)), ("arguments", ("args", "arguments"))),
}
REQUIRED_FIELDS: dict[str, tuple[str, ...]] = {
    "click": ("point",),
    "left_double": ("point",),
    "right_single": ("point",),
    "hover": ("point",),
    "long_press": ("point",),
    "drag": ("point", "end_point"),
    "scroll": ("direction",),
    "hotkey": ("keys",),
    "type": ("text",),
    "open_app": ("text",),
    "answer": ("text",),
    "ask_user": ("text",),
    "mcp_call": ("name",),
}
_NON_EMPTY = (("type", "text", "content"), ("open_app", "text", "app_name"), ("mcp_call", "name", "name"))
# Older or sibling spellings of the same actions.
ALIASES = {"left_single": "click", "select": "drag", "press": "hotkey"}

_ACTION_MARKER = re.compile(r"^[ \t]*Action[ \t]*:", re.MULTILINE)
_ACTION_LABEL = re.compile(r"Action[ \t]*:")
_BARE_CALL = re.compile(r"[A-Za-z_][A-Za-z0-9_]*[ \t]*\(")
_END_TOKENS = re.compile(r"<\|im_end\|>|<\|endoftext\|>|\[EOS\]|</s>")
_THOUGHT_LABELS = ("Thought:", "Action_Summary:")


def parse_response(
    text: str,
    *,
    convention: Convention = Convention.ABSOLUTE_RESIZED,
    api_actions: Mapping[str, ApiActionSpec] | None = None,
) -> ParsedResponse:
    """Split `Thought: ...\\nAction: ...` into the thought and the actions; never raises.

    Coordinates stay in the text's own `convention`; it only decides what counts as a bad
    coordinate (negative, not finite, or above 1000 / 999 for the relative conventions).
    A response without an `Action:` label is read as bare calls. `Reflection: ...` responses keep
    their labelled text as the thought.
    """
    if not isinstance(text, str):
        raw = repr(text)
        return ParsedResponse(
            raw=raw, thought="", actions=(), error=ParseError("response is not text", raw, 0)
        )
    try:
        return _parse(text, convention, api_actions or {})
    except Exception as exc:  # a bug here must not take a rollout down; keep the evidence instead
        error = ParseError(f"internal parser error: {type(exc).__name__}: {exc}", text, None)
        return ParsedResponse(raw=text, thought="", actions=(), error=error)


def _parse(text: str, convention: Convention, api_actions: Mapping[str, ApiActionSpec]) -> ParsedResponse:
    # A response that opens with a call is bare calls: an "Action:" inside its strings is just text.
    marker = None
    if not _BARE_CALL.match(text, len(text) - len(text.lstrip())):
        marker = _ACTION_MARKER.search(text) or _ACTION_LABEL.search(text)
    if marker is None:
        stripped = text.strip()
        if not stripped:
            return _failed(text, "", "empty response", 0)
        if stripped.startswith(("Thought:", "Reflection:", "Action_Summary:")):
            return _failed(text, _clean_thought(text), "no 'Action:' section", len(text))
        start, thought = 0, ""
    else:
        start, thought = marker.end(), _clean_thought(text[: marker.start()])
    end = len(text)
    actions: list[Action] = []
    i = _skip_separators(text, start, end)
    if i >= end:
        return _failed(text, thought, "empty Action section", i)
    while i < end:
        try:
            call = scan_call(text, i, end)
            actions.append(_to_action(call, convention, api_actions))
        except LexError as exc:
            error = ParseError(exc.message, text, exc.position)
            return ParsedResponse(raw=text, thought=thought, actions=tuple(actions), error=error)
        i = _skip_separators(text, call.end, end)
    return ParsedResponse(raw=text, thought=thought, actions=tuple(actions))


def _failed(text: str, thought: str, message: str, position: int) -> ParsedResponse:
    return ParsedResponse(raw=text, thought=thought, actions=(), error=ParseError(message, text, position))


def _clean_thought(section: str) -> str:
    thought = section.strip()
    for label in _THOUGHT_LABELS:
        if thought.startswith(label):
            return thought[len(label) :].strip()
    return thought


def _skip_separators(text: str, i: int, end: int) -> int:
    """Skip whitespace, markdown backticks, `;` and repeated `Action:` labels between calls.

    An end-of-turn token (`<|im_end|>`, `[EOS]`, ...) between calls ends the action section; inside
    a quoted string it is just text.
    """
    while i < end:
        ch = text[i]
        if ch in " \t\r\n`;":
            i += 1
            continue
        if _END_TOKENS.match(text, i, end):
            return end
        label = _ACTION_LABEL.match(text, i, end)
        if label is None:
            break
        i = label.end()
    return i


# --- call -> Action ------------------------------------------------------------------------------------


def _to_action(call: RawCall, convention: Convention, api_actions: Mapping[str, ApiActionSpec]) -> Action:
    kind = ALIASES.get(call.name, call.name)
    if kind in ACTION_SCHEMA:
        return _builtin_action(kind, call, convention)
    spec = api_actions.get(call.name)
    if spec is not None:
        return _api_action(call, spec)
    raise LexError(f"unknown action {call.name!r}", call.start)


def _bind(call: RawCall, names: list[str]) -> dict[str, RawArg]:
    """Map arguments to names; a single leading positional argument binds to `names[0]`."""
    bound: dict[str, RawArg] = {}
    for index, arg in enumerate(call.args):
        if arg.key is None:
            if index > 0 or not names:
                raise LexError(f"unexpected positional argument in {call.name}(...)", arg.position)
            key = names[0]
        else:
            key = arg.key
        if key not in names:
            raise LexError(f"unknown argument {key!r} for {call.name}", arg.position)
        if key in bound:
            raise LexError(f"argument {key!r} given twice", arg.position)
        bound[key] = arg
    return bound


def _builtin_action(kind: str, call: RawCall, convention: Convention) -> Action:
    schema = ACTION_SCHEMA[kind]
    arg_to_field = {name: field for field, names in schema for name in names}
    bound = _bind(call, [name for _, names in schema for name in names])
    fields: dict[str, Any] = {}
    for name, arg in bound.items():
        field = arg_to_field[name]
        if field in fields:
            raise LexError(f"{field} given twice in {call.name}(...)", arg.position)
        value = _read_field(field, arg, convention)
        if value is not None:
            fields[field] = value
    button = fields.pop("button", None)
    if button is not None:
        if button not in ("left", "right"):
            raise LexError(f"unsupported button {button!r}", call.start)
        kind = "right_single" if button == "right" else kind
    for field in REQUIRED_FIELDS.get(kind, ()):
        if field not in fields:
            raise LexError(f"{kind} needs {_describe(field)}", call.start)
    if kind == "swipe" and "direction" not in fields and "end_point" not in fields:
        raise LexError("swipe needs an end_box or a direction", call.start)
    if kind == "swipe" and "end_point" in fields and "point" not in fields:
        raise LexError("swipe with an end_box needs a start_box", call.start)
    for empty_kind, field, what in _NON_EMPTY:
        if kind == empty_kind and not fields[field]:
            raise LexError(f"{kind} needs non-empty {what}", call.start)
    return Action(kind=kind, **fields)  # type: ignore[arg-type]


def _describe(field: str) -> str:
    return {"point": "a start_box", "end_point": "an end_box", "keys": "a key", "text": "text"}.get(
        field, field
    )


def _read_field(field: str, arg: RawArg, convention: Convention) -> Any:
    if field in ("point", "end_point"):
        if arg.quoted and not arg.value.strip():
            return None  # UI-TARS writes start_box='' for "no position"; required checks catch misuse
        x, y = read_box(arg.value, arg.position)
        _check_coordinate(x, y, convention, arg.position)
        return Point(x, y)
    if field == "arguments":
        return read_json_object(arg)
    # scroll(direction=down): an unquoted name is unambiguous enough to accept, then checked as if quoted
    if not arg.quoted and not (field in ("direction", "button") and arg.value.isidentifier()):
        raise LexError(f"expected a quoted string for {arg.key or 'argument'}", arg.position)
    if field == "keys":
        try:
            keys = split_keys(arg.value)
        except ValueError as exc:
            raise LexError(str(exc), arg.position) from exc
        if not keys:
            raise LexError("hotkey needs at least one key", arg.position)
        return keys
    if field in ("direction", "button"):
        value = arg.value.strip().lower()
        if field == "direction" and value not in DIRECTIONS:
            raise LexError(f"bad direction {arg.value!r}", arg.position)
        return value
    return arg.value


def _check_coordinate(x: float, y: float, convention: Convention, position: int) -> None:
    if x < 0 or y < 0:
        raise LexError(f"bad coordinates: ({x:g},{y:g}) is negative", position)
    limit = COORDINATE_LIMITS.get(convention, math.inf)
    if x > limit or y > limit:
        raise LexError(f"bad coordinates: ({x:g},{y:g}) exceeds {limit:g} for {convention.value}", position)


def split_keys(spec: str) -> tuple[str, ...]:
    """'ctrl shift a', 'ctrl+c', 'ctrl, c' → key names. A lone '+' or ',' is itself a key, and so
    is a '+' where a key is expected: 'ctrl++' → (ctrl, +), 'ctrl+shift++' → (ctrl, shift, +).
    Raises ValueError for a combination that ends in a separator ('ctrl+'), never dropping a key."""
    keys: list[str] = []
    for token in spec.split():
        if token in ("+", ","):
            keys.append(token)
            continue
        if token.endswith(",") and not token.endswith("+,"):
            token = token[:-1]  # 'ctrl, c': the comma separates keys
        keys.extend(_plus_joined(token))
    return tuple(keys)


def _plus_joined(token: str) -> list[str]:
    """'ctrl+shift++' → ['ctrl', 'shift', '+']: '+' separates keys, and is the key where one is due."""
    keys: list[str] = []
    i, expect_key = 0, True
    while i < len(token):
        if not expect_key:  # token[i] is the '+' after a key
            i, expect_key = i + 1, True
            continue
        if token[i] == "+":
            keys.append("+")
            i += 1
        else:
            end = token.find("+", i)
            end = len(token) if end < 0 else end
            keys.append(token[i:end])
            i = end
        expect_key = False
    if expect_key and keys:
        raise ValueError(f"the key combination {token!r} ends with '+'; write '{token}+' for the plus key")
    return keys


def _api_action(call: RawCall, spec: ApiActionSpec) -> Action:
    bound: dict[str, RawArg] = {}
    for index, arg in enumerate(call.args):
        if arg.key is None:
            if any(a.key is not None for a in call.args[:index]) or index >= len(spec.params):
                raise LexError(f"unexpected positional argument in {call.name}(...)", arg.position)
            key = spec.params[index]
        else:
            key = arg.key
        if key not in spec.params:
            raise LexError(f"unknown argument {key!r} for {call.name}", arg.position)
        if key in bound:
            raise LexError(f"argument {key!r} given twice", arg.position)
        bound[key] = arg
    for name in spec.required:
        if name not in bound:
            raise LexError(f"{call.name} needs argument {name!r}", call.start)
    arguments = {name: read_literal(arg) for name, arg in bound.items()}
    return Action(kind="api_call", name=call.name, arguments=arguments)
