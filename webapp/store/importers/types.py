"""Value types shared by the task importers: issues, parsed task records, results, limits."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

MB = 1024 * 1024


def limit(name: str, default: int) -> int:
    """An import limit in bytes or counts; a project setting of the same name overrides the default."""
    return int(getattr(settings, name, default))


def max_file_bytes() -> int:
    """Largest single task file (or archive member, uncompressed) the importers read."""
    return limit("TASK_IMPORT_MAX_FILE_BYTES", 20 * MB)


def max_total_bytes() -> int:
    """Largest total of uncompressed bytes read from one archive or folder (zip-bomb guard)."""
    return limit("TASK_IMPORT_MAX_TOTAL_BYTES", 200 * MB)


def max_members() -> int:
    """Most files read from one archive or folder."""
    return limit("TASK_IMPORT_MAX_MEMBERS", 50_000)


def max_upload_bytes() -> int:
    """Largest upload accepted by `POST /api/tasks/import/`."""
    return limit("TASK_IMPORT_MAX_UPLOAD_BYTES", 50 * MB)


@dataclass(frozen=True)
class ImportIssue:
    """One reason an import was refused: which file (and line/row), which field, why."""

    file: str
    field: str
    reason: str

    def __str__(self) -> str:
        return f"{self.file}: {self.field}: {self.reason}" if self.field else f"{self.file}: {self.reason}"

    def as_dict(self) -> dict[str, str]:
        return {"file": self.file, "field": self.field, "reason": self.reason, "message": str(self)}


class TaskImportError(Exception):
    """The import wrote nothing; `issues` lists every problem found."""

    def __init__(self, issues: list[ImportIssue]) -> None:
        self.issues = list(issues)
        shown = "; ".join(str(i) for i in self.issues[:5])
        more = f" (+{len(self.issues) - 5} more)" if len(self.issues) > 5 else ""
        super().__init__(f"{len(self.issues)} import issue(s): {shown}{more}")


@dataclass(frozen=True)
class SourceFile:
    """One file to parse: `name` is what errors show (path, or `archive.zip!member/path.json`)."""

    name: str
    data: bytes


@dataclass
class TaskRecord:
    """A validated task, ready to be written. `origin` names the file (and line) it came from.

    `enabled=None` means the source did not say: new tasks start enabled, existing ones keep their
    setting. Unsupported tasks are always written disabled whatever `enabled` says.
    """

    origin: str
    external_id: str
    instruction: str
    env_kind: str
    source: str
    setup: dict[str, Any] = field(default_factory=dict)
    verifier: dict[str, Any] = field(default_factory=dict)
    difficulty_steps: int = 1
    difficulty_cross_page: bool = False
    difficulty_prerequisites: int = 0
    difficulty_exceptions: bool = False
    importance: float = 1.0
    tags: list[str] = field(default_factory=list)
    enabled: bool | None = None
    supported: bool = True
    unsupported_reasons: list[str] = field(default_factory=list)


@dataclass
class ImportResult:
    created: int = 0
    updated: int = 0
    unsupported: int = 0
    task_ids: list[int] = field(default_factory=list)
    pool_created: bool = False
