"""Review API (`/api/review/`, reviewers and admins): the queue, take the next trajectory, the review
screen's data, submit a review, agreement, duplicates and the executability replay."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.api import schema as S
from annotation.models import Review, Verdict
from annotation.review import agreement, selectors, services
from webapp.accounts.permissions import _RolePermission
from webapp.accounts.roles import Role
from webapp.store.models import Trajectory


class IsReviewer(_RolePermission):
    roles = (Role.REVIEWER, Role.ADMIN)
    message = "Only reviewers and admins may review."


def _error(exc: Exception, code: int) -> Response:
    return Response({"detail": str(exc)}, status=code)


def _trajectory(request: Request, pk: int) -> Trajectory:
    trajectory = selectors.trajectory_for_reviewer(request.user, pk)
    if trajectory is None:
        raise NotFound("No such trajectory among yours to review.")
    return trajectory


def _queue_row(t: Trajectory) -> dict[str, Any]:
    return {
        "id": t.pk,
        "task": t.task.external_id,
        "instruction": t.task.instruction,
        "pool": t.task.pool.name,
        "env_kind": t.env_kind,
        "source": t.source,
        "num_steps": t.num_steps,
        "final_reward": t.final_reward,
        "review_state": t.review_state,
        "reviews": getattr(t, "review_count", 0),
        "created_at": t.created_at,
    }


def _mine_row(r: Review) -> dict[str, Any]:
    t = r.trajectory
    return {
        "review_id": r.pk,
        "trajectory_id": t.pk,
        "task": t.task.external_id,
        "verdict": r.verdict,
        "submitted": r.completed_at is not None,
        "completed_at": r.completed_at,
        "review_state": t.review_state,
    }


class QueueView(APIView):
    permission_classes = [IsReviewer]

    @extend_schema(responses=S.ok(S.ReviewQueue))
    def get(self, request: Request) -> Response:
        queue = selectors.review_queue(request.user)
        return Response(
            {
                "reviews_required": selectors.reviews_required(),
                "count": queue.count(),
                "queue": [_queue_row(t) for t in queue[:100]],
                "mine": [_mine_row(r) for r in selectors.reviews_of(request.user)[:50]],
            }
        )


class TakeInput(serializers.Serializer):
    trajectory = serializers.IntegerField(
        required=False, help_text="Take this trajectory; omit to take the oldest in your queue."
    )


class TakeView(APIView):
    permission_classes = [IsReviewer]

    @extend_schema(request=TakeInput, responses=S.ok(S.ReviewTaken, 201))
    def post(self, request: Request) -> Response:
        data = TakeInput(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            review = services.review_assign(
                reviewer=request.user, trajectory_id=data.validated_data.get("trajectory")
            )
        except services.ReviewConflict as exc:
            return _error(exc, status.HTTP_409_CONFLICT)
        if review is None:
            return _error(NotFound("Nothing is waiting for your review."), status.HTTP_404_NOT_FOUND)
        return Response(
            {"review_id": review.pk, "trajectory_id": review.trajectory_id}, status=status.HTTP_201_CREATED
        )


class TrajectoryReviewView(APIView):
    permission_classes = [IsReviewer]

    @extend_schema(responses=S.ok(S.ReviewData))
    def get(self, request: Request, pk: int) -> Response:
        trajectory = _trajectory(request, pk)
        return Response(selectors.review_view_data(trajectory=trajectory, user=request.user))


class StepVerdictInput(serializers.Serializer):
    index = serializers.IntegerField(min_value=0)
    verdict = serializers.ChoiceField(choices=Verdict.values)
    comment = serializers.CharField(required=False, allow_blank=True, max_length=5000)
    action_text = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=5000,
        help_text="With verdict fix: the corrected action (UI-TARS grammar, screen pixels).",
    )


class SubmitInput(serializers.Serializer):
    verdict = serializers.ChoiceField(choices=Verdict.values)
    comment = serializers.CharField(required=False, allow_blank=True, max_length=10000)
    step_verdicts = StepVerdictInput(many=True)


class SubmitView(APIView):
    permission_classes = [IsReviewer]

    @extend_schema(request=SubmitInput, responses=S.ok(S.ReviewData))
    def post(self, request: Request, pk: int) -> Response:
        review = Review.objects.filter(pk=pk, reviewer=request.user).first()
        if review is None:
            raise NotFound("No such review of yours.")
        data = SubmitInput(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            services.review_submit(
                review=review,
                reviewer=request.user,
                verdict=data.validated_data["verdict"],
                step_verdicts=data.validated_data["step_verdicts"],
                comment=data.validated_data.get("comment", ""),
            )
        except services.ReviewInvalid as exc:
            return Response({"detail": str(exc), **exc.errors}, status=status.HTTP_400_BAD_REQUEST)
        except services.ReviewConflict as exc:
            return _error(exc, status.HTTP_409_CONFLICT)
        trajectory = Trajectory.objects.select_related("task", "task__pool").get(pk=review.trajectory_id)
        return Response(selectors.review_view_data(trajectory=trajectory, user=request.user))


class AgreementView(APIView):
    """Agreement of the submitted reviews; hidden from a reviewer until their own is submitted."""

    permission_classes = [IsReviewer]

    @extend_schema(responses=S.ok(S.ReviewAgreement))
    def get(self, request: Request, pk: int) -> Response:
        trajectory = _trajectory(request, pk)
        data = selectors.review_view_data(trajectory=trajectory, user=request.user)
        if data["others_hidden"]:
            return _error(
                PermissionError("Submit your own review before seeing the others' and their agreement."),
                status.HTTP_409_CONFLICT,
            )
        done = [r for r in [data["my_review"], *data["other_reviews"]] if r and r["completed_at"]]
        steps = agreement.step_verdict_agreement([r["step_verdicts"] for r in done])
        fixes = agreement.corrected_action_agreement(
            [r["step_verdicts"] for r in done], radius_px=selectors.review_radius_px()
        )
        return Response(
            {
                "reviews": len(done),
                "verdicts": [r["verdict"] for r in done],
                "outcome": agreement.review_outcome([r["verdict"] for r in done]) if done else None,
                "step_agreement": steps.rate,
                "agreeing_steps": steps.agreeing,
                "disagreeing_steps": steps.disagreeing,
                "flagged_steps": steps.flagged,
                "fix_agreement": [asdict(f) for f in fixes],
            }
        )


class DuplicatesView(APIView):
    permission_classes = [IsReviewer]

    @extend_schema(responses=S.ok(S.ReviewDuplicates))
    def get(self, request: Request, pk: int) -> Response:
        trajectory = _trajectory(request, pk)
        return Response(
            {
                "threshold": selectors.duplicate_threshold(),
                "duplicates": selectors.trajectory_duplicates(trajectory),
            }
        )


class ExecutabilityView(APIView):
    permission_classes = [IsReviewer]

    @extend_schema(responses=S.ok(S.Executability))
    def get(self, request: Request, pk: int) -> Response:
        trajectory = _trajectory(request, pk)
        return Response({"executability": trajectory.metadata.get("executability")})

    @extend_schema(request=None, responses=S.ok(S.Executability, 202))
    def post(self, request: Request, pk: int) -> Response:
        trajectory = _trajectory(request, pk)
        try:
            state = services.executability_request(trajectory=trajectory)
        except services.ReviewConflict as exc:
            return _error(exc, status.HTTP_409_CONFLICT)
        return Response({"executability": state}, status=status.HTTP_202_ACCEPTED)
