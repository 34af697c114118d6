"""Named API / SDK actions an environment exposes besides GUI input (seed 001 §2.1).

An `Action(kind='api_call', name=..., arguments={...})` runs the registered function with the
session directory and the named arguments. Each environment kind has its own registry; the
terminal's holds file actions confined to the session directory.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workers.envs.base import EnvError
from workers.envs.terminal.paths import PathOutsideSession, confine, open_beneath

MAX_READ_BYTES = 1 << 20

ApiFunc = Callable[..., Any]


@dataclass(frozen=True)
class ApiAction:
    name: str
    func: ApiFunc
    arg_names: tuple[str, ...]
    required: tuple[str, ...]


class ApiRegistry:
    """Name → action. `call` checks the arguments against the registered names before running."""

    def __init__(self) -> None:
        self._actions: dict[str, ApiAction] = {}

    def register(
        self, name: str, func: ApiFunc, arg_names: tuple[str, ...], required: tuple[str, ...] | None = None
    ) -> None:
        if not name.isidentifier():
            raise ValueError(f"API action name must be an identifier, got {name!r}")
        if name in self._actions:
            raise ValueError(f"API action {name!r} is already registered")
        req = arg_names if required is None else required
        if not set(req) <= set(arg_names):
            raise ValueError(f"required arguments {req} must be among {arg_names}")
        self._actions[name] = ApiAction(name, func, tuple(arg_names), tuple(req))

    def names(self) -> list[str]:
        return sorted(self._actions)

    def call(self, session_dir: Path, name: str | None, arguments: Mapping[str, Any] | None) -> Any:
        if name is None or name not in self._actions:
            raise EnvError(f"unknown API action {name!r}; available: {', '.join(self.names())}")
        action = self._actions[name]
        args = dict(arguments or {})
        unknown = set(args) - set(action.arg_names)
        missing = set(action.required) - set(args)
        if unknown or missing:
            raise EnvError(f"{name}: unknown arguments {sorted(unknown)}, missing {sorted(missing)}")
        return action.func(session_dir, **args)


TERMINAL_API = ApiRegistry()


def register_api_action(
    name: str, func: ApiFunc, arg_names: tuple[str, ...], registry: ApiRegistry = TERMINAL_API
) -> None:
    """Register `func(session_dir, **arguments)` as API action `name` (default: terminal registry)."""
    registry.register(name, func, arg_names)


def read_file(session_dir: Path, path: str) -> dict[str, Any]:
    confine(session_dir, path)
    fd = open_beneath(session_dir, path, os.O_RDONLY)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise EnvError(f"read_file: {path!r} is not a file")
        data = handle.read(MAX_READ_BYTES + 1)
    return {
        "path": path,
        "content": data[:MAX_READ_BYTES].decode(errors="replace"),
        "truncated": len(data) > MAX_READ_BYTES,
    }


def write_file(session_dir: Path, path: str, content: str) -> dict[str, Any]:
    if not isinstance(content, str):
        raise EnvError("write_file: content must be a string")
    target = confine(session_dir, path)
    if not target.parent.is_dir():
        raise EnvError(f"write_file: directory of {path!r} does not exist")
    fd = open_beneath(session_dir, path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    with os.fdopen(fd, "wb") as handle:
        owner = session_dir.stat()
        os.fchown(handle.fileno(), owner.st_uid, owner.st_gid)  # the session's file, as if it wrote it
        handle.write(content.encode())
    return {"path": path, "bytes": len(content.encode())}


def list_dir(session_dir: Path, path: str = ".") -> dict[str, Any]:
    confine(session_dir, path)
    try:
        fd = open_beneath(session_dir, path, os.O_RDONLY | os.O_DIRECTORY)
    except EnvError as exc:
        if isinstance(exc, PathOutsideSession):
            raise
        raise EnvError(f"list_dir: {path!r} is not a directory") from exc
    try:
        with os.scandir(fd) as it:
            names = [e.name + ("/" if e.is_dir(follow_symlinks=False) else "") for e in it]
    finally:
        os.close(fd)
    return {"path": path, "entries": sorted(names, key=str.lower)}


TERMINAL_API.register("read_file", read_file, ("path",))
TERMINAL_API.register("write_file", write_file, ("path", "content"))
TERMINAL_API.register("list_dir", list_dir, ("path",), required=())
