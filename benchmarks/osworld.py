"""`bench osworld [--quick] --examples DIR`: OSWorld's own task files (a folder the user points at,
read at run time, never stored in the repository) through the importer, the support check and the
no-action check; and our own tasks with scripted solutions, set up / evaluate / solve / evaluate.

Per domain: files, imported, supported, passes-without-action and set-up errors (over the supported
tasks the no-action check ran on: all of them, or the first `checks_per_domain` (2) per domain with
--quick), and OSWorld's infeasible tasks among them (imported, supported, and those whose check
scored 0 with no action and 1 after giving up, FAIL: `infeasible_correct`; `misscored` otherwise). Figures: supported_share over the goal domains (os, chrome, libreoffice_*, gimp, vlc,
thunderbird, multi_apps, vs_code), windows_variants_skipped (files under a Windows/ folder: not
Linux tasks, not counted), passes_without_action (count), correct_share over the solved tasks this host can run
(those it cannot, e.g. for want of an application, are listed under solved_skipped). The settings are
`benchmarks.harness.platform_config.OsworldBenchConfig`.
"""

from __future__ import annotations

import collections
import contextlib
import re
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from benchmarks.harness.platform_config import OsworldBenchConfig


def run_osworld(quick: bool, examples: str | None = None) -> dict[str, Any]:
    config = OsworldBenchConfig.for_run(quick)
    # desktop-env's getters and metrics print what they read; the bench's stdout is its JSON.
    with contextlib.redirect_stdout(sys.stderr):
        return {**_run_osworld(config, examples), "config": asdict(config)}


def _run_osworld(config: OsworldBenchConfig, examples: str | None) -> dict[str, Any]:
    from webapp.store.importers.osworld import osworld_task_json, parse_osworld
    from webapp.store.importers.services import windows_variant
    from webapp.store.importers.types import SourceFile
    from workers.envs import osworld
    from workers.envs.osworld.check import is_infeasible, no_action_check
    from workers.envs.osworld.files import assuming_mirrored

    if not examples:
        raise ValueError("bench osworld needs --examples DIR (OSWorld's evaluation_examples folder)")
    root = Path(examples)
    folder = root / "examples" if (root / "examples").is_dir() else root
    domains: dict[str, dict[str, Any]] = {}
    reasons: collections.Counter[str] = collections.Counter()
    mirrored_reasons: collections.Counter[str] = collections.Counter()
    passing: list[str] = []
    misscored: list[str] = []
    t0 = time.monotonic()
    for domain in config.goal_domains:
        files = sorted((folder / domain).glob("*.json")) if (folder / domain).is_dir() else []
        row: dict[str, Any] = {"files": len(files), "imported": 0, "supported": 0, "checked": 0}
        row.update({"supported_if_mirrored": 0, "passes_without_action": 0, "setup_errors": 0})
        row.update({"infeasible": 0, "infeasible_supported": 0, "infeasible_correct": 0, "misscored": 0})
        checks = 0
        domain_reasons: collections.Counter[str] = collections.Counter()
        for path in files:
            records, _issues = parse_osworld(SourceFile(str(path), path.read_bytes()))
            for record in records:
                row["imported"] += 1
                infeasible = is_infeasible(_as_task_json(record, osworld_task_json))
                row["infeasible"] += infeasible
                if not record.supported:
                    reasons.update(_reason_kind(r) for r in record.unsupported_reasons)
                    domain_reasons.update({_reason_kind(r) for r in record.unsupported_reasons})
                    with assuming_mirrored():
                        left = osworld.check_supported(_as_task_json(record, osworld_task_json), "desktop")
                    row["supported_if_mirrored"] += not left
                    mirrored_reasons.update(_reason_kind(r) for r in left)
                    continue
                row["supported"] += 1
                row["supported_if_mirrored"] += 1
                row["infeasible_supported"] += infeasible
                if config.checks_per_domain is not None and checks >= config.checks_per_domain:
                    continue
                checks += 1
                task = _as_task_json(record, osworld_task_json)
                outcome = no_action_check(task)
                row["checked"] += 1
                # progress on stderr (the JSON comes last on stdout): a full run takes long
                print(
                    f"{domain}/{record.external_id}: {outcome.verdict} {outcome.detail[:160]}",
                    file=sys.stderr,
                )
                if outcome.verdict == "passes_without_action":
                    row["passes_without_action"] += 1
                    passing.append(record.external_id)
                elif outcome.verdict in {"setup_error", "unsupported"}:
                    row["setup_errors"] += 1
                    reasons.update([f"setup: {outcome.detail[:80]}"])
                elif outcome.verdict == "misscored":
                    row["misscored"] += 1
                    misscored.append(record.external_id)
                row["infeasible_correct"] += outcome.verdict == "ok" and outcome.gave_up == 1.0
        # why this domain's tasks are unsupported: (reason, tasks it applies to), most frequent first
        row["unsupported_reasons"] = domain_reasons.most_common(4)
        domains[domain] = row
    # OSWorld's Windows variants (same ids as the Linux tasks): skipped, and counted apart
    windows = [p for p in sorted(root.rglob("*.json")) if windows_variant(p.relative_to(root).as_posix())]
    total = sum(r["imported"] for r in domains.values())
    supported = sum(r["supported"] for r in domains.values())
    mirrored = sum(r["supported_if_mirrored"] for r in domains.values())
    solved = _solved_tasks(osworld, config.display_range)
    return {
        "examples": str(folder),
        "mode": "quick" if config.quick else "full",
        "domains": domains,
        "imported": total,
        "windows_variants_skipped": len(windows),
        "supported": supported,
        "supported_share": round(supported / total, 4) if total else 0.0,
        # what would run once `manage.py osworld_mirror` filled OSWORLD_MIRROR_DIR (files only;
        # the no-action check runs only on what is supported now)
        "supported_if_mirrored": mirrored,
        "supported_if_mirrored_share": round(mirrored / total, 4) if total else 0.0,
        "passes_without_action": sum(r["passes_without_action"] for r in domains.values()),
        "passes_without_action_ids": passing,
        "setup_errors": sum(r["setup_errors"] for r in domains.values()),
        # OSWorld's infeasible tasks: 0 with no action, 1 after giving up (FAIL), as it scores them
        "infeasible": sum(r["infeasible"] for r in domains.values()),
        "infeasible_supported": sum(r["infeasible_supported"] for r in domains.values()),
        "infeasible_correct": sum(r["infeasible_correct"] for r in domains.values()),
        "misscored_ids": misscored,
        "top_unsupported_reasons": reasons.most_common(12),
        "top_reasons_if_mirrored": mirrored_reasons.most_common(12),
        # a task this host cannot run (its application is not installed) is listed apart, not scored
        "solved_tasks": [s for s in solved if "skipped" not in s],
        "solved_skipped": [s for s in solved if "skipped" in s],
        "correct_share": _correct_share([s for s in solved if "skipped" not in s]),
        "seconds": round(time.monotonic() - t0, 1),
    }


def _correct_share(ran: list[dict[str, Any]]) -> float:
    return round(sum(s["correct"] for s in ran) / len(ran), 4) if ran else 0.0


def _as_task_json(record: Any, to_json: Any) -> dict[str, Any]:
    class _Row:  # the importer's inverse reads a Task's fields
        external_id = record.external_id
        instruction = record.instruction
        setup = record.setup
        verifier = record.verifier

    return to_json(_Row)


def _reason_kind(reason: str) -> str:
    """Group reasons ('needs the network', a metric's missing package, …) for the summary."""
    reason = re.sub(r"^(post)?config\[\d+\]: ", "", reason)
    if "opens the web page" in reason:
        return "chrome tab of a web page needs the network"
    for key in (
        "needs the network",
        "Windows VM path",
        "not installed here",
        "is not supported",
        "not one of",
    ):
        if key in reason:
            head = reason.split(":")[0] if key == "needs the network" else reason
            return head[:90] if key != "needs the network" else "download/cloud_file needs the network"
    return reason[:90]


def _solved_tasks(osworld: Any, display_range: tuple[int, int]) -> list[dict[str, Any]]:
    """The independent check (workers.envs.osworld.check.reference_check) of our own tasks with
    scripted solutions, each on fresh desktops: 0 with no action, 1 solved; then the tasks solved by
    hand whose check `manage.py osworld_check` recorded in the store (`Task.reference_check`)."""
    from workers.envs.osworld import solutions
    from workers.envs.osworld.check import reference_check

    out: list[dict[str, Any]] = []
    for task_id in solutions.SOLUTIONS:
        task = solutions.load(task_id)
        with tempfile.TemporaryDirectory(prefix="flywheel-osworld-bench-") as tmp:
            bundle = Path(tmp) / "bundle"
            bundle.mkdir()
            Path(tmp).chmod(0o755)
            solutions.BUNDLES[task_id](bundle)
            problems = osworld.check_supported(task, "desktop", bundle)
            if problems:  # e.g. VLC or GIMP not installed on this host: nothing to score here
                out.append({"id": task_id, "skipped": "; ".join(problems)})
                continue
            outcome = reference_check(task, _scripted(solutions, task_id), "scripted", bundle, display_range)
        out.append({"id": task_id, **outcome.to_dict()})
    return out + _hand_solved()


def _scripted(solutions: Any, task_id: str) -> Callable[[Any], None]:
    """Plays our own task's scripted solution on a reset environment."""
    return lambda env: solutions.solve(env, task_id)


def _hand_solved() -> list[dict[str, Any]]:
    """The recorded independent checks of tasks solved by hand (their reference a reviewed trajectory;
    not our scripted tasks, checked above, nor infeasible ones given up on, counted per domain)."""
    from webapp.store.models import Task

    rows = Task.objects.filter(source="osworld", reference_check__reference__startswith="trajectory")
    rows = rows.order_by("pk")
    return [
        {"id": t.external_id, "pool": t.pool.name, **t.reference_check} for t in rows.select_related("pool")
    ]
