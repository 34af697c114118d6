"""Reads of the annotation loop, narrowed per role."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, QuerySet

from annotation.models import AnnotationSession, Assignment, AssignmentStatus, Review, SessionStatus
from annotation.review.selectors import decision_number
from webapp.accounts.roles import Role, user_roles
from webapp.store.models import ReviewState, Trajectory
from webapp.timestamps import iso_utc


def _measured(version: str) -> str:
    """The annotation model's measured success on its pool, in words ("" when never measured)."""
    from webapp.store.checkpoints import checkpoint_success_note
    from webapp.store.models import Checkpoint

    return checkpoint_success_note(Checkpoint.objects.filter(version=version).first())


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
                    "number": s.index + 1,
                    "thought": s.thought,
                    "action_text": s.action_text,
                    "decision": s.decision,
                    "decision_index": s.decision_index,
                    "decision_number": decision_number(s.decision_index),
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
            "instruction": _instruction(session),
            "env_kind": session.task.env_kind,
            "pool": session.task.pool.name,
        },
        "trajectory_id": session.trajectory_id,
        "result": _result(session),
        "review_state": session.trajectory.review_state if session.trajectory_id else None,
        "branch_of": session.trajectory.metadata.get("branch_of") if session.trajectory_id else None,
        "track": session.track,
        "policy": {
            "model": session.policy_model,
            "profile": session.policy_profile,
            "n": session.candidates_n,
            "measured": _measured(session.policy_model),
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
            "items": [{**c, "number": c["index"] + 1} for c in session.candidates]
            if session.candidates_version == session.obs_version
            else [],
            "error": session.candidates_error,
            "model_ms": session.candidates_ms,
        },
        "steps": steps,
    }


def _instruction(session: AnnotationSession) -> str:
    if session.trajectory_id and session.trajectory.instruction:
        return session.trajectory.instruction
    return session.current_instruction or session.task.instruction


def _result(session: AnnotationSession) -> dict[str, Any] | None:
    """The task's result once the session is over: the trajectory's stored final reward (the
    verifier's score), the same number review and export show. None while the session runs."""
    if not session.trajectory_id or session.status in (SessionStatus.CREATED, SessionStatus.ACTIVE):
        return None
    t = session.trajectory
    reward = t.final_reward
    return {
        "final_reward": reward,
        "success": None if reward is None else reward > 0,
        "status": t.status,
        "review_state": t.review_state,
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
                "started_at": iso_utc(session.created_at),
                "updated_at": iso_utc(session.updated_at),
            }
        )
    return [{"active_sessions": [], **entry} for _, entry in sorted(counts.items())]


def fixable_trajectories(user: Any) -> QuerySet[Trajectory]:
    """The trajectories `user` annotated (admins: anyone's) that the fix view may show."""
    qs = Trajectory.objects.filter(source="annotation").select_related("task__pool", "annotator")
    if Role.ADMIN in user_roles(user):
        return qs
    return qs.filter(annotator=user)


def fixes_open(user: Any) -> list[dict[str, Any]]:
    """The caller's trajectories the reviewers sent back for a fix, oldest decision first."""
    rows = []
    for t in (
        fixable_trajectories(user).filter(review_state=ReviewState.NEEDS_FIX).order_by("created_at")[:200]
    ):
        review = t.metadata.get("review") or {}
        rows.append(
            {"trajectory_id": t.pk, "task": t.task.external_id, "instruction": t.episode_instruction,
             "pool": t.task.pool.name, "review_state": t.review_state, "review_round": t.review_round,
             "flagged_steps": sorted(set(review.get("flagged_steps", [])) | set(review.get("disagreeing_steps", []))),
             "decided_at": review.get("decided_at")}
        )  # fmt: skip
    return rows


def fix_view_data(trajectory: Trajectory) -> dict[str, Any]:
    """What the annotator needs to fix a trajectory: every step with the reviewers' comments on it
    (the reviews of the round that sent it back), and the overall verdicts and comments."""
    from annotation.review.selectors import step_screen_actions

    reviews = list(
        Review.objects.filter(
            trajectory=trajectory, round=trajectory.review_round, completed_at__isnull=False
        )
        .select_related("reviewer")
        .order_by("completed_at")
    )
    comments: dict[int, list[dict[str, Any]]] = {}
    for r in reviews:
        for v in r.step_verdicts:
            if v.get("verdict") != "approve" or v.get("comment"):
                comments.setdefault(int(v["index"]), []).append(
                    {"reviewer": r.reviewer.username, "verdict": v.get("verdict"),
                     "comment": v.get("comment", ""), "action_text": v.get("action_text", "")}
                )  # fmt: skip
    steps = []
    for s in trajectory.steps.order_by("index"):
        steps.append(
            {"index": s.index, "number": s.index + 1, "thought": s.thought, "action_text": s.action_text,
             "screen_actions": step_screen_actions(s), "screenshot_url": s.screenshot.url if s.screenshot else "",
             "screen_width": s.screen_width, "screen_height": s.screen_height, "decision": s.decision,
             "decision_index": s.decision_index, "decision_number": decision_number(s.decision_index),
             "edited": bool((s.decision_meta or {}).get("fix_history")), "comments": comments.get(s.index, [])}
        )  # fmt: skip
    meta = trajectory.metadata
    return {
        "trajectory": {
            "id": trajectory.pk, "review_state": trajectory.review_state, "review_round": trajectory.review_round,
            "instruction": trajectory.episode_instruction, "final_reward": trajectory.final_reward,
            "status": trajectory.status, "seed": meta.get("seed"), "branch_of": meta.get("branch_of"),
            "branch_step": meta.get("branch_step"), "superseded_by": meta.get("superseded_by"),
        },
        "task": {"id": trajectory.task_id, "external_id": trajectory.task.external_id,
                 "env_kind": trajectory.task.env_kind, "pool": trajectory.task.pool.name},
        "reviews": [{"reviewer": r.reviewer.username, "verdict": r.verdict, "comment": r.comment} for r in reviews],
        "steps": steps,
        "flagged_steps": sorted(comments),
    }  # fmt: skip


def session_owner_names(ids: set[int]) -> dict[int, tuple[str, str | None]]:
    """The fleet page's names of the annotation sessions holding leases (webapp.fleet.owners)."""
    rows = AnnotationSession.objects.filter(pk__in=ids).values_list(
        "pk", "user__username", "task__external_id"
    )
    return {
        pk: (f"annotation session #{pk} by {username} (task {task})", None) for pk, username, task in rows
    }


def session_media_readable(user: Any, visible: QuerySet[Trajectory], session_id: int) -> bool:
    """May `user` read a file of annotation session `session_id` (`annotation/s<id>/…`,
    `thinkaloud/s<id>/…`; webapp.store.media)? Its annotator may, and whoever sees its trajectory
    (`visible`: the trajectories the user sees)."""
    session = AnnotationSession.objects.filter(pk=session_id).only("user_id", "trajectory_id").first()
    if session is None:
        return False
    if session.user_id == user.pk:
        return True
    return session.trajectory_id is not None and visible.filter(pk=session.trajectory_id).exists()
