"""Low-level scanning of UI-TARS action calls: `name(arg='value', other=(1,2))`.

The scanner works on the original response text and reports positions into it, so a parse error can
point at the exact character. It knows nothing about action kinds; `parse.py` gives calls meaning.
Every failure is a `LexError`, which `parse.py` turns into a `ParseError`; nothing else escapes.
"""

from __future__ import annotations

import ast
import json
import math
import re
import warnings
from dataclasses import dataclass
from typing import Any

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SIMPLE_ESCAPES = {"'": "'", '"': '"', "\\": "\\", "n": "\n", "t": "\t", "r": "\r"}
_OPENERS = {"(": ")", "[": "]", "{": "}"}
_CLOSERS = frozenset(_OPENERS.values())
# Box wrappers seen in UI-TARS outputs; removed before reading the numbers.
_BOX_TOKENS = re.compile(r"<\|box_start\|>|<\|box_end\|>|</?point>|</?bbox>")
_BOX_PIECE = re.compile(
    r"(?P<number>[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)|(?P<separator>[\s,()\[\]]+)|(?P<other>.)",
    re.DOTALL,
)
_MAX_BOX_CHARS = 200  # a real box is ~30 characters; longer input is garbage, not worth scanning
_MAX_LITERAL_CHARS = 100_000


class LexError(Exception):
    """A malformed call; `position` indexes the original response text."""

    def __init__(self, message: str, position: int) -> None:
        super().__init__(message)
        self.message = message
        self.position = position


@dataclass(frozen=True)
class RawArg:
    """One argument as written: `key` is None for a positional argument.

    `quoted` values are already unescaped; bare values (`(1,2)`, `{"a": 1}`, `true`) are the
    stripped source text.
    """

    key: str | None
    value: str
    quoted: bool
    position: int


@dataclass(frozen=True)
class RawCall:
    name: str
    args: tuple[RawArg, ...]
    start: int
    end: int  # index just past the closing parenthesis


def scan_call(text: str, i: int, end: int) -> RawCall:
    """Read one call starting exactly at `i` (no leading whitespace) and ending before `end`."""
    match = _IDENT.match(text, i, end)
    if match is None:
        raise LexError(f"expected an action call, found {text[i : i + 20]!r}", i)
    name = match.group()
    j = _skip_spaces(text, match.end(), end)
    if j >= end or text[j] != "(":
        raise LexError(f"expected '(' after {name!r}", j)
    j += 1
    args: list[RawArg] = []
    while True:
        j = _skip_spaces(text, j, end)
        if j >= end:
            raise LexError(f"unbalanced parentheses: {name}( is never closed", j)
        if text[j] == ")":
            return RawCall(name=name, args=tuple(args), start=i, end=j + 1)
        arg, j = _scan_arg(text, j, end)
        args.append(arg)
        j = _skip_spaces(text, j, end)
        if j < end and text[j] == ",":
            j += 1
        elif j >= end:
            raise LexError(f"unbalanced parentheses: {name}( is never closed", j)
        elif text[j] != ")":
            raise LexError(f"expected ',' or ')' in {name}(...), found {text[j]!r}", j)


def _skip_spaces(text: str, i: int, end: int) -> int:
    while i < end and text[i] in " \t\r\n":
        i += 1
    return i


def _scan_arg(text: str, i: int, end: int) -> tuple[RawArg, int]:
    key: str | None = None
    match = _IDENT.match(text, i, end)
    if match is not None:
        k = _skip_spaces(text, match.end(), end)
        if k < end and text[k] == "=" and text[k + 1 : k + 2] != "=":
            key = match.group()
            i = _skip_spaces(text, k + 1, end)
    if i >= end:
        raise LexError("missing argument value", i)
    if text[i] in "'\"":
        value, j = scan_string(text, i, end)
        return RawArg(key=key, value=value, quoted=True, position=i), j
    j = _scan_bare(text, i, end)
    value = text[i:j].strip()
    if not value:
        raise LexError("missing argument value", i)
    return RawArg(key=key, value=value, quoted=False, position=i), j


def scan_string(text: str, i: int, end: int) -> tuple[str, int]:
    """Read a quoted string at `i`; return its unescaped value and the index past the closing quote.

    Escapes: \\' \\" \\\\ \\n \\t \\r; any other backslash is kept literally (Windows paths). Models
    often forget to escape an apostrophe (`content='don't'`), so an unescaped quote only closes the
    string when what follows it (after spaces) is `,`, `)`, a line break or the end of the text.
    """
    quote = text[i]
    out: list[str] = []
    j = i + 1
    while j < end:
        ch = text[j]
        if ch == "\\":
            if j + 1 >= end:
                break
            nxt = text[j + 1]
            out.append(_SIMPLE_ESCAPES.get(nxt, "\\" + nxt))
            j += 2
            continue
        if ch == quote:
            k = j + 1
            while k < end and text[k] in " \t":
                k += 1
            if k >= end or text[k] in ",)\r\n":
                return "".join(out), j + 1
        out.append(ch)
        j += 1
    raise LexError("unbalanced quotes: string is never closed", i)


def _scan_bare(text: str, i: int, end: int) -> int:
    """Index of the `,` or `)` that ends an unquoted value, honouring nested brackets and strings."""
    stack: list[str] = []
    j = i
    while j < end:
        ch = text[j]
        if ch in "'\"":
            j = _skip_plain_string(text, j, end)
            continue
        if ch in _OPENERS:
            stack.append(_OPENERS[ch])
        elif ch in _CLOSERS:
            if not stack:
                if ch == ")":
                    return j
                raise LexError(f"unbalanced brackets: unexpected {ch!r}", j)
            if stack.pop() != ch:
                raise LexError(f"unbalanced brackets: mismatched {ch!r}", j)
        elif ch == "," and not stack:
            return j
        j += 1
    raise LexError("unbalanced parentheses: value is never closed", i)


def _skip_plain_string(text: str, i: int, end: int) -> int:
    """Skip a string inside a bare value (JSON / Python literal): strict quote matching."""
    quote = text[i]
    j = i + 1
    while j < end:
        if text[j] == "\\":
            j += 2
            continue
        if text[j] == quote:
            return j + 1
        j += 1
    raise LexError("unbalanced quotes inside a value", i)


# --- values ------------------------------------------------------------------------------------------


def read_box(value: str, position: int) -> tuple[float, float]:
    """Coordinates of a box argument: '(x,y)', '[x1,y1,x2,y2]' (centre), '<point>x y</point>',
    '<bbox>x1 y1 x2 y2</bbox>', optionally wrapped in <|box_start|>...<|box_end|>.

    Returns raw numbers; range checks belong to the caller, who knows the convention.
    """
    if len(value) > _MAX_BOX_CHARS:
        raise LexError("bad coordinates: box text too long", position)
    body = _BOX_TOKENS.sub(" ", value)
    numbers: list[float] = []
    previous_was_number = False
    for piece in _BOX_PIECE.finditer(body):
        token = piece.group()
        if piece.lastgroup == "separator":
            previous_was_number = False
            continue
        if piece.lastgroup == "other":
            raise LexError(f"bad coordinates: unexpected {token!r} in {value!r}", position)
        if previous_was_number:
            raise LexError(f"bad coordinates: numbers run together in {value!r}", position)
        numbers.append(float(token))
        previous_was_number = True
    if len(numbers) == 2:
        x, y = numbers
    elif len(numbers) == 4:
        x, y = (numbers[0] + numbers[2]) / 2, (numbers[1] + numbers[3]) / 2
    else:
        raise LexError(f"bad coordinates: expected 2 or 4 numbers in {value!r}", position)
    if not (math.isfinite(x) and math.isfinite(y)):
        raise LexError(f"bad coordinates: not finite in {value!r}", position)
    return x, y


def read_literal(arg: RawArg) -> Any:
    """A JSON-compatible value from an argument: quoted → str; bare → JSON, else a Python literal."""
    if arg.quoted:
        return arg.value
    return _decode_literal(arg.value, arg.position)


def read_json_object(arg: RawArg) -> dict[str, Any]:
    """A dict argument such as `args={"q": "x"}`; a quoted argument holds the JSON text."""
    value = _decode_literal(arg.value, arg.position)
    if not isinstance(value, dict):
        raise LexError("expected a JSON object", arg.position)
    return value


def _decode_literal(source: str, position: int) -> Any:
    if len(source) > _MAX_LITERAL_CHARS:
        raise LexError("value too long", position)
    try:
        value = json.loads(source)
    except (ValueError, RecursionError):
        try:
            # literal_eval only builds constants (no names, calls or attribute access); model text is
            # full of odd escapes like "\p", which must not turn into warnings in the logs.
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", (SyntaxWarning, DeprecationWarning))
                value = ast.literal_eval(source)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            raise LexError(f"cannot read value {source[:40]!r}", position) from None
    if not _is_json_value(value):
        raise LexError(f"value is not JSON-compatible: {source[:40]!r}", position)
    return value


def _is_json_value(value: Any, depth: int = 0) -> bool:
    if depth > 64:
        return False
    if value is None or isinstance(value, (bool, int, str)):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(_is_json_value(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_json_value(v, depth + 1) for k, v in value.items())
    return False
