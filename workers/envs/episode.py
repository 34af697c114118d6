"""What re-creates an episode besides its task and seed: the environment's kind, the versions of the
components that decide its course, and its start state. The env host reports them at every reset
(`episode_env`), the store keeps them with the trajectory (`metadata.episode.env`) and the replay
check (workers.envs.replay) compares them with a fresh environment's."""

from __future__ import annotations

import hashlib
import importlib.metadata
import shutil
import subprocess
from functools import lru_cache
from pathlib import Path
from typing import Any

from workers.envs.base import Environment, Observation, TaskSpec

# Per kind: the Debian packages and Python distributions whose versions decide what an episode does
# (the display server and apps a desktop runs, the browser a page runs in, the evaluators' library).
_COMPONENTS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "desktop": (("xvfb", "openbox", "xterm", "chromium", "libreoffice-core"), ("desktop-env",)),
    "terminal": (("bash",), ("desktop-env",)),
    "browser": (("chromium",), ("playwright", "miniwob")),
    "game": (("chromium",), ("playwright",)),
    "phone": (("chromium",), ("playwright",)),
}


@lru_cache(maxsize=8)
def env_version(kind: str) -> dict[str, str]:
    """{component: version} of the installed components of `kind` (missing ones left out), read once
    per process; {} for a kind this module does not know."""
    debs, dists = _COMPONENTS.get(kind, ((), ()))
    out = _deb_versions(debs)
    for dist in dists:
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return dict(sorted(out.items()))


def _deb_versions(packages: tuple[str, ...]) -> dict[str, str]:
    if not packages or shutil.which("dpkg-query") is None:
        return {}
    result = subprocess.run(
        ["dpkg-query", "-W", "-f", "${Package}\t${db:Status-Abbrev}\t${Version}\n", *packages],
        capture_output=True, text=True, timeout=10, check=False,
    )  # fmt: skip
    out: dict[str, str] = {}
    for line in result.stdout.splitlines():
        name, status, version = [*line.split("\t"), "", ""][:3]
        if status.startswith("ii") and version:
            out[name] = version
    return out


def start_state(env: Environment, task: TaskSpec, obs: Observation) -> dict[str, Any]:
    """The start state the task re-creates, as far as it is not in the task itself: the screen size,
    the apps the desktop launched, and a digest of the task's own files (OSWorld bundles)."""
    out: dict[str, Any] = {"screen": [obs.width, obs.height]}
    apps = getattr(env, "started_apps", None)
    if apps is not None:
        out["apps"] = list(apps)
    bundle = task.setup.get("bundle_dir")
    if isinstance(bundle, str) and bundle:
        out["files_sha256"] = files_digest(Path(bundle))
    return out


def episode_env(env: Environment, task: TaskSpec, obs: Observation) -> dict[str, Any]:
    """{kind, version, start} of an environment just reset for `task` (its first observation `obs`)."""
    return {"kind": env.kind, "version": env_version(env.kind), "start": start_state(env, task, obs)}


def files_digest(root: Path) -> str | None:
    """sha256 over the relative path and content digest of every regular file under `root`, in
    sorted order; None when `root` is not a directory. Each file's digest is cached by its size and
    modification time, so a reset re-reads only changed files."""
    if not root.is_dir():
        return None
    outer = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink()):
        st = path.stat()
        rel = path.relative_to(root).as_posix()
        outer.update(f"{rel}\0{_file_sha256(str(path), st.st_size, st.st_mtime_ns)}\n".encode())
    return outer.hexdigest()


@lru_cache(maxsize=4096)
def _file_sha256(path: str, size: int, mtime_ns: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def env_differences(recorded: dict[str, Any] | None, now: dict[str, Any]) -> list[str]:
    """What differs between the environment an episode ran in and a fresh one, in words ([] when
    nothing recorded differs; a trajectory recorded before these were kept has nothing to compare)."""
    if not isinstance(recorded, dict):
        return []
    out: list[str] = []
    then_v, now_v = recorded.get("version") or {}, now.get("version") or {}
    for name in sorted(set(then_v) | set(now_v)):
        if then_v.get(name) != now_v.get(name):
            out.append(f"{name} {then_v.get(name, 'absent')} → {now_v.get(name, 'absent')}")
    then_s, now_s = recorded.get("start") or {}, now.get("start") or {}
    for name in sorted(set(then_s) | set(now_s)):
        if then_s.get(name) != now_s.get(name):
            out.append(f"start {name} {then_s.get(name)} → {now_s.get(name)}")
    return out
