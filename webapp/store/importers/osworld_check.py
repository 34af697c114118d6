"""The no-action check for imported OSWorld tasks (issue 22): each enabled, supported task is set up
on a real desktop and evaluated with no action (`workers.envs.osworld.check`). One that already
scores more than 0 is disabled as "passes without action" (so is one whose episode later scores
more than 0 with no action: `store.services.trajectory_finish`); one whose set-up fails is disabled with the
error. Both are marked unsupported with the reason, so they cannot be enabled by mistake; importing
the task again (after fixing its files or the host) clears the mark and the check can run again.

The independent check (`osworld_reference_check`, `manage.py osworld_check`) scores each enabled,
supported OSWorld task that has a reference solution twice, on fresh desktops: with no action (must
be 0) and after the solution (must be 1). The reference is the project's scripted solution of its
own tasks (`workers.envs.osworld.solutions`) or, for a task solved by hand, its latest approved
annotation trajectory, replayed from its stored actions; an infeasible task without either is
solved, as OSWorld scores it, by giving up (FAIL). Both scores are recorded on the task
(`Task.reference_check`); one that scores more than 0 with no action is disabled as above.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.db import transaction
from django.utils import timezone

from webapp.store.importers.osworld import osworld_task_json
from webapp.store.models import (
    ReviewState,
    Task,
    Trajectory,
    TrajectorySource,
    TrajectoryStatus,
)
from webapp.store.replay import replay_steps
from webapp.store.services import task_disable

GIVE_UP_REFERENCE = "give up (FAIL)"  # the reference solution of an infeasible task


@dataclass(frozen=True)
class TaskCheck:
    task_id: int
    external_id: str
    verdict: str
    detail: str


def osworld_tasks_check(*, task_ids: Iterable[int]) -> list[TaskCheck]:
    """Run the no-action check on the enabled, supported OSWorld tasks among `task_ids`."""
    from workers.envs.osworld.check import no_action_check

    checks: list[TaskCheck] = []
    tasks = Task.objects.filter(pk__in=list(task_ids), source="osworld", enabled=True, supported=True)
    for task in tasks.order_by("pk"):
        bundle = task.setup.get("bundle_dir")
        outcome = no_action_check(
            osworld_task_json(task), Path(bundle) if isinstance(bundle, str) and bundle else None
        )
        checks.append(TaskCheck(task.pk, task.external_id, outcome.verdict, outcome.detail))
        if outcome.verdict == "ok":
            continue
        reason = (
            f"passes without action: the evaluator {outcome.detail} (the no-action check)"
            if outcome.verdict == "passes_without_action"
            else outcome.detail
        )
        with transaction.atomic():
            task_disable(task_id=task.pk, reason=reason)
    return checks


def osworld_reference_check(*, task_ids: Iterable[int]) -> list[dict[str, Any]]:
    """The independent check (module docstring) of the enabled, supported OSWorld tasks among
    `task_ids` that have a reference solution; one record per task checked, also stored on it."""
    from workers.envs.osworld.check import reference_check

    records: list[dict[str, Any]] = []
    tasks = Task.objects.filter(pk__in=list(task_ids), source="osworld", enabled=True, supported=True)
    for task in tasks.select_related("pool").order_by("pk"):
        found = reference_solution(task)
        if found is None:
            continue
        reference, solve = found
        bundle = task.setup.get("bundle_dir")
        outcome = reference_check(
            osworld_task_json(task),
            solve,
            reference,
            Path(bundle) if isinstance(bundle, str) and bundle else None,
        )
        record = {**outcome.to_dict(), "checked_at": timezone.now().isoformat()}
        with transaction.atomic():
            Task.objects.filter(pk=task.pk).update(reference_check=record, updated_at=timezone.now())
            if outcome.no_action is not None and outcome.no_action > 0:
                task_disable(
                    task_id=task.pk,
                    reason=f"passes without action: the evaluator scores {outcome.no_action:g} with no action "
                    f"(the independent check, {reference})",
                )
        records.append({"task": task.pk, "id": task.external_id, "pool": task.pool.name, **record})
    return records


def reference_solution(task: Task) -> tuple[str, Callable[[Any], None]] | None:
    """(what it is, a function that plays it on a reset environment) for `task`, or None: the
    project's scripted solution of its own task, else its latest approved annotation trajectory
    with stored actions, else for an infeasible task giving up (OSWorld's FAIL)."""
    from workers.envs.osworld import solutions
    from workers.envs.osworld.check import GIVE_UP, is_infeasible
    from workers.envs.replay import env_step, play_steps

    if task.external_id in solutions.SOLUTIONS:
        return "scripted", lambda env: solutions.solve(env, task.external_id)
    approved = (
        Trajectory.objects.filter(
            task=task,
            source=TrajectorySource.ANNOTATION,
            status=TrajectoryStatus.COMPLETED,
            review_state=ReviewState.APPROVED,
            num_steps__gt=0,
        )
        .order_by("-finished_at", "-pk")
        .first()
    )
    if approved is None:
        if is_infeasible(osworld_task_json(task)):
            return GIVE_UP_REFERENCE, lambda env: env.step(GIVE_UP)
        return None
    steps = replay_steps(approved)

    def play(env: Any) -> None:
        play_steps(env_step(env), steps)

    return f"trajectory {approved.pk}", play
