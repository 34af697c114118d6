"""Assignment API: an annotator's queue; admins assign a pool's tasks and see who works on what."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation import selectors
from annotation.api import schema as S
from annotation.api.views import IsAnnotator
from annotation.models import Assignment, AssignmentStatus, Track
from annotation.services.assignments import AssignmentError, assignment_skip, assignments_create
from webapp.accounts.permissions import IsAdmin
from webapp.accounts.roles import Role, has_role
from webapp.store.models import TaskPool


class AssignmentOut(serializers.ModelSerializer):
    username = serializers.CharField(source="user.username")
    pool = serializers.IntegerField(source="task.pool_id")
    pool_name = serializers.CharField(source="task.pool.name")
    task_external_id = serializers.CharField(source="task.external_id")
    instruction = serializers.CharField(source="task.instruction")
    env_kind = serializers.CharField(source="task.env_kind")
    success_rate = serializers.FloatField(source="task.success_rate")
    attempts = serializers.IntegerField(
        source="task.attempts", help_text="Finished episodes behind success_rate."
    )

    class Meta:
        model = Assignment
        fields = ["id", "username", "task", "task_external_id", "instruction", "env_kind", "pool", "pool_name",
                  "success_rate", "attempts", "track", "status", "created_at"]  # fmt: skip


class AssignInput(serializers.Serializer):
    pool = serializers.IntegerField()
    users = serializers.ListField(child=serializers.CharField(max_length=150), allow_empty=False)
    track = serializers.ChoiceField(choices=Track.choices, default=Track.EXPERT)
    tasks = serializers.ListField(
        child=serializers.IntegerField(), required=False, help_text="Only these tasks of the pool."
    )


def _int_param(request: Request, name: str) -> int | None:
    raw = request.query_params.get(name)
    if raw in (None, ""):
        return None
    try:
        return int(raw)
    except ValueError as exc:
        raise serializers.ValidationError({name: "must be an integer"}) from exc


class AssignmentListView(APIView):
    """GET: an annotator's queue in the order they get it (admins: everyone's, filter by pool, user,
    status). POST (admins): assign a pool's tasks to annotators on a track; idempotent."""

    def get_permissions(self) -> list[Any]:
        return [IsAdmin()] if self.request.method == "POST" else [IsAnnotator()]

    @extend_schema(responses=S.ok(AssignmentOut(many=True)))
    def get(self, request: Request) -> Response:
        pool = _int_param(request, "pool")
        if has_role(request.user, Role.ADMIN):
            wanted = request.query_params.get("status") or None
            if wanted and wanted not in AssignmentStatus.values:
                return Response({"status": [f"expected one of {AssignmentStatus.values}"]}, status=400)
            qs = selectors.assignments_all(
                pool_id=pool, username=request.query_params.get("user") or None, status=wanted
            )
        else:
            qs = selectors.assignment_queue(request.user, pool)
        return Response(AssignmentOut(qs[:1000], many=True).data)

    @extend_schema(request=AssignInput, responses=S.ok(S.AssignmentsCreated, 201))
    def post(self, request: Request) -> Response:
        data = AssignInput(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        pool = TaskPool.objects.filter(pk=values["pool"]).first()
        if pool is None:
            return Response({"pool": [f"no task pool {values['pool']}"]}, status=status.HTTP_400_BAD_REQUEST)
        try:
            result = assignments_create(
                pool=pool, usernames=values["users"], track=values["track"], task_ids=values.get("tasks")
            )
        except AssignmentError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_400_BAD_REQUEST)
        return Response(result.__dict__, status=status.HTTP_201_CREATED)


class AssignmentSkipView(APIView):
    permission_classes = [IsAnnotator]

    @extend_schema(request=None, responses=S.ok(AssignmentOut))
    def post(self, request: Request, pk: int) -> Response:
        assignment = Assignment.objects.filter(pk=pk, user=request.user).select_related("task__pool").first()
        if assignment is None:
            raise NotFound("No such assignment of yours.")
        try:
            assignment_skip(assignment=assignment, user=request.user)
        except AssignmentError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        return Response(AssignmentOut(assignment).data)


class WorkloadView(APIView):
    """Admins: per annotator, assignments by status and the sessions they are working right now."""

    permission_classes = [IsAdmin]

    @extend_schema(responses=S.ok(S.WorkloadRow(many=True)))
    def get(self, request: Request) -> Response:
        return Response(selectors.annotator_workload())
