"""JSON from outside, parsed with a nesting limit checked before parsing.

Python's parser recurses once per `[` or `{`: a 2 KB body of `[`×1000 raises RecursionError (a 500
where a 400 belongs), and a depth just under the interpreter's limit breaks the next recursive walk
instead. `json_loads` scans the text's nesting first, without recursion, and refuses a document
deeper than `MAX_DEPTH` or longer than `max_chars` with a `json.JSONDecodeError` naming the position,
the same error as any other malformed JSON, so callers keep one `except`.
"""

from __future__ import annotations

import json
import re
from typing import Any

# Deeper than any configuration, task or message this platform reads (a few levels each).
MAX_DEPTH = 64
_STRUCTURAL = re.compile(r'["\\\[\]{}]')


def json_depth_error(text: str, max_depth: int = MAX_DEPTH) -> json.JSONDecodeError | None:
    """The error for the first bracket nested deeper than `max_depth` (outside strings), or None.

    Linear in the number of quotes, backslashes and brackets; stops at the first offence."""
    if text.count("[") + text.count("{") <= max_depth:
        return None
    depth, in_string, escaped_at = 0, False, -1
    for match in _STRUCTURAL.finditer(text):
        char, pos = match.group(), match.start()
        if in_string:
            if pos == escaped_at:
                continue
            if char == "\\":
                escaped_at = pos + 1
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > max_depth:
                return json.JSONDecodeError(f"nested deeper than {max_depth} levels", text, pos)
        elif char in "]}":
            depth -= 1
    return None


def json_loads(raw: str | bytes, *, max_chars: int | None = None, max_depth: int = MAX_DEPTH, **kwargs: Any) -> Any:  # fmt: skip
    """`json.loads` after the size and nesting checks; raises `json.JSONDecodeError` (a ValueError)
    for malformed, over-long or over-deep documents, UnicodeDecodeError for bytes that are not UTF-8."""
    text = raw.decode("utf-8") if isinstance(raw, bytes | bytearray) else raw
    if max_chars is not None and len(text) > max_chars:
        raise json.JSONDecodeError(f"longer than {max_chars} characters", text[:80], max_chars)
    error = json_depth_error(text, max_depth)
    if error is not None:
        raise error
    return json.loads(text, **kwargs)
