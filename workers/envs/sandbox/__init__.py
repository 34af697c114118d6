"""The one sandbox every environment session runs in (SPEC §3 "Isolation").

A session's `Sandbox` is a bubblewrap box: new user, mount, pid, ipc, uts, network and cgroup
namespaces; a host uid of its own (`uids.UidLease`, unprivileged, never shared while the box
lives) that is uid 1000 "user" inside; a root file system of read-only /usr, a short list of /etc
entries, a private /proc, /dev, /tmp and /dev/shm, and the session directory as /home/session
(alias /home/user). The project tree, var/, /etc/shadow, the host's sockets and other sessions do
not exist in that view. The network namespace holds only its own loopback, so the host's
127.0.0.1 services (Redis, PostgreSQL, the web app) are unreachable. A task that asks for the
network gets egress through slirp4netns, filtered on the host so that no address of the host and no
private range is reachable (`egress`); where this host cannot filter it, the task is refused with
the reason (`box.NETWORK_REFUSED`). Limits: RLIMIT_NPROC on the box's uid and, where the
host lets us make cgroups, pids / memory / CPU limits (`cgroups.SandboxCgroup`); per command
`run.Limits` (wall time, output, CPU time, file size, address space); the home is a tmpfs of
`SandboxPolicy.disk_mb` over the session directory while the box lives (`home`).

Everything a session starts runs in its box: the desktop's window manager and apps (so whatever a
menu, dialog or terminal opens stays inside), OSWorld set-up steps and evaluator commands, the
terminal's commands. `Sandbox.close()` ends all of it (the init exits, the kernel kills the pid
namespace, leftovers of the uid are killed).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from workers.envs.sandbox.box import NETWORK_REFUSED, Sandbox, SandboxError, SandboxPolicy
from workers.envs.sandbox.run import SANDBOX_HOME, CommandResult, Limits

__all__ = [
    "NETWORK_REFUSED",
    "SANDBOX_HOME",
    "CommandResult",
    "Limits",
    "Sandbox",
    "SandboxError",
    "SandboxPolicy",
    "sandbox_available",
]


@lru_cache(maxsize=1)
def sandbox_available() -> bool:
    """Whether boxes can be made here (bwrap with user namespaces, and root to pick box uids and to
    mount the homes' tmpfs)."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="flywheel-sandbox-probe-") as tmp:
        box = Sandbox(Path(tmp))
        try:
            box.start()
            return box.run("true").ok
        except (SandboxError, OSError):
            return False
        finally:
            box.close()
