"""JSONL and CSV task lists → task records.

Keys (JSONL) / columns (CSV): `external_id` (or `id`), `instruction`, `env_kind` (required);
`source` (default custom), `setup`, `verifier` (objects; JSON text in CSV), `difficulty_steps`,
`difficulty_cross_page`, `difficulty_prerequisites`, `difficulty_exceptions`, `importance`,
`tags` (a list, or comma-separated text), `enabled`. Unknown keys are refused so a misspelt
column cannot be dropped silently. Errors name the line (JSONL) or row (CSV, header = row 1).
"""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from webapp.store.importers.types import ImportIssue, SourceFile, TaskRecord
from webapp.store.models import EnvKind, TaskSource
from workers.json_input import json_loads

KNOWN_KEYS = frozenset({
    "external_id", "id", "instruction", "env_kind", "source", "setup", "verifier", "difficulty_steps",
    "difficulty_cross_page", "difficulty_prerequisites", "difficulty_exceptions", "importance", "tags",
    "enabled",
})  # fmt: skip
_TRUE = {"1", "true", "yes", "y", "on"}
_FALSE = {"0", "false", "no", "n", "off"}
SMALLINT_MAX = 32767


class _Row:
    """Typed reads of one row; every bad value adds an issue naming the field."""

    def __init__(self, row: dict[str, Any], origin: str, textual: bool) -> None:
        self.row, self.origin, self.textual = row, origin, textual
        self.issues: list[ImportIssue] = []

    def _blank(self, key: str) -> bool:
        value = self.row.get(key)
        return value is None or (isinstance(value, str) and value.strip() == "")

    def fail(self, key: str, reason: str) -> None:
        self.issues.append(ImportIssue(self.origin, key, reason))

    def text(self, key: str, *, required: bool = False, max_len: int | None = None) -> str:
        if self._blank(key):
            if required:
                self.fail(key, "missing")
            return ""
        value = self.row[key]
        if not isinstance(value, str):
            self.fail(key, f"must be text, got {type(value).__name__}")
            return ""
        value = value.strip()
        if max_len is not None and len(value) > max_len:
            self.fail(key, f"longer than {max_len} characters")
        return value

    def choice(self, key: str, choices: list[str], default: str | None) -> str:
        value = self.text(key, required=default is None)
        if not value:
            return default or ""
        if value not in choices:
            self.fail(key, f"{value!r} is not one of {', '.join(choices)}")
        return value

    def obj(self, key: str) -> dict[str, Any]:
        if self._blank(key):
            return {}
        value = self.row[key]
        if isinstance(value, str):
            try:
                value = json_loads(value)
            except json.JSONDecodeError as exc:
                self.fail(key, f"invalid JSON: {exc.msg} at column {exc.colno}")
                return {}
        if not isinstance(value, dict):
            self.fail(key, f"must be a JSON object, got {type(value).__name__}")
            return {}
        return value

    def boolean(self, key: str, default: bool | None) -> bool | None:
        if self._blank(key):
            return default
        value = self.row[key]
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
            return value.strip().lower() in _TRUE
        self.fail(key, f"must be true or false, got {value!r}")
        return default

    def integer(self, key: str, default: int, minimum: int, maximum: int) -> int:
        if self._blank(key):
            return default
        value = self.row[key]
        if isinstance(value, str) and self.textual:
            try:
                value = int(value.strip())
            except ValueError:
                self.fail(key, f"must be a whole number, got {self.row[key]!r}")
                return default
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(key, f"must be a whole number, got {value!r}")
            return default
        if not minimum <= value <= maximum:
            self.fail(key, f"must be between {minimum} and {maximum}, got {value}")
        return value

    def number(self, key: str, default: float) -> float:
        if self._blank(key):
            return default
        value = self.row[key]
        if isinstance(value, str) and self.textual:
            try:
                value = float(value.strip())
            except ValueError:
                self.fail(key, f"must be a number, got {self.row[key]!r}")
                return default
        if isinstance(value, bool) or not isinstance(value, int | float):
            self.fail(key, f"must be a number, got {value!r}")
            return default
        if value < 0 or value != value:
            self.fail(key, f"must be a number ≥ 0, got {value}")
        return float(value)

    def tags(self) -> list[str]:
        if self._blank("tags"):
            return []
        value = self.row["tags"]
        if isinstance(value, str):
            value = [t.strip() for t in value.split(",")]
        if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
            self.fail("tags", "must be a list of strings or comma-separated text")
            return []
        cleaned = [t.strip() for t in value if t.strip()]
        for tag in cleaned:
            if len(tag) > 64:
                self.fail("tags", f"tag {tag[:20]!r}… is longer than 64 characters")
        return list(dict.fromkeys(cleaned))


def row_record(row: Any, origin: str, *, textual: bool) -> tuple[TaskRecord | None, list[ImportIssue]]:
    """Validate one JSONL object / CSV row; `textual` rows (CSV) hold numbers and flags as text."""
    if not isinstance(row, dict):
        return None, [ImportIssue(origin, "", f"must be a JSON object, got {type(row).__name__}")]
    r = _Row(row, origin, textual)
    unknown = sorted(k for k in row if k not in KNOWN_KEYS and not (textual and k is None))
    for key in unknown:
        r.fail(str(key), f"unknown key; expected some of {', '.join(sorted(KNOWN_KEYS))}")
    if textual and None in row:
        r.fail("", "more values than header columns")
    id_key = "external_id" if not r._blank("external_id") else "id"
    if "external_id" in row and "id" in row and not r._blank("external_id") and not r._blank("id"):
        r.fail("id", "give external_id or id, not both")
    external_id = r.text(id_key, max_len=255)
    if not external_id:
        r.fail("external_id", "missing (external_id or id)")
    record = TaskRecord(
        origin=origin,
        external_id=external_id,
        instruction=r.text("instruction", required=True),
        env_kind=r.choice("env_kind", list(EnvKind.values), None),
        source=r.choice("source", list(TaskSource.values), str(TaskSource.CUSTOM)),
        setup=r.obj("setup"),
        verifier=r.obj("verifier"),
        difficulty_steps=r.integer("difficulty_steps", 1, 1, SMALLINT_MAX),
        difficulty_cross_page=bool(r.boolean("difficulty_cross_page", False)),
        difficulty_prerequisites=r.integer("difficulty_prerequisites", 0, 0, SMALLINT_MAX),
        difficulty_exceptions=bool(r.boolean("difficulty_exceptions", False)),
        importance=r.number("importance", 1.0),
        tags=r.tags(),
        enabled=r.boolean("enabled", None),
    )
    return (None, r.issues) if r.issues else (record, [])


def _decode(source: SourceFile) -> tuple[str | None, list[ImportIssue]]:
    try:
        return source.data.decode("utf-8-sig"), []
    except UnicodeDecodeError as exc:
        return None, [ImportIssue(source.name, "", f"not UTF-8 text: {exc.reason} at byte {exc.start}")]


def parse_jsonl(source: SourceFile) -> tuple[list[TaskRecord], list[ImportIssue]]:
    text, issues = _decode(source)
    if text is None:
        return [], issues
    records: list[TaskRecord] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        origin = f"{source.name}:line {number}"
        try:
            row = json_loads(line)
        except json.JSONDecodeError as exc:
            issues.append(ImportIssue(origin, "", f"invalid JSON at column {exc.colno}: {exc.msg}"))
            continue
        record, problems = row_record(row, origin, textual=False)
        issues += problems
        if record is not None:
            records.append(record)
    if not records and not issues:
        issues.append(ImportIssue(source.name, "", "no tasks in the file"))
    return records, issues


def parse_csv(source: SourceFile) -> tuple[list[TaskRecord], list[ImportIssue]]:
    text, issues = _decode(source)
    if text is None:
        return [], issues
    reader = csv.DictReader(io.StringIO(text, newline=""))
    try:
        header = reader.fieldnames
    except csv.Error as exc:
        return [], [ImportIssue(source.name, "", f"unreadable CSV header: {exc}")]
    if not header:
        return [], [ImportIssue(source.name, "", "empty file; the first row must name the columns")]
    records: list[TaskRecord] = []
    row_number = 1
    try:
        for row in reader:
            row_number += 1
            if all((v or "").strip() == "" for k, v in row.items() if k is not None):
                continue
            record, problems = row_record(row, f"{source.name}:row {row_number}", textual=True)
            issues += problems
            if record is not None:
                records.append(record)
    except csv.Error as exc:
        issues.append(ImportIssue(f"{source.name}:row {row_number + 1}", "", f"unreadable CSV: {exc}"))
    if not records and not issues:
        issues.append(ImportIssue(source.name, "", "no tasks in the file"))
    return records, issues
