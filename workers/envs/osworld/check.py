"""The no-action check (issue 22): set a task up in a real session and evaluate it with no action.

A task whose evaluator already scores more than 0 then "passes without action" (its checker reads
something the set-up or the desktop already provides) and must not be offered; a task whose set-up
fails cannot run here. Plain Python; the store calls it for imported tasks, `bench osworld` for a
folder of OSWorld's task files.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from workers.envs import osworld
from workers.envs.base import EnvError

Verdict = Literal["ok", "passes_without_action", "setup_error", "unsupported"]


@dataclass(frozen=True)
class CheckOutcome:
    verdict: Verdict
    detail: str = ""
    score: float | None = None


def no_action_check(
    task: dict[str, Any], bundle_dir: Path | None = None, display_range: tuple[int, int] = (300, 400)
) -> CheckOutcome:
    """Boot a desktop, run the task's set-up, evaluate with no action, close (nothing outlives it)."""
    from workers.envs.desktop import DesktopConfig, DesktopEnv

    problems = osworld.check_supported(task, "desktop", bundle_dir)
    if problems:
        return CheckOutcome("unsupported", "; ".join(problems))
    session = Path(tempfile.mkdtemp(prefix="flywheel-osworld-check-"))
    session.chmod(0o755)
    # The desktop an annotator or a rollout gets (its default apps), without VNC.
    env = DesktopEnv(DesktopConfig(display_range=display_range, vnc=False, session_dir=session))
    try:
        try:
            env.reset(osworld.task_spec_from_json(task, kind="desktop", bundle_dir=bundle_dir))
        except EnvError as exc:
            return CheckOutcome("setup_error", f"set-up failed: {exc}")
        try:  # after the same waits as an evaluation at Finish (workers.envs.osworld.settle)
            report = osworld.evaluate_report(task["evaluator"], env, bundle_dir)
        except EnvError as exc:
            return CheckOutcome("setup_error", f"evaluation failed: {exc}")
        if report.score > 0.0:
            return CheckOutcome(
                "passes_without_action", f"scores {report.score:g} with no action", report.score
            )
        return CheckOutcome("ok", "", report.score)
    finally:
        env.close()
        shutil.rmtree(session, ignore_errors=True)
