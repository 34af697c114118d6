"""A host uid of its own for each live sandbox, leased with a lock file.

Sandboxed processes run as an unprivileged host uid that no other session shares: signals,
/proc and files of other sessions are out of reach by ordinary permissions even where the
namespaces would not stop them, and RLIMIT_NPROC (counted per real uid) bounds one session's
processes without counting anyone else's. The lease is an exclusive `flock` held for the
sandbox's lifetime; the kernel drops it when the holding process dies, so a crashed worker leaks
no uid. Whatever still runs under a uid is killed before it is handed out again.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

from workers.envs.base import EnvError

UID_BASE = 230_000
UID_COUNT = 4096
LOCK_DIR = (
    Path("/run/flywheel-sandbox-uids") if os.access("/run", os.W_OK) else Path("/tmp/flywheel-sandbox-uids")
)


class UidLease:
    """An exclusive host uid (also used as the gid) until `release()`."""

    def __init__(self) -> None:
        LOCK_DIR.mkdir(mode=0o700, exist_ok=True)
        start = (os.getpid() * 7919) % UID_COUNT  # spread concurrent hosts over the range
        for i in range(UID_COUNT):
            uid = UID_BASE + (start + i) % UID_COUNT
            fd = os.open(LOCK_DIR / str(uid), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            try:
                kill_uid(uid)  # leftovers of a holder that died without cleaning up
            except EnvError:
                os.close(fd)  # not this uid, then; its lock is free for a later try
                continue
            self.uid = uid
            self._fd = fd
            return
        raise EnvError(f"all {UID_COUNT} sandbox uids are in use")

    def release(self) -> None:
        if self._fd < 0:
            return
        kill_uid(self.uid)
        os.close(self._fd)
        self._fd = -1


@contextlib.contextmanager
def held_if_free(uid: int) -> Iterator[bool]:
    """Hold `uid`'s lease lock for the duration if no live sandbox holds it; yields whether it was
    free (for cleaning up what a box of that uid left behind without racing a new lease)."""
    try:
        fd = os.open(LOCK_DIR / str(uid), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError:
        yield False
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


def uid_pids(uid: int) -> list[int]:
    """Host pids of live (not zombie) processes whose real uid is `uid`.

    /proc/<pid> belongs to the process's uid (one stat per process, not a read of every status
    file: the host may run thousands); only the candidates' status is read."""
    pids = []
    with os.scandir("/proc") as entries:
        for entry in entries:
            if not entry.name.isdigit():
                continue
            try:
                if entry.stat(follow_symlinks=False).st_uid != uid:
                    continue
                fields = dict(
                    line.split(":", 1)
                    for line in Path(entry.path, "status").read_text().splitlines()
                    if ":" in line
                )
                if int(fields["Uid"].split()[0]) == uid and not fields["State"].strip().startswith("Z"):
                    pids.append(int(entry.name))
            except (OSError, ValueError, KeyError):
                continue  # exited while we looked
    return pids


def kill_uid(uid: int, timeout_s: float = 2.0, dying_timeout_s: float = 30.0) -> None:
    """SIGKILL every process of `uid` until none is left (a fork bomb needs a few rounds).

    A killed process may take a while to be gone: a box's init stays until the processes that joined
    its pid namespace (nsenter's children) are reaped by their parents outside it, which a loaded
    machine runs late. Such processes are dying (`_dying`), not surviving: they are waited for up to
    `dying_timeout_s`; a process that is still not dying after `timeout_s` survived SIGKILL."""
    start = time.monotonic()
    while pids := uid_pids(uid):
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        waited = time.monotonic() - start
        survivors = [pid for pid in pids if not _dying(pid)]
        if (survivors and waited > timeout_s) or waited > dying_timeout_s:
            raise EnvError(f"processes of sandbox uid {uid} survive SIGKILL: {(survivors or pids)[:10]}")
        time.sleep(0.01)


_PF_EXITING = 0x4
_SIGKILL_BIT = 1 << (signal.SIGKILL - 1)


def _dying(pid: int) -> bool:
    """Whether `pid` is on its way out: exiting (PF_EXITING in its flags), SIGKILL pending (it has not
    run since it was killed), or gone."""
    try:
        flags = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[6])
        status = Path(f"/proc/{pid}/status").read_text().splitlines()
    except (OSError, IndexError, ValueError):
        return True
    pending = [int(line.split()[1], 16) for line in status if line.startswith(("SigPnd:", "ShdPnd:"))]
    return bool(flags & _PF_EXITING) or any(mask & _SIGKILL_BIT for mask in pending)
