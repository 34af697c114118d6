"""MiniWoB++ tasks from the `miniwob` wheel (every `miniwob/html/miniwob/*.html`) → task records.

The page generates the instruction per episode (`core.getUtterance()`), so the stored instruction
is a readable placeholder. `setup["task"]` is what `workers.envs.browser.miniwob` resolves; the
`setup["miniwob"]` block keeps the source-specific settings in one place. The verifier is the
page's own reward (`WOB_RAW_REWARD_GLOBAL`), so `verifier` stays empty.
"""

from __future__ import annotations

import importlib.util
from functools import cache
from pathlib import Path

from webapp.store.importers.types import ImportIssue, TaskRecord

MINIWOB_ORIGIN = "miniwob"


@cache
def miniwob_task_names() -> tuple[str, ...]:
    """Every task name the installed wheel ships, sorted. Found without importing the package."""
    spec = importlib.util.find_spec("miniwob")
    if spec is None or not spec.submodule_search_locations:
        return ()
    folder = Path(next(iter(spec.submodule_search_locations))) / "html" / "miniwob"
    return tuple(sorted(p.stem for p in folder.glob("*.html")))


def miniwob_instruction(name: str) -> str:
    return f"MiniWoB++ task {name} (instruction generated per episode)"


def miniwob_records(names: list[str] | None = None) -> tuple[list[TaskRecord], list[ImportIssue]]:
    """Records for `names` (every wheel task when None or empty); unknown names are issues."""
    available = miniwob_task_names()
    if not available:
        return [], [ImportIssue(MINIWOB_ORIGIN, "", "the miniwob package is not installed")]
    wanted = list(dict.fromkeys(n.strip().removesuffix(".html") for n in names or [] if n.strip())) or list(
        available
    )
    known = set(available)
    issues = [
        ImportIssue(
            MINIWOB_ORIGIN, "task", f"unknown MiniWoB++ task {name!r} (the wheel has {len(available)} tasks)"
        )
        for name in wanted
        if name not in known
    ]
    if issues:
        return [], issues
    records = [
        TaskRecord(
            origin=f"{MINIWOB_ORIGIN}:{name}",
            external_id=name,
            instruction=miniwob_instruction(name),
            env_kind="browser",
            source="miniwob",
            setup={"task": name, "miniwob": {"task": name}},
            tags=["miniwob"],
        )
        for name in wanted
    ]
    return records, []
