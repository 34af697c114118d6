"""The no-action check (issue 22): set a task up in a real session and evaluate it with no action.

A task whose evaluator already scores more than 0 then "passes without action" (its checker reads
something the set-up or the desktop already provides) and must not be offered; a task whose set-up
fails cannot run here. An infeasible task (`"func": "infeasible"`, scored from the last action as
desktop_env's DesktopEnv.evaluate scores it) is also given up on in the same session (FAIL: our
call_user) and must then score 1, else it is "misscored". Plain Python; the store calls it for
imported tasks, `bench osworld` for a folder of OSWorld's task files.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from workers.actions.types import Action
from workers.envs import osworld
from workers.envs.base import EnvError

Verdict = Literal["ok", "passes_without_action", "setup_error", "unsupported", "misscored"]
GIVE_UP = Action("call_user")  # OSWorld's FAIL, the answer to an infeasible task


@dataclass(frozen=True)
class CheckOutcome:
    verdict: Verdict
    detail: str = ""
    score: float | None = None
    gave_up: float | None = None  # an infeasible task's score after FAIL (None for any other task)


def is_infeasible(task: dict[str, Any]) -> bool:
    return (task.get("evaluator") or {}).get("func") == osworld.INFEASIBLE


def no_action_check(
    task: dict[str, Any], bundle_dir: Path | None = None, display_range: tuple[int, int] = (300, 400)
) -> CheckOutcome:
    """Boot a desktop, run the task's set-up, evaluate with no action, close (nothing outlives it)."""
    problems = osworld.check_supported(task, "desktop", bundle_dir)
    if problems:
        return CheckOutcome("unsupported", "; ".join(problems))
    with _desktop(display_range) as env:
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
        if not is_infeasible(task):
            return CheckOutcome("ok", "", report.score)
        env.step(GIVE_UP)
        gave_up = float(env.evaluate())
        if gave_up != 1.0:
            return CheckOutcome(
                "misscored", f"giving up (FAIL) scores {gave_up:g}, not 1", report.score, gave_up
            )
        return CheckOutcome("ok", "", report.score, gave_up)


@contextmanager
def _desktop(display_range: tuple[int, int]) -> Iterator[Any]:
    """The desktop an annotator or a rollout gets (its default apps), without VNC, in a session
    directory of its own; closed and removed after (nothing outlives it)."""
    from workers.envs.desktop import DesktopConfig, DesktopEnv

    session = Path(tempfile.mkdtemp(prefix="flywheel-osworld-check-"))
    session.chmod(0o755)
    env = DesktopEnv(DesktopConfig(display_range=display_range, vnc=False, session_dir=session))
    try:
        yield env
    finally:
        env.close()
        shutil.rmtree(session, ignore_errors=True)


@dataclass(frozen=True)
class ReferenceOutcome:
    """The independent check of a task with a reference solution: its score with no action and
    after the solution, each on a fresh desktop. Correct: 0 with no action and 1 solved."""

    reference: str
    no_action: float | None = None
    solved: float | None = None
    detail: str = ""

    @property
    def correct(self) -> bool:
        return self.no_action == 0.0 and self.solved == 1.0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "correct": self.correct}


def reference_check(
    task: dict[str, Any],
    solve: Callable[[Any], None],
    reference: str,
    bundle_dir: Path | None = None,
    display_range: tuple[int, int] = (300, 400),
) -> ReferenceOutcome:
    """Score `task` twice, each time set up on a fresh desktop: evaluated with no action, and
    evaluated after `solve(env)` played its reference solution (`reference` names it). The
    evaluations wait as one at Finish does (workers.envs.osworld.settle). A set-up or evaluation
    error leaves that score None, with the error in `detail`."""
    problems = osworld.check_supported(task, "desktop", bundle_dir)
    if problems:
        return ReferenceOutcome(reference, detail="unsupported: " + "; ".join(problems))
    scores: dict[str, float | None] = {"no_action": None, "solved": None}
    errors: list[str] = []
    for name, play in (("no_action", None), ("solved", solve)):
        with _desktop(display_range) as env:
            try:
                env.reset(osworld.task_spec_from_json(task, kind="desktop", bundle_dir=bundle_dir))
                if play is not None:
                    play(env)
                scores[name] = float(env.evaluate())
            except EnvError as exc:
                errors.append(f"{name.replace('_', ' ')}: {exc}"[:300])
    return ReferenceOutcome(reference, scores["no_action"], scores["solved"], "; ".join(errors))
