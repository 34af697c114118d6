"""Where a task's files come from: its bundle or the admin's mirror (web URLs, `wget -x` layout),
never the network; and how they enter the session (never through a symlink the session planted)."""

from __future__ import annotations

import contextlib
import contextvars
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

from workers.envs.osworld.common import OSWORLD_HOME, CommandRunner, OSWorldError

_WINDOWS_PATH = re.compile(r"^[A-Za-z]:[\\/]")


def _local(url: str) -> bool:
    scheme = urlsplit(url).scheme
    return scheme in {"", "file"}


def mirror_dir() -> Path | None:
    """The admin's local mirror of task files (OSWORLD_MIRROR_DIR, `<host>/<path>` inside)."""
    value = os.environ.get("OSWORLD_MIRROR_DIR", "")
    return Path(value) if value and Path(value).is_dir() else None


def pyautogui_dir() -> Path | None:
    """Where `make osworld-apps` installed pyautogui for the sessions' Python (OSWORLD_PY_DIR)."""
    path = Path(os.environ.get("OSWORLD_PY_DIR", "/opt/flywheel/osworld-py"))
    return path if (path / "pyautogui").is_dir() else None


def mirror_relative(url: str) -> str | None:
    """Where a web file lies in the mirror: `<host>/<path>[?query]`, the layout `wget -x` writes
    (it keeps the query in the file name: Google Drive's links differ only there); None for a URL
    that cannot have a copy (not http(s), no file path, dot segments)."""
    parts = urlsplit(url)
    tail = [p for p in parts.path.split("/") if p]
    if parts.scheme not in {"http", "https"} or not parts.hostname or not tail:
        return None
    if any(p in {".", ".."} or "\0" in p for p in [parts.hostname, *tail]):
        return None
    return "/".join([parts.hostname, *tail]) + (f"?{parts.query}" if parts.query else "")


def _url_candidates(url: str, bundle_dir: Path | None) -> list[tuple[Path, str]]:
    relative = mirror_relative(url)
    if relative is None:
        return []
    parts = urlsplit(url)
    tail = [p for p in parts.path.split("/") if p]
    out = []
    if bundle_dir is not None:
        out += [
            (bundle_dir, relative),
            (bundle_dir, "/".join([parts.hostname or "", *tail])),
            (bundle_dir, tail[-1]),
        ]
    mirror = mirror_dir()
    if mirror is not None:
        out.append((mirror, relative))
    return out


def local_copy(url: str, bundle_dir: Path | None) -> Path | None:
    """The bundle's or the mirror's copy of a web file, confined to that directory, or None."""
    from workers.envs.terminal.paths import PathOutsideSession, confine

    for root, relative in _url_candidates(url, bundle_dir):
        try:
            path = confine(root.resolve(), relative)
        except (ValueError, PathOutsideSession):
            continue
        if path.is_file():
            return path
    return None


# `bench osworld` asks what would run with a filled mirror: inside `assuming_mirrored()`, every web
# file that can have a mirror copy counts as present (nothing is fetched or faked; set-up still
# refuses a missing copy).
_ASSUME_MIRRORED: contextvars.ContextVar[bool] = contextvars.ContextVar("assume_mirrored", default=False)


@contextlib.contextmanager
def assuming_mirrored() -> Iterator[None]:
    token = _ASSUME_MIRRORED.set(True)
    try:
        yield
    finally:
        _ASSUME_MIRRORED.reset(token)


def _url_problems(url: str, bundle_dir: Path | None = None) -> list[str]:
    if local_copy(url, bundle_dir) is not None:
        return []
    if _ASSUME_MIRRORED.get() and mirror_relative(url) is not None:
        return []
    if bundle_dir is None and urlsplit(url).scheme in {"http", "https"} and mirror_dir() is None:
        where = "no local mirror is set (OSWORLD_MIRROR_DIR)"
    else:
        where = "neither the task's bundle nor the local mirror has a copy"
    return [
        f"{url!r} needs the network: {where}, and sessions have no network "
        "(manage.py osworld_mirror fills the mirror)"
    ]


def _bundle_file(bundle_dir: Path | None, url: str, index: int) -> Path:
    """The real path of a local `download` source; it must lie in the task's bundle directory."""
    if bundle_dir is None:
        raise OSWorldError(
            f"step {index}: download of {url!r}: this task has no bundle of files to copy from"
        )
    from workers.envs.terminal.paths import PathOutsideSession, confine

    path = urlsplit(url).path
    root = bundle_dir.resolve()
    try:
        relative = str(Path(path).resolve().relative_to(root)) if path.startswith("/") else path
        source = confine(root, relative)
    except (ValueError, PathOutsideSession):
        raise OSWorldError(
            f"step {index}: download of {url!r} refused: local files must lie in the task's bundle {bundle_dir}"
        ) from None
    if not source.is_file():
        raise OSWorldError(f"step {index}: download of {url!r}: no such file in the task's bundle")
    return source


def _copy_into_session(runner: CommandRunner, source: Path, path: str) -> None:
    """Copy a bundle file to `path` in the session, never through a symlink the session planted;
    the copy (and any directory made for it) belongs to the session's user."""
    from workers.envs.terminal.paths import open_beneath

    target = _session_path(runner, path)  # refuses paths outside, with the reason
    relative = str(target.relative_to(runner.session_dir.resolve()))
    fd = open_beneath(runner.session_dir, relative, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, make_parents=True)
    with os.fdopen(fd, "wb") as out, source.open("rb") as src:
        owner = runner.session_dir.stat()
        os.fchown(out.fileno(), owner.st_uid, owner.st_gid)
        shutil.copyfileobj(src, out)


def _session_path(runner: CommandRunner, path: str) -> Path:
    """A set-up path ('/home/user/x', '~/x' or relative) as a real path in the session directory."""
    from workers.envs.terminal.paths import confine

    relative = path[len(OSWORLD_HOME) :].lstrip("/") if path.startswith(OSWORLD_HOME) else path
    return confine(runner.session_dir, relative.removeprefix("~/") or ".")
