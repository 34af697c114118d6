"""Run one command with time and output limits and collect what it printed.

The process gets its own process group; a timeout or an output overflow kills the group. Reading
stops shortly after the command itself exits, even if something it left in the background still
holds the output pipe (that process is the sandbox's to end, at the latest when it closes).
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from workers.envs.base import EnvError

SANDBOX_HOME = "/home/session"
_AFTER_EXIT_S = 0.05  # how long output is still read once the command exited


@dataclass(frozen=True)
class CommandResult:
    """Outcome of one command. `cwd` is the working directory after it ran (sandbox path)."""

    returncode: int
    output: str
    stderr: str = ""  # empty unless the command ran with separate_stderr
    truncated: bool = False
    timed_out: bool = False
    duration_s: float = 0.0
    cwd: str = SANDBOX_HOME

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out


@dataclass(frozen=True)
class Limits:
    """timeout_s: wall clock per command; max_output: bytes of stdout+stderr kept; cpu_s, file_mb,
    memory_mb: RLIMIT_CPU / RLIMIT_FSIZE / RLIMIT_AS for the command's processes (memory_mb 0: no
    RLIMIT_AS, for commands that start programs such as Chromium that reserve much address space;
    the sandbox's memory limit still holds)."""

    timeout_s: float = 10.0
    max_output: int = 64_000
    cpu_s: int = 30
    file_mb: int = 256
    memory_mb: int = 2048


def run_collect(
    argv: Sequence[str],
    limits: Limits,
    *,
    env: dict[str, str],
    preexec: Callable[[], None],
    report_cwd: bool = False,
    default_cwd: str = SANDBOX_HOME,
    separate_stderr: bool = False,
) -> CommandResult:
    """Run `argv` (in a new process group, `preexec` run in the child) and collect its output. With
    `report_cwd` the command gets a pipe as fd 3 and writes its final working directory there."""
    read_fd, write_fd = os.pipe() if report_cwd else (-1, -1)
    t0 = time.monotonic()
    try:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE if separate_stderr else subprocess.STDOUT,
            start_new_session=True,
            env=env,
            pass_fds=(write_fd, 3) if report_cwd else (),
            preexec_fn=(lambda: _child_setup(preexec, write_fd)),
        )
    except OSError as exc:
        raise EnvError(f"cannot run command: {exc}") from exc
    finally:
        if report_cwd:
            os.close(write_fd)
    try:
        output, errors, truncated, timed_out = _collect(proc, limits)
        new_cwd = _read_available(read_fd).decode(errors="replace") if report_cwd else ""
    finally:
        if report_cwd:
            os.close(read_fd)
    return CommandResult(
        returncode=proc.returncode if proc.returncode is not None else -9,
        output=output.decode(errors="replace"),
        stderr=errors.decode(errors="replace"),
        truncated=truncated,
        timed_out=timed_out,
        duration_s=time.monotonic() - t0,
        cwd=new_cwd or default_cwd,
    )


def _child_setup(preexec: Callable[[], None], write_fd: int) -> None:
    preexec()
    if write_fd >= 0:
        os.dup2(write_fd, 3)  # the inner shell writes its final directory to fd 3


def _collect(proc: subprocess.Popen[bytes], limits: Limits) -> tuple[bytes, bytes, bool, bool]:
    """Read stdout (and stderr if piped) until the command exits (then a moment more) or closes
    them; kill the process group on timeout or overflow."""
    assert proc.stdout is not None
    deadline = time.monotonic() + limits.timeout_s
    out_fd = proc.stdout.fileno()
    err_fd = proc.stderr.fileno() if proc.stderr is not None else -1
    streams = {out_fd: bytearray()}
    if err_fd >= 0:
        streams[err_fd] = bytearray()
    truncated = timed_out = False
    sel = selectors.DefaultSelector()
    for fd in streams:
        sel.register(fd, selectors.EVENT_READ)
    open_fds = set(streams)
    exited_at: float | None = None
    while open_fds and not (truncated or timed_out):
        now = time.monotonic()
        if exited_at is None and proc.poll() is not None:
            exited_at = now
        if exited_at is not None and now - exited_at > _AFTER_EXIT_S:
            break  # only something left in the background still holds the pipe
        if now >= deadline:
            timed_out = True
            break
        wait = min(deadline - now, 0.02 if exited_at is not None else 0.05)
        for key, _ in sel.select(timeout=wait):
            fd = int(key.fd)
            chunk = os.read(fd, 65536)
            if not chunk:
                sel.unregister(fd)
                open_fds.discard(fd)
                continue
            streams[fd].extend(chunk)
            truncated = sum(len(b) for b in streams.values()) > limits.max_output
    sel.close()
    if timed_out or truncated:
        kill_group(proc.pid)
    proc.wait()
    proc.stdout.close()
    if proc.stderr is not None:
        proc.stderr.close()
    out = bytes(streams[out_fd])[: limits.max_output]
    err = bytes(streams[err_fd])[: limits.max_output] if err_fd >= 0 else b""
    return out, err, truncated, timed_out


def kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _read_available(fd: int) -> bytes:
    """What is in the pipe now (a background child may hold its write end open)."""
    os.set_blocking(fd, False)
    data = b""
    try:
        while chunk := os.read(fd, 4096):
            data += chunk
    except BlockingIOError:
        pass
    return data
