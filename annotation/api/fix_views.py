"""Fix-loop API (`/api/annotation/fixes/`): the annotator reads the reviewers' comments on a
`needs_fix` trajectory, edits thoughts in place, re-executes a changed action as a branch, and
resubmits. See docs/annotation.md § "Review states, routing and the fix loop"."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation import selectors
from annotation.api import schema as S
from annotation.api.schema import DETAIL_RESPONSES
from annotation.api.views import IsAnnotator, _error
from annotation.services import fixes
from annotation.services.common import SessionConflict
from annotation.services.decisions import DecisionInvalid
from webapp.fleet import services as fleet
from webapp.store.models import Trajectory


def _trajectory(request: Request, pk: int) -> Trajectory:
    return get_object_or_404(selectors.fixable_trajectories(request.user), pk=pk)


class FixListView(APIView):
    permission_classes = [IsAnnotator]

    @extend_schema(responses=S.ok(S.FixRow(many=True)))
    def get(self, request: Request) -> Response:
        return Response(selectors.fixes_open(request.user))


class FixDetailView(APIView):
    permission_classes = [IsAnnotator]

    @extend_schema(responses=S.ok(S.FixView))
    def get(self, request: Request, pk: int) -> Response:
        return Response(selectors.fix_view_data(_trajectory(request, pk)))


class FixThoughtInput(serializers.Serializer):
    thought = serializers.CharField(max_length=20000)


class FixStepView(APIView):
    permission_classes = [IsAnnotator]

    @extend_schema(request=FixThoughtInput, responses=S.ok(S.FixStepOut))
    def patch(self, request: Request, pk: int, index: int) -> Response:
        trajectory = _trajectory(request, pk)
        data = FixThoughtInput(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            fixes.fix_step_thought(
                trajectory_id=trajectory.pk, index=index, thought=data.validated_data["thought"]
            )
        except DecisionInvalid as exc:
            return _error(exc, status.HTTP_400_BAD_REQUEST)
        except SessionConflict as exc:
            return _error(exc, status.HTTP_409_CONFLICT)
        trajectory.refresh_from_db()
        step = next(s for s in selectors.fix_view_data(trajectory)["steps"] if s["index"] == index)
        return Response({"step": step})


class FixBranchInput(serializers.Serializer):
    action_text = serializers.CharField(max_length=20000, help_text="The changed action (UI-TARS grammar).")
    thought = serializers.CharField(required=False, allow_blank=True, max_length=20000)
    convention = serializers.ChoiceField(
        choices=["screen", "relative_1000", "relative_999", "absolute_resized"],
        required=False,
        default="screen",
    )


class FixBranchView(APIView):
    permission_classes = [IsAnnotator]

    @extend_schema(
        request=FixBranchInput,
        responses={
            201: inline_serializer(
                "FixBranchOut",
                {
                    "session": serializers.DictField(help_text="The branch session's state."),
                    "trajectory_id": serializers.IntegerField(),
                    "branch_of": serializers.IntegerField(),
                    "branch_step": serializers.IntegerField(),
                },
            ),
            **DETAIL_RESPONSES,
        },
    )
    def post(self, request: Request, pk: int, index: int) -> Response:
        from annotation.selectors import session_state

        trajectory = _trajectory(request, pk)
        data = FixBranchInput(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            session = fixes.fix_branch(
                trajectory_id=trajectory.pk, user=request.user, index=index, **data.validated_data
            )
        except DecisionInvalid as exc:
            return _error(exc, status.HTTP_400_BAD_REQUEST)
        except SessionConflict as exc:
            return _error(exc, status.HTTP_409_CONFLICT)
        except fleet.NoEnvironmentAvailable as exc:
            return _error(exc, status.HTTP_503_SERVICE_UNAVAILABLE)
        except (fleet.LeaseLost, fleet.EnvCallFailed) as exc:
            return _error(exc, status.HTTP_502_BAD_GATEWAY)
        return Response(
            {"session": session_state(session), "trajectory_id": session.trajectory_id,
             "branch_of": trajectory.pk, "branch_step": index},
            status=status.HTTP_201_CREATED,
        )  # fmt: skip


class FixResubmitView(APIView):
    permission_classes = [IsAnnotator]

    @extend_schema(request=None, responses=S.ok(S.FixResubmitted))
    def post(self, request: Request, pk: int) -> Response:
        trajectory = _trajectory(request, pk)
        try:
            done = fixes.fix_resubmit(trajectory_id=trajectory.pk)
        except SessionConflict as exc:
            return _error(exc, status.HTTP_409_CONFLICT)
        return Response(
            {"trajectory_id": done.pk, "review_state": done.review_state, "review_round": done.review_round}
        )
