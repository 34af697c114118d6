"""Resolve user-given paths inside a session directory and refuse anything that leaves it.

Host-side tools (API actions, the MCP file tool) run unconfined, and the sandbox can plant
symlinks in the session directory, so every path is resolved with symlinks followed and must
still lie inside the session root.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from workers.envs.base import EnvError
from workers.envs.sandbox.run import SANDBOX_HOME


class PathOutsideSession(EnvError):
    """A path that resolves outside the session directory (via '..', an absolute path or a symlink)."""


def confine(root: Path, user_path: str) -> Path:
    """The real path for `user_path` under `root`.

    Relative paths are relative to the root; absolute paths are accepted only under the sandbox's
    view of it (/home/session/...), or '~/...'.
    """
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
    real_root = root.resolve()
    candidate = (real_root / pure).resolve()
    if candidate != real_root and real_root not in candidate.parents:
        raise PathOutsideSession(f"{user_path!r} resolves outside the session directory")
    return candidate
