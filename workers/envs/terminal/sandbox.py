"""Run shell commands confined to a session directory, with time and output limits.

The sandbox needs no extra package: util-linux `unshare` gives new mount, PID, network, IPC and
UTS namespaces; inside, a tmpfs root gets read-only binds of /usr (and the merged-/usr links), a
minimal /etc, a read-only /proc of the new PID namespace, three device nodes, and the session
directory at /home/session. `chroot` enters it, and `setpriv` drops every capability and sets
no_new_privs before the command runs, so root inside cannot mount, chroot out, or reach the host.
Host files such as /etc/shadow simply do not exist in that view; '..' stops at the new root and
symlinks resolve inside it.
"""

from __future__ import annotations

import os
import resource
import selectors
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from workers.envs.base import EnvError
from workers.envs.terminal.paths import SANDBOX_HOME

_ROOT_MOUNTPOINT = Path("/tmp/flywheel-sandbox-root")

# Runs as root inside the new namespaces, before privileges are dropped. $1 = session dir,
# $2 = working directory inside the sandbox, $3 = the command.
_SETUP = r"""
set -e
R=/tmp/flywheel-sandbox-root
mount --make-rprivate /
mount -t tmpfs -o size=64m,mode=755 sandbox "$R"
cd "$R"
mkdir -p usr etc proc dev tmp home/session
chmod 1777 tmp
mount --rbind /usr usr && mount -o remount,bind,ro usr
for d in bin sbin lib lib32 lib64 libx32; do
  if [ -L "/$d" ]; then ln -s "$(readlink "/$d")" "$d"
  elif [ -d "/$d" ]; then mkdir "$d" && mount --rbind "/$d" "$d" && mount -o remount,bind,ro "$d"
  fi
done
for f in ld.so.cache localtime nsswitch.conf; do [ -e "/etc/$f" ] && cp -L "/etc/$f" etc/ || true; done
if [ -d /etc/alternatives ]; then mkdir etc/alternatives && mount --rbind /etc/alternatives etc/alternatives && mount -o remount,bind,ro etc/alternatives; fi
printf 'root:x:0:0:root:/home/session:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n' > etc/passwd
printf 'root:x:0:\nnogroup:x:65534:\n' > etc/group
echo sandbox > etc/hostname
for n in null zero random urandom; do touch "dev/$n" && mount --bind "/dev/$n" "dev/$n"; done
ln -s /proc/self/fd dev/fd
if [ -t 0 ]; then
  # An interactive shell (the desktop's xterm): expose only its own pty, never the host's others.
  P=$(tty); mkdir -p dev/pts; touch ".$P" dev/tty; mount --bind "$P" ".$P"; mount --bind /dev/tty dev/tty
fi
mount --bind "$1" home/session
mount -t proc -o ro,nosuid,nodev,noexec proc proc
hostname sandbox || true
exec chroot "$R" /usr/bin/setpriv --no-new-privs --bounding-set=-all --inh-caps=-all --ambient-caps=-all \
  /usr/bin/env -i HOME=/home/session PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8 "TERM=${SANDBOX_TERM:-dumb}" \
  /bin/bash --noprofile --norc -c 'cd -- "$1" 2>/dev/null || cd /home/session; eval "$2"; rc=$?; printf %s "$PWD" >&3; exit $rc' sandbox "$2" "$3"
"""


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
    memory_mb: RLIMIT_CPU / RLIMIT_FSIZE / RLIMIT_AS for the command's processes."""

    timeout_s: float = 10.0
    max_output: int = 64_000
    cpu_s: int = 30
    file_mb: int = 256
    memory_mb: int = 2048


def sandbox_available() -> bool:
    """Whether namespaces can be created here (needs root or CAP_SYS_ADMIN)."""
    try:
        subprocess.run(
            ["unshare", "--mount", "--pid", "--fork", "true"], check=True, capture_output=True, timeout=10
        )
    except (OSError, subprocess.CalledProcessError, subprocess.TimeoutExpired):
        return False
    return True


def run_sandboxed(
    session_dir: Path,
    command: str,
    cwd: str = SANDBOX_HOME,
    limits: Limits | None = None,
    separate_stderr: bool = False,
) -> CommandResult:
    """Run `command` with bash inside the sandbox; `cwd` is a path inside it (under /home/session).

    stderr is merged into `output` (as a terminal shows it) unless `separate_stderr`.
    """
    limits = limits or Limits()
    if not session_dir.is_dir():
        raise EnvError(f"session directory {session_dir} does not exist")
    argv = sandbox_argv(session_dir, command, cwd)
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
    return _run(argv, limits, cwd_pipe=True, default_cwd=cwd, env=env, separate_stderr=separate_stderr)


def sandbox_argv(session_dir: Path, command: str, cwd: str = SANDBOX_HOME) -> list[str]:
    """The argv that runs `command` in the sandbox (no limits; `run_sandboxed` adds them).

    Also used for the desktop's xterm: `exec bash -i` gives an interactive confined shell.
    Needs /usr/sbin on PATH (mount, chroot) and optionally SANDBOX_TERM in the environment.
    """
    _ROOT_MOUNTPOINT.mkdir(exist_ok=True)
    return [
        "unshare",
        "--mount",
        "--pid",
        "--net",
        "--ipc",
        "--uts",
        "--fork",
        "--kill-child",
        "--",
        "/bin/sh",
        "-c",
        _SETUP,
        "sandbox-setup",
        str(session_dir.resolve()),
        cwd,
        command,
    ]


def run_host_command(
    command: str | list[str],
    *,
    shell: bool,
    cwd: Path,
    env: dict[str, str],
    timeout_s: float,
    max_output: int = 64_000,
    separate_stderr: bool = False,
) -> CommandResult:
    """Run a command unconfined (the desktop's own shell commands, OSWorld set-up on the desktop)."""
    if isinstance(command, str):
        argv = ["/bin/sh", "-c", command]
    elif shell:
        argv = ["/bin/sh", "-c", " ".join(command)]
    else:
        argv = list(command)
    limits = Limits(timeout_s=timeout_s, max_output=max_output)
    return _run(
        argv, limits, cwd_pipe=False, default_cwd=str(cwd), env=env, cwd=cwd, separate_stderr=separate_stderr
    )


def _run(
    argv: list[str],
    limits: Limits,
    *,
    cwd_pipe: bool,
    default_cwd: str,
    env: dict[str, str],
    cwd: Path | None = None,
    separate_stderr: bool = False,
) -> CommandResult:
    read_fd, write_fd = os.pipe() if cwd_pipe else (-1, -1)
    # fd 3 is listed so the close-fds pass keeps the copy that _set_rlimits dup2s there.
    fds = (write_fd, 3) if cwd_pipe else ()
    t0 = time.monotonic()
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE if separate_stderr else subprocess.STDOUT,
            start_new_session=True,
            env=env,
            cwd=cwd,
            pass_fds=fds,
            preexec_fn=(lambda: _set_rlimits(limits, cwd_pipe, write_fd)),
        )
    except OSError as exc:
        raise EnvError(f"cannot run command: {exc}") from exc
    finally:
        if cwd_pipe:
            os.close(write_fd)
    try:
        output, errors, truncated, timed_out = _collect(proc, limits)
        new_cwd = _read_all(read_fd).decode(errors="replace") if cwd_pipe else default_cwd
    finally:
        if cwd_pipe:
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


def _set_rlimits(limits: Limits, cwd_pipe: bool, write_fd: int) -> None:
    resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_s, limits.cpu_s))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_mb << 20, limits.file_mb << 20))
    resource.setrlimit(resource.RLIMIT_AS, (limits.memory_mb << 20, limits.memory_mb << 20))
    if cwd_pipe:
        # The inner shell writes its final directory to fd 3.
        os.dup2(write_fd, 3)


def _collect(proc: subprocess.Popen[bytes], limits: Limits) -> tuple[bytes, bytes, bool, bool]:
    """Read stdout (and stderr if piped) until exit; kill the process group on timeout or overflow."""
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
    while open_fds and not (truncated or timed_out):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            timed_out = True
            break
        for key, _ in sel.select(timeout=min(remaining, 0.5)):
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
        _kill_group(proc)
    proc.wait()
    proc.stdout.close()
    if proc.stderr is not None:
        proc.stderr.close()
    out = bytes(streams[out_fd])[: limits.max_output]
    err = bytes(streams[err_fd])[: limits.max_output] if err_fd >= 0 else b""
    return out, err, truncated, timed_out


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _read_all(fd: int) -> bytes:
    data = b""
    while chunk := os.read(fd, 4096):
        data += chunk
    return data
