"""The no-action check for imported OSWorld tasks (issue 22): each enabled, supported task is set up
on a real desktop and evaluated with no action (`workers.envs.osworld.check`). One that already
scores more than 0 is disabled as "passes without action" (so is one whose episode later scores
more than 0 with no action: `store.services.trajectory_finish`); one whose set-up fails is disabled with the
error. Both are marked unsupported with the reason, so they cannot be enabled by mistake; importing
the task again (after fixing its files or the host) clears the mark and the check can run again.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from django.db import transaction

from webapp.store.importers.osworld import osworld_task_json
from webapp.store.models import Task
from webapp.store.services import task_disable


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


def osworld_checks_queue(*, task_ids: Iterable[int]) -> int:
    """Queue the no-action check (Celery, one message per task) for the enabled, supported OSWorld
    tasks among `task_ids`, after the current transaction commits; returns how many were queued."""
    from webapp.store.tasks import osworld_task_check

    ids = list(
        Task.objects.filter(pk__in=list(task_ids), source="osworld", enabled=True, supported=True)
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    transaction.on_commit(lambda: [osworld_task_check.delay(pk) for pk in ids])
    return len(ids)
