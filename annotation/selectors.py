"""Reads of the annotation loop, narrowed per role."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, QuerySet

from annotation.models import AnnotationSession, Assignment, AssignmentStatus
from webapp.accounts.roles import Role, user_roles


def sessions_visible_to(user: Any) -> QuerySet[AnnotationSession]:
    qs = AnnotationSession.objects.select_related("task__pool", "trajectory", "user")
    if Role.ADMIN in user_roles(user):
        return qs
    return qs.filter(user=user)


def session_state(session: AnnotationSession) -> dict[str, Any]:
    """Everything the workspace needs to (re)draw itself: status, the current observation, the
    candidates for it, and the timeline of steps so far."""
    steps = []
    if session.trajectory_id:
        for s in session.trajectory.steps.order_by("index"):
            steps.append(
                {
                    "index": s.index,
                    "thought": s.thought,
                    "action_text": s.action_text,
                    "decision": s.decision,
                    "decision_index": s.decision_index,
                    "screenshot_url": s.screenshot.url if s.screenshot else "",
                    "executed_points": s.executed_points,
                    "reward": s.reward,
                    "clock_start": s.clock_start,
                    "clock_end": s.clock_end,
                    "human_thought_verbatim": s.human_thought_verbatim,
                    "human_thought_refined": s.human_thought_refined,
                }
            )
    return {
        "id": session.pk,
        "status": session.status,
        "error": session.error,
        "task": {
            "id": session.task_id,
            "external_id": session.task.external_id,
            "instruction": session.current_instruction or session.task.instruction,
            "env_kind": session.task.env_kind,
            "pool": session.task.pool.name,
        },
        "trajectory_id": session.trajectory_id,
        "track": session.track,
        "policy": {
            "model": session.policy_model,
            "profile": session.policy_profile,
            "n": session.candidates_n,
        },
        "observation": {
            "obs_version": session.obs_version,
            "screenshot_url": session.current_screenshot.url if session.current_screenshot else "",
            "width": session.current_width,
            "height": session.current_height,
            "clock": session.current_clock,
            "reward": session.last_reward,
            "env_done": session.env_done,
        },
        "candidates": {
            "obs_version": session.candidates_version,
            "status": session.candidates_status,
            "items": session.candidates if session.candidates_version == session.obs_version else [],
            "error": session.candidates_error,
            "model_ms": session.candidates_ms,
        },
        "steps": steps,
    }


def next_assignment(user: Any, pool_id: int | None = None) -> Assignment | None:
    """The annotator's next task: their open assignments, the tasks the current model fails most
    first (lowest success rate), then the most important, then the oldest."""
    return assignment_queue(user, pool_id).first()


def assignment_queue(user: Any, pool_id: int | None = None) -> QuerySet[Assignment]:
    """An annotator's open assignments in the order they get them (see `next_assignment`)."""
    qs = Assignment.objects.filter(
        user=user, status__in=[AssignmentStatus.ASSIGNED, AssignmentStatus.IN_PROGRESS], task__enabled=True
    ).select_related("task", "task__pool")
    if pool_id is not None:
        qs = qs.filter(task__pool_id=pool_id)
    return qs.order_by("task__success_rate", "-task__importance", "created_at")


def assignments_all(
    *, pool_id: int | None = None, username: str | None = None, status: str | None = None
) -> QuerySet[Assignment]:
    qs = Assignment.objects.select_related("user", "task", "task__pool").order_by(
        "user__username", "created_at"
    )
    if pool_id is not None:
        qs = qs.filter(task__pool_id=pool_id)
    if username:
        qs = qs.filter(user__username=username)
    if status:
        qs = qs.filter(status=status)
    return qs


def annotator_workload() -> list[dict[str, Any]]:
    """Who works on what: per annotator, assignment counts by status and their active sessions."""
    counts: dict[str, dict[str, Any]] = {}
    for row in Assignment.objects.values("user__username", "status").annotate(n=Count("id")):
        entry = counts.setdefault(
            row["user__username"], {"username": row["user__username"], "assignments": {}}
        )
        entry["assignments"][row["status"]] = row["n"]
    active = AnnotationSession.objects.filter(status__in=["created", "active"]).select_related("user", "task")
    for session in active.annotate(n_steps=Count("trajectory__steps")):
        entry = counts.setdefault(
            session.user.username, {"username": session.user.username, "assignments": {}}
        )
        entry.setdefault("active_sessions", []).append(
            {
                "session": session.pk,
                "task": session.task_id,
                "task_external_id": session.task.external_id,
                "instruction": session.task.instruction[:200],
                "steps": session.n_steps,
                "started_at": session.created_at.isoformat(),
                "updated_at": session.updated_at.isoformat(),
            }
        )
    return [{"active_sessions": [], **entry} for _, entry in sorted(counts.items())]
