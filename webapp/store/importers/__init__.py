"""Task importers (SPEC §5): OSWorld JSON, MiniWoB++ from the wheel, JSONL / CSV task lists.

Every input is read and validated first; only then is anything written, in one transaction.
`task_import_run` is all-or-nothing; `records_by_file` (the API) and `task_import_by_file`
(`manage.py import_tasks`) take each file whole or refuse it, writing the good files' tasks.
Problems come back as `ImportIssue(file, field, reason)` (inside `TaskImportError` when nothing is
written).
"""

from webapp.store.importers.services import (
    FORMATS,
    FileReport,
    records_by_file,
    records_collect,
    task_import_by_file,
    task_import_run,
    tasks_import,
)
from webapp.store.importers.types import ImportIssue, ImportResult, SourceFile, TaskImportError, TaskRecord

__all__ = [
    "FORMATS",
    "FileReport",
    "ImportIssue",
    "ImportResult",
    "SourceFile",
    "TaskImportError",
    "TaskRecord",
    "records_by_file",
    "records_collect",
    "task_import_by_file",
    "task_import_run",
    "tasks_import",
]
