"""Filling the local mirror of OSWorld's task files (`manage.py osworld_mirror`, docs/osworld.md).

OSWorld's tasks download their documents, images and expected files from the web at set-up and
evaluation time; sessions have no network, so an admin fetches them once, on a machine that has
network, into OSWORLD_MIRROR_DIR (`<host>/<path>[?query]`, the layout `files.local_copy` reads).
What is fetched is exactly the files the tasks name: `download` steps (set-up and postconfig) and
`cloud_file` getters. Web pages a task opens in the browser (`chrome_open_tabs`) are live sites,
not files, and are not mirrored.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workers.envs.osworld.common import _as_list
from workers.envs.osworld.files import mirror_relative

MAX_FILE_BYTES = 512 * 1024 * 1024


def task_urls(task: dict[str, Any]) -> list[str]:
    """The web files one task downloads (set-up, postconfig, cloud_file getters), in order."""
    evaluator = evaluator if isinstance(evaluator := task.get("evaluator"), dict) else {}
    steps = [*(task.get("config") or []), *(evaluator.get("postconfig") or [])]
    urls: list[str] = []
    for step in steps:
        if isinstance(step, dict) and step.get("type") == "download":
            params = step.get("parameters") or {}
            for item in params.get("files") or [] if isinstance(params, dict) else []:
                if isinstance(item, dict):
                    urls.append(str(item.get("url", "")))
    for getter in [*_as_list(evaluator.get("result")), *_as_list(evaluator.get("expected"))]:
        if isinstance(getter, dict) and getter.get("type") == "cloud_file":
            urls.extend(str(u) for u in _as_list(getter.get("path")))
    return [u for u in dict.fromkeys(urls) if mirror_relative(u) is not None]


def examples_urls(folder: Path) -> list[str]:
    """Every mirrorable URL of the task files under `folder` (OSWorld's evaluation_examples)."""
    urls: list[str] = []
    for path in sorted(folder.rglob("*.json")):
        try:
            task = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(task, dict):
            urls.extend(task_urls(task))
    return list(dict.fromkeys(urls))


@dataclass
class MirrorReport:
    present: int = 0
    fetched: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)


def fill_mirror(
    urls: Iterable[str], dest: Path, fetch: Callable[[str], Iterable[bytes]] | None = None
) -> MirrorReport:
    """Fetch each URL missing from `dest` into its mirror path; what is there already is kept.
    A file is written under a temporary name and renamed when whole, so a failed fetch leaves
    nothing behind. `fetch` (url -> chunks) defaults to HTTP with `requests`."""
    fetch = fetch or _http_chunks
    report = MirrorReport()
    root = dest.resolve()
    for url in urls:
        relative = mirror_relative(url)
        if relative is None:
            report.failed.append((url, "not an http(s) file URL"))
            continue
        target = (root / relative).resolve()
        if not target.is_relative_to(root):
            report.failed.append((url, "its path leaves the mirror"))
            continue
        if target.is_file():
            report.present += 1
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".part-")
        try:
            size = 0
            with os.fdopen(fd, "wb") as out:
                for chunk in fetch(url):
                    size += len(chunk)
                    if size > MAX_FILE_BYTES:
                        raise ValueError(f"larger than {MAX_FILE_BYTES} bytes")
                    out.write(chunk)
            os.chmod(tmp, 0o644)
            os.replace(tmp, target)
            report.fetched += 1
        except Exception as exc:  # one bad URL must not stop the others; each is reported
            Path(tmp).unlink(missing_ok=True)
            report.failed.append((url, str(exc)[:200] or type(exc).__name__))
    return report


def _http_chunks(url: str) -> Iterable[bytes]:
    import requests

    with requests.get(url, stream=True, timeout=60, allow_redirects=True) as response:
        response.raise_for_status()
        yield from response.iter_content(chunk_size=1 << 16)
