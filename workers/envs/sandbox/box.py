"""`Sandbox`: one session's box — bubblewrap namespaces, an unprivileged uid, limits — that every
process of the session runs in (see the package docstring)."""

from __future__ import annotations

import json
import logging
import os
import resource
import select
import shlex
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from workers.envs.base import EnvError
from workers.envs.sandbox import cgroups, egress
from workers.envs.sandbox.cgroups import SandboxCgroup
from workers.envs.sandbox.egress import Slirp
from workers.envs.sandbox.filesystem import INSIDE_UID, bwrap_args, chown_tree, untraversable_parent
from workers.envs.sandbox.home import (
    DEFAULT_DISK_MB,
    disk_full_notice,
    home_full,
    mount_home,
    unmount_home,
    unmount_stale,
)
from workers.envs.sandbox.run import SANDBOX_HOME, CommandResult, Limits, kill_group, run_collect
from workers.envs.sandbox.spawner import popen_tied
from workers.envs.sandbox.uids import UidLease

log = logging.getLogger(__name__)

PATH = "/usr/local/bin:/usr/bin:/bin"
NETWORK_REFUSED = (
    "this host cannot give a sandboxed session network egress that keeps the host's own services "
    "(Redis, PostgreSQL, the web app) out of reach, so tasks that need the network are refused"
)


class SandboxError(EnvError):
    """The sandbox could not start, or was asked for something it refuses to give."""


@dataclass(frozen=True)
class SandboxPolicy:
    """What one session's sandbox may use. One line per field:

    - processes: RLIMIT_NPROC of the session's own uid and the cgroup's pids.max (threads count).
    - memory_mb: the cgroup memory limit (where cgroups are writable here).
    - cpus: the cgroup CPU quota, in cores.
    - tmp_mb: size of the private /tmp and /dev/shm.
    - disk_mb: size of the session's home, a tmpfs over the session directory while the box lives
      (`home`); a write past it fails with ENOSPC. 0: no cap, the home is the host directory itself.
    - network: False: a private network namespace with only its own loopback. True: egress through
      slirp4netns, filtered so that no address of this host and no private range is reachable
      (`egress`); refused with NETWORK_REFUSED and the reason where this host cannot filter it.
    """

    processes: int = 1024
    memory_mb: int = 4096
    cpus: float = 2.0
    tmp_mb: int = 512
    disk_mb: int = DEFAULT_DISK_MB
    network: bool = False


@dataclass
class _Started:
    lease: UidLease
    cgroup: SandboxCgroup
    holder: subprocess.Popen[bytes]
    init_pid: int
    slirp: Slirp | None = None
    started_at: float = field(default_factory=time.monotonic)


class Sandbox:
    """A session's box. `home` (host path) is the session's home, /home/session inside (also
    reachable as /home/user, OSWorld's home); `ro_binds` maps inside paths to host paths shown
    read-only (the window manager's configuration), `binds` to host directories shown writable (the
    directory the desktop's Xvfb makes its socket in, which the host's X clients reach).

    `start()` starts the box's init; `run()` and `spawn()` start processes inside it; `close()`
    ends every process the box holds. Thread-safe for concurrent `run`/`spawn` calls.
    """

    def __init__(
        self,
        home: Path,
        *,
        policy: SandboxPolicy | None = None,
        ro_binds: Mapping[str, Path] | None = None,
        binds: Mapping[str, Path] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.home = home
        self.policy = policy or SandboxPolicy()
        if self.policy.network and (reason := egress.unavailable()) is not None:
            raise SandboxError(f"{NETWORK_REFUSED}: {reason}")
        self.ro_binds = dict(ro_binds or {})
        self.binds = dict(binds or {})
        self.env = {
            "PATH": PATH,
            "HOME": SANDBOX_HOME,
            "USER": "user",
            "SHELL": "/bin/bash",
            "LANG": "C.UTF-8",
            **(env or {}),
        }
        self._prepared: tuple[UidLease, SandboxCgroup] | None = None
        self._s: _Started | None = None
        self._home_capped = False

    # lifecycle -------------------------------------------------------------------------------

    @property
    def uid(self) -> int:
        """The host uid the box's processes run as."""
        if self._prepared is None:
            raise SandboxError("the session's sandbox is not prepared")
        return self._prepared[0].uid

    def prepare(self) -> int:
        """Lease the box's uid and make its cgroups (idempotent; `start` does it too); returns the
        uid, for host processes that serve only this session and need no root (its Xvfb)."""
        if self._prepared is None:
            if not self.home.is_dir():
                raise SandboxError(f"session directory {self.home} does not exist")
            if (parent := untraversable_parent(self.home)) is not None:
                raise SandboxError(
                    f"session directory {self.home} is not reachable by the sandbox user: {parent} does not "
                    "let others traverse it (make session directories under /tmp, or chmod o+x)"
                )
            lease = UidLease()
            try:
                self._cap_home(lease.uid)
                chown_tree(self.home, lease.uid)
                cgroup = SandboxCgroup(
                    f"flywheel-sandbox-{lease.uid}",
                    pids=self.policy.processes,
                    memory_mb=self.policy.memory_mb,
                    cpus=self.policy.cpus,
                )
            except BaseException:
                self._uncap_home()
                lease.release()
                raise
            self._prepared = (lease, cgroup)
            cgroups.remove_stale()  # what boxes of a crashed process left behind
            unmount_stale()
        return self._prepared[0].uid

    def start(self, timeout_s: float = 10.0) -> None:
        if self._s is not None:
            return
        self.prepare()
        assert self._prepared is not None
        lease, cgroup = self._prepared
        try:
            self._s = self._start_holder(lease, cgroup, timeout_s)
        except BaseException:
            self._release()
            raise

    def alive(self) -> bool:
        return self._s is not None and self._s.holder.poll() is None

    def close(self) -> None:
        """End every process of the box: its init is killed, the kernel kills the pid namespace, and
        anything that still runs under the box's uid is killed before the uid is given back."""
        s, self._s = self._s, None
        if s is None:
            self._release()  # prepared, never started
            return
        if s.slirp is not None:
            s.slirp.stop()
        try:
            os.kill(s.init_pid, signal.SIGKILL)  # pid 1 of the box: the kernel kills the rest
        except ProcessLookupError:
            pass
        kill_group(s.holder.pid)  # bwrap's monitor outside: it would take its time to notice
        s.holder.wait()
        for stream in (s.holder.stdout, s.holder.stderr):
            if stream is not None:
                stream.close()
        self._release()

    def _release(self) -> None:
        prepared, self._prepared = self._prepared, None
        if prepared is None:
            return
        lease, cgroup = prepared
        lease.release()  # kills the uid's leftovers first
        self._uncap_home()
        cgroup.remove()
        if self.home.is_dir():
            chown_tree(self.home, 0)

    def _cap_home(self, uid: int) -> None:
        """The home becomes a tmpfs of `policy.disk_mb` (`home`), unless the policy has no cap."""
        if self.policy.disk_mb <= 0:
            return
        try:
            mount_home(self.home, self.policy.disk_mb, uid)
        except OSError as exc:
            raise SandboxError(
                f"cannot cap the session's home at {self.policy.disk_mb} MiB ({exc}); the env host needs "
                "CAP_SYS_ADMIN to mount it (docker compose: cap_add SYS_ADMIN)"
            ) from exc
        self._home_capped = True

    def _uncap_home(self) -> None:
        if self._home_capped:
            self._home_capped = False
            try:
                unmount_home(self.home)
            except OSError as exc:
                log.warning("the session's home %s was not mounted any more: %s", self.home, exc)

    # processes -------------------------------------------------------------------------------

    def run(
        self,
        command: str | Sequence[str],
        *,
        limits: Limits | None = None,
        cwd: str = SANDBOX_HOME,
        env: Mapping[str, str] | None = None,
        separate_stderr: bool = False,
        report_cwd: bool = False,
    ) -> CommandResult:
        """Run a command in the box and wait for it (at most `limits.timeout_s`).

        A string runs with bash in `cwd` (a path inside); a list is an argv run as is. With
        `report_cwd` the result's `cwd` is the shell's directory when it finished.
        """
        limits = limits or Limits()
        if isinstance(command, str):
            tail = 'printf %s "$PWD" >&3; ' if report_cwd else ""
            script = f'cd -- "$1" 2>/dev/null || cd {SANDBOX_HOME}; eval "$2"; rc=$?; {tail}exit $rc'
            inner = ["/bin/bash", "--noprofile", "--norc", "-c", script, "sandbox", cwd, command]
        else:
            inner = list(command)
        return run_collect(
            self._enter_argv(inner),
            limits,
            env=self._env(env),
            preexec=lambda: self._child_limits(limits),
            report_cwd=report_cwd,
            default_cwd=cwd,
            separate_stderr=separate_stderr,
        )

    def spawn(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        log_path: Path | None = None,
        pass_fds: Sequence[int] = (),
    ) -> subprocess.Popen[bytes]:
        """Start a long-running process in the box (its own process group); output to `log_path`;
        `pass_fds` are inherited (a readiness pipe)."""
        out = open(log_path, "ab") if log_path is not None else subprocess.DEVNULL
        try:
            return subprocess.Popen(
                self._enter_argv(list(argv)),
                env=self._env(env),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                pass_fds=tuple(pass_fds),
                preexec_fn=lambda: self._child_limits(None),
            )
        except OSError as exc:
            raise SandboxError(f"cannot start {argv[0]} in the sandbox: {exc}") from exc
        finally:
            if not isinstance(out, int):
                out.close()

    def launcher(self, path: Path, program: str, env: Mapping[str, str] | None = None) -> Path:
        """Write an executable /bin/sh script at `path` that runs `program "$@"` in the box, for a
        host library that starts a program itself (Playwright's executable_path). The program gets
        the box's cgroup and RLIMIT_NPROC and only the box's environment, never the host's."""
        s = self._require()
        nproc = self.policy.processes
        variables = [f"{k}={v}" for k, v in self._env(env).items()]
        inner = self._enter_argv(["/usr/bin/env", "-i", *variables, program])
        lines = ["#!/bin/sh"]
        lines += [f"echo $$ > {shlex.quote(str(p / 'cgroup.procs'))} 2>/dev/null" for p in s.cgroup.paths]
        lines.append(f'exec prlimit --nproc={nproc}:{nproc} {shlex.join(inner)} "$@"')
        path.write_text("\n".join(lines) + "\n")
        path.chmod(0o700)
        return path

    def disk_notice(self) -> str | None:
        """A message for the session when its home has (almost) no room left, else None."""
        if self._home_capped and home_full(self.home):
            return disk_full_notice(self.policy.disk_mb)
        return None

    def host_path(self, inside: str) -> Path:
        """The host's path to a file in the box's own file system (its /tmp, /run), for root on the
        host to look at (the box's processes never see host paths)."""
        return Path(f"/proc/{self._require().init_pid}/root") / inside.lstrip("/")

    @property
    def init_pid(self) -> int:
        """Host pid of the box's pid 1 (its namespaces: /proc/<pid>/ns/...)."""
        return self._require().init_pid

    # internals -------------------------------------------------------------------------------

    def _require(self) -> _Started:
        if self._s is None or self._s.holder.poll() is not None:
            raise SandboxError("the session's sandbox is not running")
        return self._s

    def _env(self, extra: Mapping[str, str] | None) -> dict[str, str]:
        return {**self.env, **(extra or {})}

    def _enter_argv(self, inner: list[str]) -> list[str]:
        """nsenter joins every namespace of the box's init, takes its root and the box user, and
        setpriv forbids gaining privileges by exec (setuid binaries) from there on."""
        s = self._require()
        return [
            "nsenter",
            f"--target={s.init_pid}",
            "--user",
            "--mount",
            "--pid",
            "--net",
            "--ipc",
            "--uts",
            "--root",
            "--wd",
            f"--setuid={INSIDE_UID}",
            f"--setgid={INSIDE_UID}",
            "--",
            "/usr/bin/setpriv",
            "--no-new-privs",
            *inner,
        ]

    def _child_limits(self, limits: Limits | None) -> None:
        """In the forked child, before exec: the box's cgroup and rlimits (inherited inside)."""
        s = self._s
        if s is None:
            return
        s.cgroup.enter()
        nproc = self.policy.processes
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
        if limits is not None:
            resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_s, limits.cpu_s))
            resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_mb << 20, limits.file_mb << 20))
            if limits.memory_mb > 0:
                resource.setrlimit(resource.RLIMIT_AS, (limits.memory_mb << 20, limits.memory_mb << 20))

    def _start_holder(self, lease: UidLease, cgroup: SandboxCgroup, timeout_s: float) -> _Started:
        """Start bwrap, whose init holds the box open until `close()` kills it.

        bwrap's --die-with-parent (PR_SET_PDEATHSIG) follows the *thread* that started it, and env
        hosts boot envs on pool threads that may come and go; so every box is started from one
        thread that lives as long as this process (`spawner.popen_tied`): the box dies with the process."""
        info_r, info_w = os.pipe()
        fds: list[int] = []
        try:
            argv = [
                "setpriv",
                f"--reuid={lease.uid}",
                f"--regid={lease.uid}",
                "--clear-groups",
                "--no-new-privs",
                "--",
                "bwrap",
                *bwrap_args(
                    self.home,
                    ro_binds=self.ro_binds,
                    binds=self.binds,
                    tmp_mb=self.policy.tmp_mb,
                    network=self.policy.network,
                    fds=fds,
                ),
                "--die-with-parent",
                "--info-fd",
                str(info_w),
                "--",
                "/bin/sh",
                "-c",
                "echo ready; exec sleep infinity",
            ]

            def preexec() -> None:
                cgroup.enter()
                nproc = self.policy.processes
                resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))

            holder = popen_tied(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=self.env,
                start_new_session=True,
                pass_fds=(info_w, *fds),
                preexec_fn=preexec,
            )
        except OSError as exc:
            raise SandboxError(f"cannot start bwrap: {exc}") from exc
        finally:
            for fd in (info_w, *fds):
                os.close(fd)
        try:
            init_pid = _read_child_pid(info_r, holder, timeout_s)
            _wait_ready(holder, timeout_s)
        except BaseException:
            kill_group(holder.pid)
            holder.wait()
            raise
        finally:
            os.close(info_r)
        started = _Started(lease, cgroup, holder, init_pid)
        if self.policy.network:
            try:
                started.slirp = Slirp(init_pid, lease.uid, preexec, timeout_s)
            except BaseException:
                kill_group(holder.pid)
                holder.wait()
                raise
        return started


def _read_child_pid(fd: int, holder: subprocess.Popen[bytes], timeout_s: float) -> int:
    """The host pid of the box's init, from bwrap's --info-fd JSON."""
    deadline = time.monotonic() + timeout_s
    data = b""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.05)
        if ready:
            chunk = os.read(fd, 4096)
            data += chunk
            try:
                return int(json.loads(data)["child-pid"])
            except (ValueError, KeyError):
                if chunk:
                    continue
        if holder.poll() is not None or (ready and not chunk):
            err = holder.stderr.read().decode(errors="replace") if holder.stderr else ""
            raise SandboxError(f"bwrap failed: {err.strip() or holder.returncode}")
    raise SandboxError(f"the sandbox did not start within {timeout_s:g}s")


def _wait_ready(holder: subprocess.Popen[bytes], timeout_s: float) -> None:
    """The holder prints a line once bwrap finished the box (id maps, mounts) and ran it."""
    assert holder.stdout is not None
    ready, _, _ = select.select([holder.stdout], [], [], timeout_s)
    if not ready or holder.stdout.readline() != b"ready\n":
        err = holder.stderr.read().decode(errors="replace") if holder.stderr and holder.poll() else ""
        raise SandboxError(f"the sandbox did not start: {err.strip() or 'no ready line'}")
