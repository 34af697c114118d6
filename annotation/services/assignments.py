"""Assignment queues (seed 000 §2.4.1): admins hand a pool's tasks to annotators on a track.

`assignments_create` is idempotent (an annotator holds one assignment per task); a novice track
lets the annotator use outside resources. The order an annotator gets tasks in is the selectors'
`next_assignment`: the tasks the current model fails most first, then importance, then age.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction

from annotation.models import Assignment, AssignmentStatus, Track
from webapp.accounts.roles import Role, has_role
from webapp.store.models import Task, TaskPool


class AssignmentError(ValueError):
    """The assignment request names something that cannot be assigned; nothing was created."""


@dataclass(frozen=True)
class AssignResult:
    created: int
    existing: int
    annotators: int
    tasks: int


@transaction.atomic
def assignments_create(
    *,
    pool: TaskPool,
    usernames: Iterable[str],
    track: str = Track.EXPERT,
    task_ids: Iterable[int] | None = None,
    only_enabled: bool = True,
) -> AssignResult:
    """Assign the pool's tasks (or the given subset) to each annotator. All or nothing: an unknown
    user, a user without the annotator role or a task outside the pool fails the whole request."""
    if track not in Track.values:
        raise AssignmentError(f"unknown track {track!r}; expected one of {sorted(Track.values)}")
    names = sorted(set(usernames))
    if not names:
        raise AssignmentError("name at least one annotator")
    users = list(get_user_model().objects.filter(username__in=names))
    missing = sorted(set(names) - {u.username for u in users})
    if missing:
        raise AssignmentError(f"unknown users: {', '.join(missing)}")
    not_annotators = sorted(u.username for u in users if not has_role(u, Role.ANNOTATOR, Role.ADMIN))
    if not_annotators:
        raise AssignmentError(f"not annotators: {', '.join(not_annotators)}")
    tasks = Task.objects.filter(pool=pool)
    if only_enabled:
        tasks = tasks.filter(enabled=True, supported=True)
    if task_ids is not None:
        wanted = set(task_ids)
        tasks = tasks.filter(pk__in=wanted)
        outside = wanted - set(tasks.values_list("pk", flat=True))
        if outside:
            raise AssignmentError(
                f"tasks not in pool {pool.name!r} (or disabled): {', '.join(map(str, sorted(outside)))}"
            )
    task_list = list(tasks.only("pk"))
    created = existing = 0
    for user in users:
        for task in task_list:
            _, was_created = Assignment.objects.get_or_create(user=user, task=task, defaults={"track": track})
            created += was_created
            existing += not was_created
    return AssignResult(created=created, existing=existing, annotators=len(users), tasks=len(task_list))


def assignment_skip(*, assignment: Assignment, user: Any) -> Assignment:
    """An annotator passes on a task they cannot do; it leaves their queue."""
    if assignment.user_id != user.pk:
        raise AssignmentError("this assignment belongs to another annotator")
    if assignment.status == AssignmentStatus.DONE:
        raise AssignmentError("a finished assignment cannot be skipped")
    assignment.status = AssignmentStatus.SKIPPED
    assignment.save(update_fields=["status"])
    return assignment
