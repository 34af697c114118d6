"""Child processes in their own process groups, so stopping one stops everything it started."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from workers.envs.base import EnvError
from workers.envs.sandbox.spawner import popen_tied


def spawn(
    argv: Sequence[str],
    *,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    log: Path | None = None,
    pass_fds: Sequence[int] = (),
    user: int | None = None,
) -> subprocess.Popen[bytes]:
    """Start `argv` in a new session (process group) that dies with this process, as `user` (uid and
    gid) if given; stdout+stderr go to `log` or /dev/null."""
    out = open(log, "ab") if log is not None else subprocess.DEVNULL
    # A process that serves one session runs as that session's unprivileged uid.
    as_user: dict[str, Any] = {"user": user, "group": user, "extra_groups": []} if user is not None else {}
    try:
        # Tied to this process: a crashed env host leaves no Xvfb or x11vnc behind.
        return popen_tied(
            list(argv),
            env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            pass_fds=tuple(pass_fds),
            **as_user,
        )
    except OSError as exc:
        raise EnvError(f"cannot start {argv[0]}: {exc}") from exc
    finally:
        if log is not None and not isinstance(out, int):
            out.close()


def stop(proc: subprocess.Popen[bytes] | None, timeout_s: float = 2.0) -> None:
    """SIGTERM the process group, SIGKILL it if it outlives `timeout_s`, and reap the leader."""
    if proc is None:
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=timeout_s)
            # The leader is gone; sweep any children left in its group.
            os.killpg(proc.pid, signal.SIGKILL)
        except subprocess.TimeoutExpired:
            continue
        except ProcessLookupError:
            pass
        break
    if proc.poll() is None:
        proc.wait(timeout=timeout_s)


def wait_until(check: Callable[[], bool], timeout_s: float, what: str, interval_s: float = 0.01) -> None:
    """Poll `check` until true; raise EnvError naming `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        if check():
            return
        if time.monotonic() > deadline:
            raise EnvError(f"timed out after {timeout_s:.1f}s waiting for {what}")
        time.sleep(interval_s)


def free_port(low: int, high: int, host: str = "127.0.0.1") -> int:
    """A TCP port in [low, high) nobody listens on now (racy by nature; callers retry on bind errors)."""
    for port in range(low, high):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
            return port
    raise EnvError(f"no free TCP port in [{low}, {high})")


def has_descendant(pid: int, comm: str) -> bool:
    """Whether a process named `comm` runs below `pid` (reads /proc; Linux only)."""
    children: dict[int, list[int]] = {}
    names: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # the process exited while we looked
        # comm is in parentheses and may contain spaces; ppid is the 2nd field after it.
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        names[int(entry.name)] = name
        children.setdefault(ppid, []).append(int(entry.name))
    stack = list(children.get(pid, []))
    while stack:
        child = stack.pop()
        if names.get(child) == comm:
            return True
        stack.extend(children.get(child, []))
    return False
