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


def trajectory_judge_steps(trajectory: Trajectory, final_screen: bytes | None = None) -> list[Any]:
    """The trajectory as the LLM judge reads it (workers.policy.judge.JudgeStep): every step's thought
    and action with the screen it acted on, then the final screen when given. Screens whose file is
    missing from storage are left out (the judge still reads the text)."""
    from django.core.files.storage import default_storage

    from workers.policy.judge import JudgeStep

    out: list[Any] = []
    for step in trajectory.steps.order_by("index"):
        image: bytes | None = None
        if step.screenshot.name:
            try:
                with default_storage.open(step.screenshot.name, "rb") as fh:
                    image = fh.read()
            except OSError:
                image = None
        fmt = "png" if step.screenshot.name.lower().endswith(".png") else "jpeg"
        out.append(JudgeStep(thought=step.thought, action=step.action_text or "(no action)", screenshot=image,
                             image_format=fmt))  # fmt: skip
    if final_screen:
        fmt = "png" if final_screen[:4] == b"\x89PNG" else "jpeg"
        out.append(JudgeStep(thought="", action="", screenshot=final_screen, image_format=fmt))
    return out


def runnable_env_kinds(*, pool_id: int | None, task_ids: list[int] | None = None) -> list[str]:
    """The environment kinds of the tasks a run over `task_ids` (else every task of the pool) would
    play: enabled and supported ones (what rl_control.engine.data.run_tasks picks), sorted."""
    tasks = Task.objects.filter(pk__in=task_ids) if task_ids else Task.objects.filter(pool_id=pool_id)
    if not task_ids and pool_id is None:
        return []
    kinds = tasks.filter(enabled=True, supported=True).values_list("env_kind", flat=True).distinct()
    return sorted(set(kinds))
