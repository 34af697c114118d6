"""Writes of the review workflow: take a trajectory from the queue, submit an independent review,
decide the trajectory once the required reviews are in (recording V(s) via "human-review"), and
request an executability replay.

State machine of `Trajectory.review_state` (and the annotation session's status alongside):
pending → in_review (first review taken) → approved | rejected | needs_fix (all reviews in).
Every transition is a conditional UPDATE on the expected current state.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from annotation.models import AnnotationSession, Review, SessionStatus, Verdict
from annotation.review import agreement
from annotation.review.selectors import QUEUE_STATES, review_queue, review_radius_px, reviews_required
from webapp.store import services as store
from webapp.store.models import ReviewState, Step, Trajectory
from webapp.timestamps import now_utc
from workers.actions.coords import OffScreen, actions_on_screen
from workers.actions.parse import parse_response
from workers.actions.types import Convention

HUMAN_REVIEW_VALIDATOR = "human-review"


class ReviewConflict(RuntimeError):
    """The review cannot be taken or submitted in the current state (already reviewed, already
    submitted, not yours, the trajectory was decided meanwhile)."""


class ReviewInvalid(ValueError):
    """The submitted review is malformed (unknown verdict, steps missing or inconsistent).
    `errors`, where given, names the field as DRF does: {"step_verdicts": [{}, {"action_text": [...]}]}."""

    def __init__(self, message: str, errors: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.errors = errors or {}


def review_assign(*, reviewer: Any, trajectory_id: int | None = None) -> Review | None:
    """Give `reviewer` a trajectory to review: their open review if they have one (resume), else
    `trajectory_id` if given and still open to them, else the oldest in their queue. Returns None
    when nothing is left. The trajectory row is locked while its reviews are counted, so no
    trajectory gets more reviews than required."""
    mine = Review.objects.filter(reviewer=reviewer)
    if trajectory_id is not None:
        # Their review of the trajectory's current round (or an open one) is resumed; an earlier
        # round's finished review does not stop them from reviewing the fixed trajectory.
        existing = mine.filter(trajectory_id=trajectory_id, round=F("trajectory__review_round")).first()
        existing = existing or mine.filter(trajectory_id=trajectory_id, completed_at__isnull=True).first()
        if existing is not None:
            return existing
    else:
        open_review = mine.filter(completed_at__isnull=True).first()
        if open_review is not None:
            return open_review
    with transaction.atomic():
        candidates = review_queue(reviewer).values_list("pk", flat=True)
        if trajectory_id is not None:
            candidates = candidates.filter(pk=trajectory_id)
        for pk in candidates[:20]:
            # Wait for anyone else taking this trajectory, then count again under the lock.
            locked = Trajectory.objects.select_for_update().filter(pk=pk).first()
            if locked is None or locked.review_state not in QUEUE_STATES:
                continue
            if locked.reviews.filter(round=locked.review_round).count() >= reviews_required():
                continue
            try:
                with transaction.atomic():
                    review = Review.objects.create(
                        trajectory=locked, reviewer=reviewer, round=locked.review_round
                    )
            except IntegrityError:
                continue
            Trajectory.objects.filter(pk=pk, review_state=ReviewState.PENDING).update(
                review_state=ReviewState.IN_REVIEW
            )
            AnnotationSession.objects.filter(trajectory_id=pk, status=SessionStatus.SUBMITTED).update(
                status=SessionStatus.IN_REVIEW
            )
            return review
    if trajectory_id is not None:
        raise ReviewConflict(
            f"trajectory {trajectory_id} is not open to you for review (yours, already reviewed by "
            "you, decided, or it has all its reviews)"
        )
    return None


def _parse_fix(index: int, text: str, screen: tuple[int | None, int | None]) -> list[dict[str, Any]]:
    """A reviewer's corrected action, in the UI-TARS grammar with screen-pixel coordinates; a point
    outside the step's screen is refused as a decision's is (never clamped onto the edge)."""
    parsed = parse_response(text if "Action:" in text else f"Action: {text}", convention=Convention.SCREEN)
    if parsed.error is not None or not parsed.actions:
        reason = parsed.error.message if parsed.error else "no action"
        raise ValueError(f"step {index}: the corrected action does not parse ({reason})")
    width, height = screen
    if width and height:
        try:
            actions_on_screen(parsed.actions, Convention.SCREEN, width, height)
        except OffScreen as exc:
            raise ValueError(f"step {index}: the corrected action is refused: {exc}") from None
    return [a.to_json() for a in parsed.actions]


def _clean_step_verdicts(
    review: Review, verdict: str, step_verdicts: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    if verdict not in Verdict.values:
        raise ReviewInvalid(f"unknown verdict {verdict!r}; expected one of {Verdict.values}")
    screens = {
        index: (w, h)
        for index, w, h in Step.objects.filter(trajectory_id=review.trajectory_id).values_list(
            "index", "screen_width", "screen_height"
        )
    }
    indices = list(screens)
    given: dict[int, dict[str, Any]] = {}
    for position, item in enumerate(step_verdicts):
        index = int(item["index"])
        if index in given:
            raise ReviewInvalid(f"step {index} is judged twice")
        if index not in indices:
            raise ReviewInvalid(f"the trajectory has no step {index}")
        if item["verdict"] not in Verdict.values:
            raise ReviewInvalid(f"step {index}: unknown verdict {item['verdict']!r}")
        given[index] = {"index": index, "verdict": item["verdict"], "comment": str(item.get("comment") or "")}
        if (item.get("action_text") or "").strip():
            if item["verdict"] != Verdict.FIX:
                raise ReviewInvalid(f"step {index}: a corrected action goes with the verdict fix")
            given[index]["action_text"] = item["action_text"].strip()
            try:
                given[index]["action"] = _parse_fix(index, given[index]["action_text"], screens[index])
            except ValueError as exc:
                named: list[dict[str, Any]] = [{} for _ in step_verdicts]
                named[position] = {"action_text": [str(exc)]}
                raise ReviewInvalid(str(exc), {"step_verdicts": named}) from None
    missing = sorted(set(indices) - set(given))
    if missing:
        raise ReviewInvalid(f"every step needs a verdict; missing: {missing}")
    flagged = [i for i, v in given.items() if v["verdict"] != Verdict.APPROVE]
    if verdict == Verdict.APPROVE and flagged:
        raise ReviewInvalid(
            f"the trajectory cannot be approved with steps marked fix or reject: {sorted(flagged)}"
        )
    for index in flagged:
        if not given[index]["comment"].strip():
            raise ReviewInvalid(f"step {index} is marked {given[index]['verdict']}: say why in a comment")
    return [given[i] for i in sorted(given)]


def review_submit(
    *, review: Review, reviewer: Any, verdict: str, step_verdicts: list[dict[str, Any]], comment: str = ""
) -> Review:
    """Submit `reviewer`'s review once: the overall verdict, a verdict (and, for fix / reject, a
    comment) for every step. When this completes the required reviews the trajectory is decided."""
    if review.reviewer_id != reviewer.pk:
        raise ReviewConflict("this review belongs to another reviewer")
    cleaned = _clean_step_verdicts(review, verdict, step_verdicts)
    with transaction.atomic():
        submitted = Review.objects.filter(pk=review.pk, completed_at__isnull=True).update(
            verdict=verdict, step_verdicts=cleaned, comment=comment, completed_at=timezone.now()
        )
        if submitted != 1:
            raise ReviewConflict(f"review {review.pk} was already submitted")
        review.refresh_from_db()
        review_conclude(trajectory_id=review.trajectory_id)
    return review


def review_conclude(*, trajectory_id: int) -> str | None:
    """Decide the trajectory if its required reviews are all in and it is still undecided: both
    approve → approved, V(s)=1; both reject → rejected, V(s)=0; otherwise needs_fix with the steps
    the reviewers disagreed on or flagged. Returns the new state, or None if nothing changed."""
    with transaction.atomic():
        trajectory = Trajectory.objects.select_for_update().get(pk=trajectory_id)
        if trajectory.review_state not in QUEUE_STATES:
            return None
        done = list(
            trajectory.reviews.filter(round=trajectory.review_round, completed_at__isnull=False).order_by(
                "completed_at"
            )
        )
        if len(done) < reviews_required():
            return None
        outcome = agreement.review_outcome([r.verdict for r in done])
        steps = agreement.step_verdict_agreement([r.step_verdicts for r in done])
        fixes = agreement.corrected_action_agreement(
            [r.step_verdicts for r in done], radius_px=review_radius_px()
        )
        decided = Trajectory.objects.filter(pk=trajectory_id, review_state__in=QUEUE_STATES).update(
            review_state=outcome,
            metadata={
                **trajectory.metadata,
                "review": {
                    "outcome": outcome,
                    "round": trajectory.review_round,
                    "reviews": [r.pk for r in done],
                    "verdicts": [r.verdict for r in done],
                    "step_agreement": steps.rate,
                    "disagreeing_steps": steps.disagreeing,
                    "flagged_steps": steps.flagged,
                    "fix_agreement": [asdict(f) for f in fixes],
                    "decided_at": now_utc(),
                },
            },
        )
        if decided != 1:
            return None
        trajectory.refresh_from_db()
        if outcome == ReviewState.APPROVED:
            store.trajectory_validate(trajectory=trajectory, value=1, validator=HUMAN_REVIEW_VALIDATOR)
        elif outcome == ReviewState.REJECTED:
            store.trajectory_validate(trajectory=trajectory, value=0, validator=HUMAN_REVIEW_VALIDATOR)
        else:  # needs fix: whatever validated it before the review must not keep it routed
            store.trajectory_unroute(trajectory_id=trajectory_id, reason="review asked for a fix")
        AnnotationSession.objects.filter(
            trajectory_id=trajectory_id, status__in=[SessionStatus.SUBMITTED, SessionStatus.IN_REVIEW]
        ).update(status=outcome)
    return outcome


def executability_request(*, trajectory: Trajectory) -> dict[str, Any]:
    """Queue a replay of the trajectory in a fresh environment (annotation.review.tasks). Refused
    while one is queued or running."""
    from annotation.review.tasks import replay_trajectory

    with transaction.atomic():
        locked = Trajectory.objects.select_for_update().get(pk=trajectory.pk)
        current = locked.metadata.get("executability") or {}
        if current.get("status") in ("queued", "running"):
            raise ReviewConflict(f"a replay of trajectory {trajectory.pk} is already {current['status']}")
        if locked.num_steps == 0:
            raise ReviewConflict(f"trajectory {trajectory.pk} has no steps to replay")
        state = {"status": "queued", "at": now_utc()}
        locked.metadata = {**locked.metadata, "executability": state}
        locked.save(update_fields=["metadata"])
        queue = str(getattr(settings, "REVIEW_REPLAY_QUEUE", "default"))
        transaction.on_commit(lambda: replay_trajectory.apply_async(args=[trajectory.pk], queue=queue))
    return state
