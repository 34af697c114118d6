"""Task import: parse and validate everything first, then write in one transaction (all-or-nothing).

Re-importing an id already in the pool updates that task (upsert by pool + external_id): its
definition and difficulty inputs change, its success statistics and assignments stay.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from django.db import IntegrityError, transaction
from django.utils import timezone

from webapp.store.importers.miniwob import miniwob_records
from webapp.store.importers.osworld import parse_osworld
from webapp.store.importers.sources import is_archive, read_archive, read_paths
from webapp.store.importers.tabular import parse_csv, parse_jsonl
from webapp.store.importers.types import (
    ImportIssue,
    ImportResult,
    SourceFile,
    TaskImportError,
    TaskRecord,
    max_file_bytes,
)
from webapp.store.models import Task, TaskPool
from webapp.store.names import segment_problem
from webapp.store.services import task_difficulty_score

Parser = Callable[[SourceFile], tuple[list[TaskRecord], list[ImportIssue]]]

FORMATS = ("auto", "osworld", "jsonl", "csv")
_PARSERS: dict[str, Parser] = {"osworld": parse_osworld, "jsonl": parse_jsonl, "csv": parse_csv}
_EXTENSIONS = {".json": "osworld", ".jsonl": "jsonl", ".csv": "csv"}
_WRITTEN_FIELDS = [
    "instruction", "env_kind", "source", "setup", "verifier", "difficulty_steps", "difficulty_cross_page",
    "difficulty_prerequisites", "difficulty_exceptions", "difficulty", "importance", "tags", "enabled",
    "supported", "unsupported_reasons", "updated_at",
]  # fmt: skip


def _format_of(name: str) -> str | None:
    member = name.rsplit("!", 1)[-1]
    return _EXTENSIONS.get(PurePosixPath(member).suffix.lower())


def _wanted(fmt: str) -> Callable[[str], bool]:
    if fmt == "auto":
        return lambda name: _format_of(name) is not None
    return lambda name: _format_of(name) == fmt


def _parse(files: list[SourceFile], fmt: str) -> tuple[list[TaskRecord], list[ImportIssue]]:
    records: list[TaskRecord] = []
    issues: list[ImportIssue] = []
    for source in files:
        kind = fmt if fmt != "auto" else _format_of(source.name)
        if kind is None:
            issues.append(
                ImportIssue(
                    source.name, "", "unknown file type; use .json (OSWorld), .jsonl, .csv or an archive"
                )
            )
            continue
        got, problems = _PARSERS[kind](source)
        records += got
        issues += problems
    return records, issues


def _duplicates(records: list[TaskRecord]) -> list[ImportIssue]:
    first_seen: dict[str, str] = {}
    issues = []
    for record in records:
        if record.external_id in first_seen:
            issues.append(
                ImportIssue(
                    record.origin,
                    "id",
                    f"duplicate id {record.external_id!r}, also in {first_seen[record.external_id]}",
                )
            )
        else:
            first_seen[record.external_id] = record.origin
    return issues


def records_collect(
    *,
    paths: Iterable[Path] = (),
    uploads: Iterable[SourceFile] = (),
    fmt: str = "auto",
    miniwob: list[str] | None = None,
) -> list[TaskRecord]:
    """Read and validate every input; raises TaskImportError listing every issue found.

    `uploads` are in-memory files (an archive is opened); `miniwob=None` adds no MiniWoB++ task,
    `[]` adds every task in the wheel, a list of names adds those.
    """
    if fmt not in FORMATS:
        raise TaskImportError(
            [ImportIssue("format", "format", f"{fmt!r} is not one of {', '.join(FORMATS)}")]
        )
    wanted = _wanted(fmt)
    files, issues = read_paths(list(paths), wanted)
    for upload in uploads:
        if is_archive(upload.name):
            got, problems = read_archive(upload.name, upload.data, wanted)
            files += got
            issues += problems
        elif len(upload.data) > max_file_bytes():
            issues.append(
                ImportIssue(
                    upload.name,
                    "",
                    f"file is {len(upload.data)} bytes; the limit is {max_file_bytes()} bytes",
                )
            )
        else:
            files.append(upload)
    records, problems = _parse(files, fmt)
    issues += problems
    if miniwob is not None:
        wob_records, problems = miniwob_records(miniwob)
        records += wob_records
        issues += problems
    for record in records:
        problem = segment_problem(record.external_id)
        if problem:
            issues.append(
                ImportIssue(record.origin, "external_id", f"task id {record.external_id!r} {problem}")
            )
    issues += _duplicates(records)
    if not records and not issues:
        issues.append(
            ImportIssue(
                "import", "", "nothing to import: give files, a folder, an archive or MiniWoB++ tasks"
            )
        )
    if issues:
        raise TaskImportError(issues)
    return records


@dataclass
class FileReport:
    """One uploaded file's part of an import: its valid tasks, or why it was refused (each issue
    names the file and line / row of the task it is about). A file is taken whole or not at all."""

    file: str
    records: list[TaskRecord] = field(default_factory=list)
    issues: list[ImportIssue] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.issues


WINDOWS_SKIPPED = "skipped: a Windows variant of an OSWorld task (the sessions are Linux desktops)"


def windows_variant(name: str) -> bool:
    """A file under a `Windows/` (or `examples_windows/`) folder: OSWorld's Windows variants carry
    the ids of the Linux tasks, so they are skipped and named, not refused as duplicates."""
    parts = PurePosixPath(name.replace("\\", "/").replace("!", "/")).parts[:-1]
    return any(p.lower() == "windows" or p.lower().startswith("examples_windows") for p in parts)


def _members(uploads: Iterable[SourceFile], fmt: str, reports: list[FileReport]) -> Iterable[SourceFile]:
    """Each upload, an archive's files one by one (an archive refused whole — unsafe, too large —
    is reported in `reports`)."""
    for upload in uploads:
        if not is_archive(upload.name):
            yield upload
            continue
        files, problems = read_archive(upload.name, upload.data, _wanted(fmt))
        if problems or not files:
            reason = "no task files of the chosen format found in this archive"
            reports.append(FileReport(upload.name, issues=problems or [ImportIssue(upload.name, "", reason)]))
            continue
        yield from files


def records_by_file(uploads: Iterable[SourceFile], fmt: str = "auto") -> list[FileReport]:
    """Read and validate each upload on its own (a folder's or a multi-file upload's files, an
    archive's members): the good files give their tasks, the bad ones their issues; Windows variants
    are skipped and named. An id already given by an earlier good file refuses the later file (one
    task per id and pool)."""
    reports: list[FileReport] = []
    seen: dict[str, str] = {}
    for upload in _members(uploads, fmt, reports):
        if windows_variant(upload.name):
            reports.append(FileReport(upload.name, issues=[ImportIssue(upload.name, "", WINDOWS_SKIPPED)]))
            continue
        try:
            records = records_collect(uploads=[upload], fmt=fmt)
        except TaskImportError as exc:
            reports.append(FileReport(upload.name, issues=exc.issues))
            continue
        clashes = [
            ImportIssue(r.origin, "id", f"duplicate id {r.external_id!r}, also in {seen[r.external_id]}")
            for r in records
            if r.external_id in seen
        ]
        if clashes:
            reports.append(FileReport(upload.name, issues=clashes))
            continue
        seen.update((r.external_id, r.origin) for r in records)
        reports.append(FileReport(upload.name, records=records))
    return reports


def _pool_for_import(pool_name: str, create_pool: bool) -> tuple[TaskPool, bool]:
    name = pool_name.strip()
    if not name or len(name) > 200:
        raise TaskImportError([ImportIssue("pool", "name", "must be 1–200 characters")])
    problem = segment_problem(name)
    if problem:
        raise TaskImportError([ImportIssue("pool", "name", f"pool name {name!r} {problem}")])
    if create_pool:
        return TaskPool.objects.get_or_create(name=name)
    pool = TaskPool.objects.filter(name=name).first()
    if pool is None:
        raise TaskImportError(
            [ImportIssue("pool", "name", f"no pool named {name!r}; create it first (or --create-pool)")]
        )
    return pool, False


def _apply(task: Task, record: TaskRecord, *, is_new: bool) -> Task:
    task.instruction = record.instruction
    task.env_kind = record.env_kind
    task.source = record.source
    task.setup = record.setup
    task.verifier = record.verifier
    task.difficulty_steps = record.difficulty_steps
    task.difficulty_cross_page = record.difficulty_cross_page
    task.difficulty_prerequisites = record.difficulty_prerequisites
    task.difficulty_exceptions = record.difficulty_exceptions
    task.difficulty = task_difficulty_score(
        steps=record.difficulty_steps,
        cross_page=record.difficulty_cross_page,
        prerequisites=record.difficulty_prerequisites,
        exceptions=record.difficulty_exceptions,
    )
    task.importance = record.importance
    task.tags = record.tags
    if record.enabled is not None:
        enabled = record.enabled
    elif is_new or not task.supported:
        enabled = True  # new, or was disabled only because it was unsupported
    else:
        enabled = task.enabled
    task.enabled = enabled and record.supported
    task.supported = record.supported
    task.unsupported_reasons = record.unsupported_reasons
    task.updated_at = timezone.now()
    return task


def tasks_import(*, pool_name: str, create_pool: bool, records: list[TaskRecord]) -> ImportResult:
    """Upsert validated records into the pool in one transaction; raises TaskImportError on refusal."""
    try:
        with transaction.atomic():
            pool, pool_created = _pool_for_import(pool_name, create_pool)
            ids = [r.external_id for r in records]
            existing = {
                t.external_id: t
                for t in Task.objects.select_for_update().filter(pool=pool, external_id__in=ids)
            }
            new = [
                _apply(Task(pool=pool, external_id=r.external_id), r, is_new=True)
                for r in records
                if r.external_id not in existing
            ]
            changed = [
                _apply(existing[r.external_id], r, is_new=False) for r in records if r.external_id in existing
            ]
            Task.objects.bulk_create(new)
            Task.objects.bulk_update(changed, _WRITTEN_FIELDS, batch_size=500)
    except IntegrityError as exc:
        raise TaskImportError(
            [ImportIssue("pool", "name", f"another import wrote this pool at the same time; retry ({exc})")]
        ) from exc
    by_id = {t.external_id: t.pk for t in [*new, *changed]}
    return ImportResult(
        created=len(new),
        updated=len(changed),
        unsupported=sum(1 for r in records if not r.supported),
        task_ids=[by_id[i] for i in ids],
        pool_created=pool_created,
    )


def task_import_run(
    *,
    pool_name: str,
    create_pool: bool = False,
    paths: Iterable[Path] = (),
    uploads: Iterable[SourceFile] = (),
    fmt: str = "auto",
    miniwob: list[str] | None = None,
) -> ImportResult:
    """Collect, validate and write. Nothing is written unless every input is valid."""
    records = records_collect(paths=paths, uploads=uploads, fmt=fmt, miniwob=miniwob)
    return tasks_import(pool_name=pool_name, create_pool=create_pool, records=records)


def tasks_set_enabled(*, task_ids: list[int], enabled: bool) -> tuple[int, int]:
    """Enable or disable tasks. Unsupported tasks stay disabled; returns (changed, skipped_unsupported)."""
    qs = Task.objects.filter(pk__in=task_ids)
    if not enabled:
        return qs.update(enabled=False, updated_at=timezone.now()), 0
    skipped = qs.filter(supported=False).count()
    return qs.filter(supported=True).update(enabled=True, updated_at=timezone.now()), skipped


def task_import_by_file(
    *,
    pool_name: str,
    create_pool: bool = False,
    paths: Iterable[Path] = (),
    fmt: str = "auto",
    miniwob: list[str] | None = None,
) -> tuple[ImportResult, list[ImportIssue]]:
    """Import the good files of `paths` (folders walked, archives opened) and return the issues of
    the bad ones, per file; raises TaskImportError (nothing written) only when no file is good.
    `manage.py import_tasks` uses it, as the import API does with `records_by_file`."""
    if fmt not in FORMATS:
        raise TaskImportError(
            [ImportIssue("format", "format", f"{fmt!r} is not one of {', '.join(FORMATS)}")]
        )
    files, issues = read_paths(list(paths), _wanted(fmt))
    reports = records_by_file(files, fmt)
    records = [rec for r in reports if r.ok for rec in r.records]
    issues += [issue for r in reports if not r.ok for issue in r.issues]
    if miniwob is not None:
        records += records_collect(miniwob=miniwob)
    if not records:
        raise TaskImportError(issues or [ImportIssue("import", "", "nothing to import")])
    return tasks_import(pool_name=pool_name, create_pool=create_pool, records=records), issues
