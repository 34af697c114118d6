"""A size-capped home for every session: a tmpfs over the session directory while its box lives.

A session's home used to be a plain directory of the host's file system, so one session could fill
the disk that PostgreSQL and media share. `SandboxPolicy.disk_mb` caps it: `mount_home` mounts a
tmpfs of that size (and a proportional number of inodes) over the directory, with what the directory
held copied in, and `unmount_home` detaches it when the box closes (its contents go with it). A write
past the cap fails with ENOSPC inside the session and costs the host's disk nothing.

Why tmpfs rather than a loop-mounted image or filesystem quotas: it needs neither loop devices nor a
quota-enabled file system, and nothing a session wrote outlives it on disk. Its pages are memory —
charged to the box's memory cgroup when the box writes them, and swappable — so the cap also bounds
what a full home takes from RAM, within the box's own memory limit.

The mount's source names the box's uid (`flywheel-home-<uid>`): what a crashed process left mounted
is detached by the next box that starts (`unmount_stale`).
"""

from __future__ import annotations

import ctypes
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from workers.envs.base import EnvError

DEFAULT_DISK_MB = 1024
MIN_DISK_MB = 16
MAX_DISK_MB = 1 << 20
INODES_PER_MB = 256  # one per 4 KiB on average: a home of small files fills its bytes first
SOURCE_PREFIX = "flywheel-home-"
FULL_BELOW_BYTES = 1 << 20  # `disk_full` once less than this is left

_MS_NOSUID = 2
_MS_NODEV = 4
_MNT_DETACH = 2
_libc = ctypes.CDLL(None, use_errno=True)


def disk_mb_of(setup: Mapping[str, Any], default: int) -> int:
    """The home's cap a task asks for (`setup["disk_mb"]`, which the task's pool sets), or `default`."""
    value = setup.get("disk_mb", default)
    if isinstance(value, bool) or not isinstance(value, int) or not MIN_DISK_MB <= value <= MAX_DISK_MB:
        raise EnvError(f"setup.disk_mb must be an integer in {MIN_DISK_MB}..{MAX_DISK_MB}, got {value!r}")
    return value


def mount_home(home: Path, disk_mb: int, uid: int) -> None:
    """Mount a tmpfs of `disk_mb` MiB owned by `uid` over `home`, with `home`'s contents copied in."""
    under = os.open(home, os.O_RDONLY | os.O_DIRECTORY)  # still the directory below, once mounted
    try:
        options = f"size={disk_mb}m,nr_inodes={disk_mb * INODES_PER_MB},mode=0700,uid={uid},gid={uid}"
        _mount(f"{SOURCE_PREFIX}{uid}", home, "tmpfs", _MS_NOSUID | _MS_NODEV, options)
        try:
            if os.listdir(under):
                shutil.copytree(f"/proc/self/fd/{under}", home, symlinks=True, dirs_exist_ok=True)
        except (OSError, shutil.Error) as exc:
            unmount_home(home)
            raise EnvError(f"the session directory {home} does not fit in its {disk_mb} MiB: {exc}") from exc
    finally:
        os.close(under)


def unmount_home(home: Path) -> None:
    if _libc.umount2(str(home).encode(), _MNT_DETACH) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), str(home))


def unmount_stale() -> list[Path]:
    """Detach the home tmpfs that boxes of a crashed process left mounted, each while holding its
    uid's lease lock, so a box starting now is never touched. Returns the mount points."""
    from workers.envs.sandbox.uids import held_if_free

    detached = []
    for source, target in _home_mounts():
        with held_if_free(int(source[len(SOURCE_PREFIX) :])) as free:
            if not free:
                continue
            try:
                unmount_home(target)
                detached.append(target)
            except OSError:
                pass  # gone meanwhile
    return detached


def home_full(home: Path) -> bool:
    """Whether the session's home has (almost) no room left."""
    try:
        stat = os.statvfs(home)
    except OSError:
        return False
    return stat.f_bavail * stat.f_frsize < FULL_BELOW_BYTES or (stat.f_files > 0 and stat.f_favail == 0)


def disk_full_notice(disk_mb: int) -> str:
    """What a session's step reports (`info["disk_full"]`) once its home is full."""
    return (
        f"The session's home is full ({disk_mb} MiB, the limit of this task pool): writing more fails "
        "with 'No space left on device'. Delete files to make room."
    )


def _mount(source: str, target: Path, fstype: str, flags: int, data: str) -> None:
    if _libc.mount(source.encode(), str(target).encode(), fstype.encode(), flags, data.encode()) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), str(target))


def _home_mounts() -> list[tuple[str, Path]]:
    """(source, mount point) of every home tmpfs in this mount namespace (/proc/self/mountinfo)."""
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields, _, tail = line.partition(" - ")
        parts, rest = fields.split(), tail.split()
        if len(parts) > 4 and len(rest) > 1 and rest[0] == "tmpfs" and rest[1].startswith(SOURCE_PREFIX):
            if rest[1][len(SOURCE_PREFIX) :].isdigit():
                found.append((rest[1], Path(_unescape(parts[4]))))
    return found


def _unescape(path: str) -> str:
    """mountinfo writes space, tab, newline and backslash in paths as octal escapes (\\040 ...)."""
    out, i = [], 0
    while i < len(path):
        if path[i] == "\\" and path[i + 1 : i + 4].isdigit():
            out.append(chr(int(path[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(path[i])
            i += 1
    return "".join(out)
