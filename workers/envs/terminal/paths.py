"""Resolve user-given paths inside a session directory and refuse anything that leaves it.

Host-side tools (API actions, the MCP file tool, OSWorld downloads) run on the host as root, and
the session can plant symlinks in its directory, so every path is resolved with symlinks followed
and must still lie inside the session root (`confine`, for clear refusals), and the file itself is
then opened without following any symlink (`open_beneath`), which closes the race in between.
"""

from __future__ import annotations

import errno
import os
import posixpath
from pathlib import Path, PurePosixPath

from workers.envs.base import EnvError
from workers.envs.sandbox.run import SANDBOX_HOME


class PathOutsideSession(EnvError):
    """A path that resolves outside the session directory (via '..', an absolute path or a symlink)."""


def _session_relative(user_path: str) -> PurePosixPath:
    """`user_path` relative to the session root: relative as given, '~/...', or under /home/session."""
    if not isinstance(user_path, str) or not user_path or "\x00" in user_path:
        raise PathOutsideSession(f"bad path {user_path!r}")
    pure = PurePosixPath(user_path)
    if user_path == "~" or user_path.startswith("~/"):
        pure = PurePosixPath(user_path[2:] or ".")
    elif pure.is_absolute():
        try:
            pure = pure.relative_to(SANDBOX_HOME)
        except ValueError as exc:
            raise PathOutsideSession(f"{user_path!r} is outside the session directory") from exc
    return pure


def confine(root: Path, user_path: str) -> Path:
    """The real path for `user_path` under `root`.

    Relative paths are relative to the root; absolute paths are accepted only under the sandbox's
    view of it (/home/session/...), or '~/...'.
    """
    pure = _session_relative(user_path)
    real_root = root.resolve()
    candidate = (real_root / pure).resolve()
    if candidate != real_root and real_root not in candidate.parents:
        raise PathOutsideSession(f"{user_path!r} resolves outside the session directory")
    return candidate


def open_beneath(
    root: Path, user_path: str, flags: int, mode: int = 0o644, make_parents: bool = False
) -> int:
    """An fd for `user_path` under `root`, opened one component at a time without following any
    symlink: a session that swaps a directory for a symlink between `confine`'s check and the use
    cannot send a host-side tool (running as root) outside its home. With `make_parents` missing
    directories are created on the way (owned like `root`; with O_DIRECTORY in `flags` the
    last component too). The caller closes the fd."""
    parts = _relative_parts(user_path)
    owner = root.stat()
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        # With O_DIRECTORY the last component is a directory to make as well.
        for name in parts if make_parents and flags & os.O_DIRECTORY else parts[:-1]:
            if make_parents:
                try:
                    os.mkdir(name, 0o755, dir_fd=fd)
                    os.chown(name, owner.st_uid, owner.st_gid, dir_fd=fd, follow_symlinks=False)
                except FileExistsError:
                    pass
            next_fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = next_fd
        if not parts or (make_parents and flags & os.O_DIRECTORY):
            return fd
        last = os.open(parts[-1], flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=fd)
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise PathOutsideSession(
                f"{user_path!r} goes through a symbolic link or a non-directory"
            ) from exc
        raise EnvError(f"{user_path!r}: {exc.strerror}") from exc
    os.close(fd)
    return last


def _relative_parts(user_path: str) -> list[str]:
    """`user_path` as path components below the session root (see `confine` for the forms)."""
    pure = _session_relative(user_path)
    # '..' is taken lexically: the walk never follows a symlink, so that is what it means here.
    normal = posixpath.normpath(str(pure))
    if normal == ".." or normal.startswith("../"):
        raise PathOutsideSession(f"{user_path!r} climbs out of the session directory")
    return [p for p in PurePosixPath(normal).parts if p != "."]
