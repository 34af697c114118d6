"""Write `Action`s back as canonical UI-TARS 1.5 text.

`parse_response(format_response(thought, actions))` gives back the same thought and actions for
every valid action (see `check_action`); that round trip is what lets stored steps, prompts and
training targets share one representation.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from typing import Any

from workers.actions.parse import ACTION_SCHEMA, ALIASES, DIRECTIONS, REQUIRED_FIELDS, split_keys
from workers.actions.types import Action, Point

# kind -> (Action field, canonical argument name), in output order.
_FIELDS: dict[str, tuple[tuple[str, str], ...]] = {
    kind: tuple((field, names[0]) for field, names in schema if field != "button")
    for kind, schema in ACTION_SCHEMA.items()
}
_RESERVED_NAMES = frozenset(_FIELDS) | frozenset(ALIASES) | {"api_call"}
_ALL_FIELDS = ("point", "end_point", "text", "keys", "direction", "name", "arguments")


def quote(text: str) -> str:
    """A single-quoted string literal in the grammar's escaping (\\\\ \\' \\n \\r \\t)."""
    escaped = (
        text.replace("\\", "\\\\")
        .replace("'", "\\'")
        .replace("\n", "\\n")
        .replace("\r", "\\r")
        .replace("\t", "\\t")
    )
    return f"'{escaped}'"


def format_number(value: float) -> str:
    """Whole numbers without a decimal point (`640`), others as the shortest exact float (`640.5`)."""
    number = float(value)
    return str(int(number)) if number.is_integer() else repr(number)


def format_point(point: Point) -> str:
    return f"({format_number(point.x)},{format_number(point.y)})"


def check_action(action: Action) -> None:
    """Raise ValueError unless `action` is well-formed for its kind (and so survives a round trip)."""
    if action.kind == "api_call":
        if not action.name or not action.name.isidentifier() or action.name in _RESERVED_NAMES:
            raise ValueError(
                f"api_call needs an identifier name that is not a built-in action: {action.name!r}"
            )
        allowed = {"name", "arguments"}
        _check_json(action.arguments)
        if not all(key.isidentifier() for key in action.arguments or {}):
            raise ValueError("api_call argument names must be identifiers")
    elif action.kind in _FIELDS:
        allowed = {field for field, _ in _FIELDS[action.kind]}
    else:
        raise ValueError(f"unknown action kind {action.kind!r}")
    for field in _ALL_FIELDS:
        if field not in allowed and getattr(action, field) is not None:
            raise ValueError(f"{action.kind} does not take {field}")
    for field in REQUIRED_FIELDS.get(action.kind, ()):
        if getattr(action, field) is None:
            raise ValueError(f"{action.kind} needs {field}")
    for point in (action.point, action.end_point):
        if point is not None and not all(math.isfinite(v) and v >= 0 for v in (point.x, point.y)):
            raise ValueError(f"bad coordinates {point}")
    if action.kind == "swipe":
        if action.direction is None and action.end_point is None:
            raise ValueError("swipe needs an end_point or a direction")
        if action.end_point is not None and action.point is None:
            raise ValueError("swipe with an end_point needs a point")
    if action.direction is not None and action.direction not in DIRECTIONS:
        raise ValueError(f"bad direction {action.direction!r}")
    if action.keys is not None:
        keys = tuple(action.keys)
        if not keys or split_keys(" ".join(keys)) != keys:
            raise ValueError(f"keys must be non-empty names without spaces, '+' or ',': {keys!r}")
    if action.kind in ("type", "open_app") and not action.text:
        raise ValueError(f"{action.kind} needs non-empty text")
    if action.kind == "mcp_call":
        if not action.name:
            raise ValueError("mcp_call needs a name")
        if action.arguments is not None:
            _check_json(action.arguments)


def _check_json(arguments: Any) -> None:
    if not isinstance(arguments, dict):
        raise ValueError("arguments must be a dict")
    try:
        json.dumps(arguments, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"arguments are not JSON-serialisable: {exc}") from None


def format_action(action: Action) -> str:
    """Canonical text of one action, e.g. `click(start_box='(640,400)')`. Raises ValueError if invalid."""
    check_action(action)
    if action.kind == "api_call":
        inner = ", ".join(f"{key}={_format_value(value)}" for key, value in (action.arguments or {}).items())
        return f"{action.name}({inner})"
    parts: list[str] = []
    for field, arg_name in _FIELDS[action.kind]:
        value = getattr(action, field)
        if value is None:
            continue
        if isinstance(value, Point):
            rendered = quote(format_point(value))
        elif field == "keys":
            rendered = quote(" ".join(value))
        elif field == "arguments":
            rendered = json.dumps(value, ensure_ascii=False)
        else:
            rendered = quote(value)
        parts.append(f"{arg_name}={rendered}")
    return f"{action.kind}({', '.join(parts)})"


def _format_value(value: Any) -> str:
    return quote(value) if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def format_response(thought: str, actions: Sequence[Action] | Iterable[Action]) -> str:
    """`Thought: ...\\nAction: ...` with calls separated by blank lines; the thought is stripped.

    Raises ValueError if there is no action, an action is invalid, or a thought line starts with
    `Action:` (it would be read back as the action section).
    """
    calls = [format_action(action) for action in actions]
    if not calls:
        raise ValueError("a response needs at least one action")
    thought = thought.strip()
    if any(line.lstrip(" \t").startswith("Action") and _is_label(line) for line in thought.splitlines()):
        raise ValueError("a thought line must not start with 'Action:'")
    body = "\n\n".join(calls)
    return f"Thought: {thought}\nAction: {body}" if thought else f"Action: {body}"


def _is_label(line: str) -> bool:
    rest = line.lstrip(" \t")[len("Action") :].lstrip(" \t")
    return rest.startswith(":")
