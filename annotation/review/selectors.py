"""Reads of the review workflow: the queue, a reviewer's reviews, what a review screen shows, and
near-duplicate trajectories of the same task."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db.models import Count, Exists, F, OuterRef, Q, QuerySet

from annotation.models import Review
from annotation.review import agreement
from webapp.accounts.roles import Role, user_roles
from webapp.store.models import ReviewState, Step, Trajectory, TrajectoryStatus
from workers.actions.coords import screen_actions
from workers.actions.types import Action

QUEUE_STATES = (ReviewState.PENDING, ReviewState.IN_REVIEW)


def reviews_required() -> int:
    """Independent reviews a trajectory needs before it is decided (`REVIEWS_PER_TRAJECTORY`)."""
    return int(getattr(settings, "REVIEWS_PER_TRAJECTORY", 2))


def review_radius_px() -> float:
    return float(getattr(settings, "REVIEW_AGREEMENT_RADIUS_PX", 14.0))


def duplicate_threshold() -> float:
    return float(getattr(settings, "REVIEW_DUPLICATE_THRESHOLD", 0.95))


def review_queue(user: Any) -> QuerySet[Trajectory]:
    """Trajectories this user may still take for review, oldest first: finished, waiting for review,
    with a free review slot in the current round, not annotated by them and not already reviewed by
    them in this round (after a fix the same reviewers may look again)."""
    mine_this_round = Review.objects.filter(
        trajectory=OuterRef("pk"), reviewer=user, round=OuterRef("review_round")
    )
    return (
        Trajectory.objects.filter(review_state__in=QUEUE_STATES, status=TrajectoryStatus.COMPLETED)
        .exclude(annotator=user)
        .exclude(Exists(mine_this_round))
        .annotate(review_count=Count("reviews", filter=Q(reviews__round=F("review_round")), distinct=True))
        .filter(review_count__lt=reviews_required())
        .select_related("task", "task__pool", "annotator")
        .order_by("created_at", "id")
    )


def reviews_of(user: Any) -> QuerySet[Review]:
    """The user's reviews: open ones first, then the latest done."""
    return (
        Review.objects.filter(reviewer=user)
        .select_related("trajectory", "trajectory__task", "trajectory__task__pool")
        .order_by(F("completed_at").desc(nulls_first=True), "-created_at")
    )


def trajectory_for_reviewer(user: Any, trajectory_id: int) -> Trajectory | None:
    """Admins see any trajectory; reviewers only those they hold a review of."""
    qs = Trajectory.objects.select_related("task", "task__pool", "annotator")
    if Role.ADMIN in user_roles(user):
        return qs.filter(pk=trajectory_id).first()
    return qs.filter(pk=trajectory_id, reviews__reviewer=user).first()


def step_screen_actions(step: Step) -> list[dict[str, Any]]:
    """The step's actions with points in screen pixels (what was executed), for drawing and
    comparing. Steps stored without a convention or screen size are taken as screen pixels."""
    stored = screen_actions(step.action or [], step.coord_convention, step.screen_width,
                            step.screen_height, step.model_image_width, step.model_image_height)  # fmt: skip
    return [Action.from_json(a).to_json() for a in stored]


def trajectories_screen_actions(trajectory_ids: list[int]) -> dict[int, list[list[dict[str, Any]]]]:
    """Every step's screen actions of several trajectories, in one query: {id: [step actions]}."""
    out: dict[int, list[list[dict[str, Any]]]] = {pk: [] for pk in trajectory_ids}
    for step in Step.objects.filter(trajectory_id__in=trajectory_ids).order_by("trajectory_id", "index"):
        out[step.trajectory_id].append(step_screen_actions(step))
    return out


def trajectory_duplicates(trajectory: Trajectory, *, limit: int = 200) -> list[dict[str, Any]]:
    """Other finished trajectories of the same task (the latest `limit`) whose action sequences agree
    with this one at or above the duplicate threshold (agreement.sequence_agreement), best first."""
    mine = trajectories_screen_actions([trajectory.pk])[trajectory.pk]
    if not mine:
        return []
    others = list(
        Trajectory.objects.filter(task_id=trajectory.task_id)
        .exclude(pk=trajectory.pk)
        .exclude(status=TrajectoryStatus.RUNNING)
        .filter(num_steps__gt=0)
        .select_related("annotator")
        .order_by("-created_at")[:limit]
    )
    actions = trajectories_screen_actions([o.pk for o in others])
    threshold, radius = duplicate_threshold(), review_radius_px()
    found = []
    for other in others:
        score = agreement.sequence_agreement(mine, actions[other.pk], radius_px=radius)
        if score >= threshold:
            found.append(
                {"trajectory_id": other.pk, "score": score, "source": other.source,
                 "annotator": other.annotator.username if other.annotator else "",
                 "review_state": other.review_state, "created_at": other.created_at}
            )  # fmt: skip
    return sorted(found, key=lambda d: -d["score"])


def decision_number(decision_index: int | None) -> int | None:
    """The candidate number a user sees (1-based) for a stored 0-based candidate index."""
    return None if decision_index is None else decision_index + 1


def _review_json(review: Review) -> dict[str, Any]:
    return {
        "id": review.pk,
        "round": review.round,
        "reviewer": review.reviewer.username,
        "verdict": review.verdict,
        "comment": review.comment,
        "step_verdicts": review.step_verdicts,
        "created_at": review.created_at,
        "completed_at": review.completed_at,
    }


def _step_json(step: Step) -> dict[str, Any]:
    return {
        "index": step.index,
        "number": step.index + 1,
        "thought": step.thought,
        "action_text": step.action_text,
        "raw_text": step.raw_text,
        "parse_error": step.parse_error,
        "action": step.action,
        "screen_actions": step_screen_actions(step),
        "coord_convention": step.coord_convention,
        "screenshot_url": step.screenshot.url if step.screenshot else "",
        "screen_width": step.screen_width,
        "screen_height": step.screen_height,
        "executed_points": step.executed_points,
        "decision": step.decision,
        "decision_index": step.decision_index,
        "decision_number": decision_number(step.decision_index),
        "decision_meta": step.decision_meta,
        "candidates": step.candidates,
        "reward": step.reward,
        "done": step.done,
        "human_thought": step.human_thought_refined or step.human_thought_verbatim,
        "clock_start": step.clock_start,
        "clock_end": step.clock_end,
    }


def review_view_data(*, trajectory: Trajectory, user: Any) -> dict[str, Any]:
    """Everything the review screen shows. Independence: a reviewer sees the other reviews only
    once their own is submitted; admins always see them."""
    everyone = list(trajectory.reviews.select_related("reviewer").order_by("round", "created_at"))
    reviews = [r for r in everyone if r.round == trajectory.review_round]
    mine = next((r for r in reviews if r.reviewer_id == user.pk), None)
    is_admin = Role.ADMIN in user_roles(user)
    show_others = is_admin or (mine is not None and mine.completed_at is not None)
    others = [r for r in reviews if r is not mine] if show_others else []
    task = trajectory.task
    return {
        "trajectory": {
            "id": trajectory.pk,
            "source": trajectory.source,
            "status": trajectory.status,
            "review_state": trajectory.review_state,
            "review_round": trajectory.review_round,
            "instruction": trajectory.episode_instruction,
            "branch_of": trajectory.metadata.get("branch_of"),
            "branch_step": trajectory.metadata.get("branch_step"),
            "final_reward": trajectory.final_reward,
            "validation": trajectory.validation,
            "validator": trajectory.validator,
            "num_steps": trajectory.num_steps,
            "annotator": trajectory.annotator.username if trajectory.annotator else "",
            "policy_version": trajectory.policy_version,
            "created_at": trajectory.created_at,
            "finished_at": trajectory.finished_at,
            "seed": trajectory.metadata.get("seed"),
        },
        "task": {
            "id": task.pk,
            "external_id": task.external_id,
            "instruction": trajectory.episode_instruction,
            "task_instruction": task.instruction,
            "env_kind": task.env_kind,
            "pool": task.pool.name,
        },
        "steps": [_step_json(s) for s in trajectory.steps.order_by("index")],
        "reviews_required": reviews_required(),
        "reviews_done": sum(1 for r in reviews if r.completed_at is not None),
        "my_review": _review_json(mine) if mine else None,
        "other_reviews": [_review_json(r) for r in others],
        "earlier_rounds": [_review_json(r) for r in everyone if r.round < trajectory.review_round]
        if show_others or mine is not None
        else [],
        "others_hidden": not show_others,
        "outcome": trajectory.metadata.get("review") if show_others else None,
        "executability": trajectory.metadata.get("executability"),
        "duplicates": trajectory_duplicates(trajectory),
    }
