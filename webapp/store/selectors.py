"""Reads of the store, narrowed to what each role may see."""

from __future__ import annotations

from typing import Any

from django.db.models import Q, QuerySet

from webapp.accounts.roles import Role, user_roles
from webapp.store.models import ExportJob, ReviewState, Task, TaskPool, Trajectory

_REVIEW_QUEUE_STATES = [ReviewState.PENDING, ReviewState.IN_REVIEW]


def trajectories_visible_to(user: Any) -> QuerySet[Trajectory]:
    """Researchers and admins see every trajectory; annotators their own; reviewers what they review."""
    roles = user_roles(user)
    qs = Trajectory.objects.all()
    if roles & {Role.ADMIN, Role.RESEARCHER}:
        return qs
    condition = Q(pk__in=[])
    if Role.ANNOTATOR in roles:
        condition |= Q(annotator=user)
    if Role.REVIEWER in roles:
        condition |= Q(review_state__in=_REVIEW_QUEUE_STATES) | Q(reviews__reviewer=user)
    return qs.filter(condition).distinct() if Role.REVIEWER in roles else qs.filter(condition)


def tasks_visible_to(user: Any) -> QuerySet[Task]:
    """Annotators see only the tasks assigned to them; the other roles see every task."""
    roles = user_roles(user)
    qs = Task.objects.select_related("pool")
    if roles & {Role.ADMIN, Role.RESEARCHER, Role.REVIEWER}:
        return qs
    if Role.ANNOTATOR in roles:
        return qs.filter(assignments__user=user)
    return qs.none()


def pools_visible_to(user: Any) -> QuerySet[TaskPool]:
    roles = user_roles(user)
    if roles & {Role.ADMIN, Role.RESEARCHER, Role.REVIEWER}:
        return TaskPool.objects.all()
    if Role.ANNOTATOR in roles:
        return TaskPool.objects.filter(tasks__assignments__user=user).distinct()
    return TaskPool.objects.none()


def export_jobs_visible_to(user: Any) -> QuerySet[ExportJob]:
    if Role.ADMIN in user_roles(user):
        return ExportJob.objects.all()
    return ExportJob.objects.filter(created_by=user)


def export_job_get_for_user(*, user: Any, job_id: int) -> ExportJob | None:
    return export_jobs_visible_to(user).filter(pk=job_id).first()
