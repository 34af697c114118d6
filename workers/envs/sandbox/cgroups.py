"""Per-sandbox cgroup limits (pids, memory, CPU) where this host lets us create cgroups.

The cgroup is made below the one this process runs in, so it only ever tightens the limits the
host already puts on us. cgroup v2 (one unified hierarchy) and v1 (a hierarchy per controller)
are both handled; where neither is writable the sandbox runs with rlimits alone and says so.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

log = logging.getLogger(__name__)

ROOT = Path("/sys/fs/cgroup")
CFS_PERIOD_US = 100_000


class SandboxCgroup:
    """One cgroup (per hierarchy) for one sandbox. `paths` is empty where none could be made."""

    def __init__(self, name: str, *, pids: int, memory_mb: int, cpus: float) -> None:
        self.paths: list[Path] = []
        v2 = ROOT / "cgroup.controllers"
        if v2.exists():
            self._make(
                _own(""),
                name,
                {
                    "pids.max": pids,
                    "memory.max": memory_mb << 20,
                    "cpu.max": f"{int(cpus * CFS_PERIOD_US)} {CFS_PERIOD_US}",
                },
            )
        else:
            self._make(_own("pids"), name, {"pids.max": pids})
            self._make(_own("memory"), name, {"memory.limit_in_bytes": memory_mb << 20})
            self._make(_own("cpu"), name, {"cpu.cfs_quota_us": int(cpus * CFS_PERIOD_US)})

    def _make(self, parent: Path | None, name: str, limits: dict[str, object]) -> None:
        if parent is None:
            return
        path = parent / name
        try:
            path.mkdir(exist_ok=True)
            for key, value in limits.items():
                if (path / key).exists():
                    (path / key).write_text(str(value))
        except OSError as exc:
            log.info("no sandbox cgroup under %s: %s", parent, exc)
            return
        self.paths.append(path)

    def enter(self) -> None:
        """Move the calling process into the cgroups (call in the child before exec)."""
        pid = str(os.getpid())
        for path in self.paths:
            try:
                (path / "cgroup.procs").write_text(pid)
            except OSError:
                pass  # a limit we could not set; rlimits still apply

    def remove(self, timeout_s: float = 2.0) -> None:
        """Remove the cgroups; killed processes leave them a moment after SIGKILL, so retry."""
        deadline = time.monotonic() + timeout_s
        for path in self.paths:
            while True:
                try:
                    path.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError as exc:
                    if time.monotonic() > deadline:
                        log.warning("sandbox cgroup %s not removed: %s", path, exc)
                        break
                    time.sleep(0.01)
        self.paths = []


def remove_stale(prefix: str = "flywheel-sandbox-") -> list[Path]:
    """Remove the cgroups that boxes of a crashed process left below ours (named `prefix<uid>`),
    each while holding its uid's lease lock, so a box starting now is never touched; a cgroup that
    still holds a process is not empty and stays (rmdir refuses). Returns what was removed."""
    from workers.envs.sandbox.uids import held_if_free

    removed = []
    parents = (
        [_own("")] if (ROOT / "cgroup.controllers").exists() else [_own(c) for c in ("pids", "memory", "cpu")]
    )
    for parent in {p for p in parents if p is not None}:
        try:
            stale = [
                d for d in parent.iterdir() if d.name.startswith(prefix) and d.name[len(prefix) :].isdigit()
            ]
        except OSError:
            continue
        for path in stale:
            with held_if_free(int(path.name[len(prefix) :])) as free:
                if not free:
                    continue
                try:
                    path.rmdir()
                    removed.append(path)
                except OSError:
                    pass  # busy (a process still in it) or gone
    return removed


def _own(controller: str) -> Path | None:
    """The writable directory of this process's cgroup in `controller`'s hierarchy ('' = v2)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, names, rel = line.split(":", 2)
        if (controller == "" and names == "") or controller in names.split(","):
            base = ROOT if controller == "" else ROOT / controller
            path = base / rel.lstrip("/")
            return path if path.is_dir() and os.access(path, os.W_OK) else None
    return None
