"""Pool names and task ids become path segments (export archives, OSWorld folders, media): each must be
one plain segment. One rule for the importers, the API and the admin."""

from __future__ import annotations

import unicodedata

from django.core.exceptions import ValidationError


def segment_problem(value: str) -> str | None:
    """Why `value` cannot be a pool name or task id, or None when it is a safe single path segment."""
    if not value:
        return "must not be empty"
    if value != value.strip():
        return "must not start or end with whitespace"
    if "/" in value or "\\" in value:
        return "must not contain '/' or '\\' (it becomes one path segment)"
    if value.startswith(".") or ".." in value:
        return "must not start with '.' or contain '..'"
    if any(unicodedata.category(c) in ("Cc", "Cf", "Cs", "Zl", "Zp") for c in value):
        return "must not contain NUL, control or invisible format characters"
    return None


def validate_segment(value: str) -> None:
    """Django validator form of `segment_problem` (admin forms, serializers)."""
    problem = segment_problem(value)
    if problem:
        raise ValidationError(problem)


MAX_PATH_CHARS = 1000
MAX_PATH_DEPTH = 32


def relative_path_problem(value: str) -> str | None:
    """Why `value` cannot name a file inside an uploaded folder ("sub/dir/tasks.json"), or None:
    relative, '/'-separated, every part one plain segment by the rule above."""
    if len(value) > MAX_PATH_CHARS:
        return f"must be at most {MAX_PATH_CHARS} characters"
    if value.startswith("/"):
        return "must be relative to the folder (no leading '/')"
    parts = value.split("/")
    if len(parts) > MAX_PATH_DEPTH:
        return f"must be at most {MAX_PATH_DEPTH} folders deep"
    for part in parts:
        problem = segment_problem(part)
        if problem:
            return f"part {part!r} {problem}"
    return None


def validate_relative_path(value: str) -> None:
    problem = relative_path_problem(value)
    if problem:
        raise ValidationError(problem)
