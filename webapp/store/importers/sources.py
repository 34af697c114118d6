"""Collect the files to import from paths, folders (recursive) and archives (.zip, .tar, .tar.gz).

Archives are read in memory, never extracted to disk. A member whose path is absolute or climbs
out of the archive (`..`), a link or device member, an oversized member, or too many members makes
the whole archive refused: a suspicious archive imports nothing.
"""

from __future__ import annotations

import io
import re
import stat
import tarfile
import zipfile
from collections.abc import Callable
from pathlib import Path, PurePosixPath

from webapp.store.importers.types import (
    ImportIssue,
    SourceFile,
    max_file_bytes,
    max_members,
    max_total_bytes,
)

ARCHIVE_SUFFIXES = (".zip", ".tar", ".tar.gz", ".tgz")
_DRIVE = re.compile(r"^[A-Za-z]:")

Wanted = Callable[[str], bool]


def is_archive(name: str) -> bool:
    return name.lower().endswith(ARCHIVE_SUFFIXES)


def _unsafe_member_path(name: str) -> str | None:
    """Why a member path may not be used, or None when it stays inside the archive."""
    posix = name.replace("\\", "/")
    if posix.startswith("/") or _DRIVE.match(posix):
        return "absolute path in archive refused"
    if ".." in PurePosixPath(posix).parts:
        return "path escapes the archive ('..') — refused"
    return None


def _skipped(name: str) -> bool:
    """Hidden files and macOS resource forks are not tasks."""
    return any(part.startswith(".") or part == "__MACOSX" for part in PurePosixPath(name).parts)


class _Budget:
    """Counts members and bytes across one archive or folder and reports the first overrun."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.members = 0
        self.total = 0

    def admit(self, member: str, size: int) -> ImportIssue | None:
        self.members += 1
        self.total += size
        if size > max_file_bytes():
            return ImportIssue(member, "", f"file is {size} bytes; the limit is {max_file_bytes()} bytes")
        if self.members > max_members():
            return ImportIssue(self.label, "", f"more than {max_members()} files; split the import")
        if self.total > max_total_bytes():
            return ImportIssue(
                self.label, "", f"more than {max_total_bytes()} bytes uncompressed; split the import"
            )
        return None


def read_archive(name: str, data: bytes, wanted: Wanted) -> tuple[list[SourceFile], list[ImportIssue]]:
    """Files of an archive that `wanted` accepts. Any unsafe member refuses the whole archive."""
    lowered = name.lower()
    try:
        if lowered.endswith(".zip"):
            return _read_zip(name, data, wanted)
        return _read_tar(name, data, wanted)
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError) as exc:
        return [], [ImportIssue(name, "", f"not a readable archive: {exc}")]


def _read_zip(name: str, data: bytes, wanted: Wanted) -> tuple[list[SourceFile], list[ImportIssue]]:
    files: list[SourceFile] = []
    budget = _Budget(name)
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        infos = zf.infolist()
        for info in infos:  # check every member before reading any
            label = f"{name}!{info.filename}"
            unsafe = _unsafe_member_path(info.filename)
            if unsafe:
                return [], [ImportIssue(label, "", unsafe)]
            if stat.S_ISLNK(info.external_attr >> 16):
                return [], [ImportIssue(label, "", "symbolic link in archive refused")]
            if info.is_dir():
                continue
            over = budget.admit(label, info.file_size)
            if over:
                return [], [over]
        for info in infos:
            if info.is_dir() or _skipped(info.filename) or not wanted(info.filename):
                continue
            with zf.open(info) as fh:
                # Read one byte past the limit so a member lying about its size is still caught.
                blob = fh.read(max_file_bytes() + 1)
            if len(blob) > max_file_bytes():
                return [], [ImportIssue(f"{name}!{info.filename}", "", "member larger than its header says")]
            files.append(SourceFile(f"{name}!{info.filename}", blob))
    return files, []


def _read_tar(name: str, data: bytes, wanted: Wanted) -> tuple[list[SourceFile], list[ImportIssue]]:
    files: list[SourceFile] = []
    budget = _Budget(name)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tf:
        members: list[tarfile.TarInfo] = []
        # Iterate lazily (not getmembers()) so the budget stops a compressed bomb early.
        for member in tf:
            members.append(member)
            label = f"{name}!{member.name}"
            unsafe = _unsafe_member_path(member.name)
            if unsafe:
                return [], [ImportIssue(label, "", unsafe)]
            if member.issym() or member.islnk():
                return [], [ImportIssue(label, "", "link in archive refused")]
            if member.isdir():
                continue
            if not member.isfile():
                return [], [ImportIssue(label, "", "special file (device, fifo) in archive refused")]
            over = budget.admit(label, member.size)
            if over:
                return [], [over]
        for member in members:
            if not member.isfile() or _skipped(member.name) or not wanted(member.name):
                continue
            fh = tf.extractfile(member)
            if fh is None:
                continue
            files.append(SourceFile(f"{name}!{member.name}", fh.read(max_file_bytes() + 1)))
    return files, []


def read_paths(paths: list[Path], wanted: Wanted) -> tuple[list[SourceFile], list[ImportIssue]]:
    """Files named directly are always read; folders are walked for files that `wanted` accepts."""
    files: list[SourceFile] = []
    issues: list[ImportIssue] = []
    for path in paths:
        if not path.exists():
            issues.append(ImportIssue(str(path), "", "no such file or folder"))
        elif path.is_dir():
            got, problems = _read_folder(path, wanted)
            files += got
            issues += problems
        else:
            size = path.stat().st_size
            cap = max_total_bytes() if is_archive(path.name) else max_file_bytes()
            if size > cap:
                issues.append(ImportIssue(str(path), "", f"file is {size} bytes; the limit is {cap} bytes"))
                continue
            data = path.read_bytes()
            if is_archive(path.name):
                got, problems = read_archive(str(path), data, wanted)
                files += got
                issues += problems
            else:
                files.append(SourceFile(str(path), data))
    return files, issues


def _read_folder(folder: Path, wanted: Wanted) -> tuple[list[SourceFile], list[ImportIssue]]:
    budget = _Budget(str(folder))
    files: list[SourceFile] = []
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder).as_posix()
        if not path.is_file() or _skipped(relative) or not wanted(path.name):
            continue
        over = budget.admit(str(path), path.stat().st_size)
        if over:
            return [], [over]
        files.append(SourceFile(str(path), path.read_bytes()))
    if not files:
        return [], [ImportIssue(str(folder), "", "no task files of the chosen format found in this folder")]
    return files, []
