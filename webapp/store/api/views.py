"""Store API: pools, tasks, trajectories, checkpoints, streamed export and export jobs."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.postgres.aggregates import ArrayAgg
from django.db.models import Count, Q, QuerySet, Value
from django.http import HttpResponse, StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import generics, serializers, status
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.pagination import CursorPagination
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from webapp.accounts.permissions import (
    CanExport,
    CanReadTasks,
    CanReadTrajectories,
    IsAdmin,
    IsResearcherOrAdmin,
)
from webapp.accounts.roles import Role, has_role
from webapp.store import job_services, selectors, services
from webapp.store.api import serializers as out
from webapp.store.api.filters import TrajectoryFilter, export_queryset
from webapp.store.checkpoints import (
    CheckpointError,
    checkpoint_promote_annotation,
    checkpoint_register_endpoint,
)
from webapp.store.export import jobs as export_jobs
from webapp.store.export.stream import aiter_sync, iter_jsonl_chunks
from webapp.store.media import media_response
from webapp.store.models import Checkpoint, ExportFormat, JobStatus
from workers.policy.profiles import PROFILES


class TrajectoryCursorPagination(CursorPagination):
    """Cursor pagination: stable and O(page) however deep a client pages."""

    ordering = "-id"
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 500


class PoolListView(generics.ListAPIView):
    permission_classes = [CanReadTasks]
    serializer_class = out.TaskPoolSerializer

    def get_queryset(self) -> QuerySet:
        # Meta.ordering is not applied to an aggregating query: order explicitly for stable pages.
        return (
            selectors.pools_visible_to(self.request.user)
            .annotate(
                task_count=Count("tasks"),
                env_kinds=ArrayAgg(
                    "tasks__env_kind",
                    distinct=True,
                    default=Value([]),
                    filter=Q(tasks__enabled=True, tasks__supported=True),
                ),
            )
            .order_by("name", "pk")
        )


class TaskListView(generics.ListAPIView):
    permission_classes = [CanReadTasks]
    serializer_class = out.TaskSerializer
    filterset_fields = {
        "pool": ["exact"],
        "pool__name": ["exact"],
        "env_kind": ["exact"],
        "source": ["exact"],
        "enabled": ["exact"],
        "supported": ["exact"],
        "success_rate": ["gte", "lte"],
    }

    def get_queryset(self) -> QuerySet:
        return selectors.tasks_visible_to(self.request.user).order_by("id")


class TaskDetailView(generics.RetrieveUpdateAPIView):
    """Read a task (any role that sees it); admins change difficulty, importance, tags, enabled."""

    permission_classes = [CanReadTasks]
    http_method_names = ["get", "patch", "head", "options"]

    def get_queryset(self) -> QuerySet:
        return selectors.tasks_visible_to(self.request.user)

    def get_serializer_class(self) -> type[serializers.Serializer]:
        return out.TaskUpdateSerializer if self.request.method == "PATCH" else out.TaskSerializer

    def update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        if not has_role(request.user, Role.ADMIN):
            return Response({"detail": "Only admins may change tasks."}, status=status.HTTP_403_FORBIDDEN)
        super().update(request, *args, partial=True)
        task = services.task_rescore(task=self.get_object())
        return Response(out.TaskSerializer(task).data)


class TrajectoryListView(generics.ListAPIView):
    permission_classes = [CanReadTrajectories]
    serializer_class = out.TrajectorySerializer
    pagination_class = TrajectoryCursorPagination
    filterset_class = TrajectoryFilter

    def get_queryset(self) -> QuerySet:
        return selectors.trajectories_visible_to(self.request.user).select_related(
            "task__pool", "checkpoint", "annotator"
        )


class TrajectoryDetailView(generics.RetrieveAPIView):
    permission_classes = [CanReadTrajectories]
    serializer_class = out.TrajectoryDetailSerializer

    def get_queryset(self) -> QuerySet:
        return (
            selectors.trajectories_visible_to(self.request.user)
            .select_related("task__pool", "checkpoint", "annotator")
            .prefetch_related("steps")
        )


def _filtered_trajectories(request: Request, params: Any) -> QuerySet:
    filterset = TrajectoryFilter(params, queryset=selectors.trajectories_visible_to(request.user))
    if not filterset.is_valid():
        raise ValidationError(filterset.errors)
    return export_queryset(filterset)


@extend_schema(
    parameters=[
        OpenApiParameter(
            "format",
            OpenApiTypes.STR,
            enum=["jsonl"],
            description="Only jsonl streams; other formats are archive jobs (POST /api/export-jobs/).",
        ),
    ],
    responses={(200, "application/x-ndjson"): OpenApiTypes.STR},
    description="Stream trajectories matching the filters as JSON lines (one trajectory per line, "
    "steps nested, screenshots as URLs). Memory on the server stays constant whatever the size.",
)
class TrajectoryExportStreamView(APIView):
    permission_classes = [CanExport]

    def get(self, request: Request) -> StreamingHttpResponse:
        fmt = request.query_params.get("format", "jsonl")
        if fmt != "jsonl":
            raise ValidationError(
                {
                    "format": f"'{fmt}' is not streamed; use jsonl here, or POST /api/export-jobs/ for {fmt} archives"
                }
            )
        params = request.query_params.copy()
        params.pop("format", None)
        qs = _filtered_trajectories(request, params)
        chunks = iter_jsonl_chunks(qs)
        is_async = request._request.META.get("wsgi.version") is None
        body = aiter_sync(chunks) if is_async else chunks
        response = StreamingHttpResponse(body, content_type="application/x-ndjson")
        response["Content-Disposition"] = 'attachment; filename="trajectories.jsonl"'
        response["X-Accel-Buffering"] = "no"
        return response


class ExportJobCreateInput(serializers.Serializer):
    format = serializers.ChoiceField(choices=ExportFormat.choices)
    filters = serializers.DictField(required=False, default=dict)


class ExportJobListCreateView(APIView):
    permission_classes = [CanExport]

    @extend_schema(responses=out.ExportJobSerializer(many=True))
    def get(self, request: Request) -> Response:
        jobs = selectors.export_jobs_visible_to(request.user)[:100]
        return Response(out.ExportJobSerializer(jobs, many=True, context={"request": request}).data)

    @extend_schema(request=ExportJobCreateInput, responses={202: out.ExportJobSerializer})
    def post(self, request: Request) -> Response:
        data = ExportJobCreateInput(data=request.data)
        data.is_valid(raise_exception=True)
        filters = {k: v for k, v in data.validated_data["filters"].items()}
        _filtered_trajectories(request, filters)  # validates the filters now, not in the worker
        job = job_services.export_job_create(
            user=request.user, format=data.validated_data["format"], filters=filters
        )
        return Response(out.ExportJobSerializer(job, context={"request": request}).data, status=202)


class ExportJobDetailView(APIView):
    permission_classes = [CanExport]

    def _job(self, request: Request, pk: int):
        job = selectors.export_job_get_for_user(user=request.user, job_id=pk)
        if job is None:
            raise NotFound("No such export job.")
        return job

    @extend_schema(responses=out.ExportJobSerializer)
    def get(self, request: Request, pk: int) -> Response:
        return Response(out.ExportJobSerializer(self._job(request, pk), context={"request": request}).data)


class ExportJobCancelView(ExportJobDetailView):
    @extend_schema(request=None, responses=out.ExportJobSerializer)
    def post(self, request: Request, pk: int) -> Response:
        job = export_jobs.export_job_cancel(job=self._job(request, pk))
        return Response(out.ExportJobSerializer(job, context={"request": request}).data)


class ExportJobDownloadView(ExportJobDetailView):
    @extend_schema(responses={(200, "application/zip"): OpenApiTypes.BINARY})
    def get(self, request: Request, pk: int) -> HttpResponse:
        job = self._job(request, pk)
        if job.status != JobStatus.SUCCEEDED or not job.archive:
            raise ValidationError({"detail": f"export job {pk} is {job.status}; nothing to download yet"})
        return media_response(job.archive.name, attachment_name=f"export-{job.pk}-{job.format}.zip")


class CheckpointListView(generics.ListAPIView):
    permission_classes = [CanReadTrajectories]
    serializer_class = out.CheckpointSerializer
    queryset = Checkpoint.objects.select_related("parent").all()


class EndpointRegisterInput(serializers.Serializer):
    version = serializers.CharField(max_length=100)
    endpoint_url = serializers.URLField(max_length=500)
    profile = serializers.ChoiceField(choices=list(PROFILES))
    notes = serializers.CharField(required=False, allow_blank=True, default="")


class CheckpointEndpointRegisterView(APIView):
    """Admins register an external model server (vLLM) so it can be promoted like a checkpoint."""

    permission_classes = [IsAdmin]

    @extend_schema(request=EndpointRegisterInput, responses={201: out.CheckpointSerializer})
    def post(self, request: Request) -> Response:
        data = EndpointRegisterInput(data=request.data)
        data.is_valid(raise_exception=True)
        if Checkpoint.objects.filter(version=data.validated_data["version"]).exists():
            raise ValidationError({"version": "a checkpoint with this version exists"})
        try:
            checkpoint = checkpoint_register_endpoint(**data.validated_data)
        except CheckpointError as exc:
            raise ValidationError({"detail": str(exc)}) from exc
        return Response(out.CheckpointSerializer(checkpoint).data, status=201)


class CheckpointPromoteView(APIView):
    """Make a checkpoint (or registered endpoint) the annotation model: new annotation sessions use it
    and record its version in every candidate. The platform's policy server loads embedded weights
    at once."""

    permission_classes = [IsAdmin]

    @extend_schema(request=None, responses=out.CheckpointSerializer)
    def post(self, request: Request, pk: int) -> Response:
        checkpoint = Checkpoint.objects.filter(pk=pk).first()
        if checkpoint is None:
            raise NotFound("No such checkpoint.")
        try:
            checkpoint = checkpoint_promote_annotation(
                checkpoint=checkpoint, push_to=settings.POLICY_BASE_URL
            )
        except CheckpointError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_502_BAD_GATEWAY)
        return Response(out.CheckpointSerializer(checkpoint).data)


class MeView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(
        responses=inline_serializer(
            "Me",
            {
                "username": serializers.CharField(),
                "roles": serializers.ListField(child=serializers.CharField()),
            },
        )
    )
    def get(self, request: Request) -> Response:
        from webapp.accounts.roles import user_roles

        return Response(
            {
                "username": request.user.get_username(),
                "roles": sorted(r.value for r in user_roles(request.user)),
            }
        )


class SftJobCreateInput(serializers.Serializer):
    base = serializers.CharField(max_length=100, help_text="version of the checkpoint to fine-tune")
    version = serializers.CharField(max_length=100, help_text="version the new checkpoint gets")
    filters = serializers.DictField(required=False, default=dict, help_text="trajectory filters")
    steps = serializers.IntegerField(min_value=1, max_value=100_000, default=200)
    lr = serializers.FloatField(min_value=1e-7, max_value=1.0, default=1e-3)
    batch_size = serializers.IntegerField(min_value=1, max_value=512, default=16)


class SftJobListCreateView(APIView):
    """Researchers and admins start SFT of a checkpoint on stored trajectories (queue `train`)."""

    permission_classes = [IsResearcherOrAdmin]

    @extend_schema(responses=out.SftJobSerializer(many=True))
    def get(self, request: Request) -> Response:
        from webapp.store.models import SftJob

        jobs = SftJob.objects.select_related("created_by", "base", "result")[:100]
        return Response(out.SftJobSerializer(jobs, many=True).data)

    @extend_schema(request=SftJobCreateInput, responses={202: out.SftJobSerializer})
    def post(self, request: Request) -> Response:
        from webapp.store.job_services import sft_job_create
        from webapp.store.sft_jobs import SftError

        data = SftJobCreateInput(data=request.data)
        data.is_valid(raise_exception=True)
        values = dict(data.validated_data)
        base = Checkpoint.objects.filter(version=values.pop("base")).first()
        if base is None:
            raise ValidationError({"base": "no such checkpoint"})
        try:
            job = sft_job_create(user=request.user, base=base, **values)
        except SftError as exc:
            raise ValidationError({"detail": str(exc)}) from exc
        return Response(out.SftJobSerializer(job).data, status=202)


class SftJobDetailView(APIView):
    permission_classes = [IsResearcherOrAdmin]

    def _job(self, pk: int) -> Any:
        from webapp.store.models import SftJob

        job = SftJob.objects.filter(pk=pk).first()
        if job is None:
            raise NotFound("No such SFT job.")
        return job

    @extend_schema(responses=out.SftJobSerializer)
    def get(self, request: Request, pk: int) -> Response:
        return Response(out.SftJobSerializer(self._job(pk)).data)


class SftJobCancelView(SftJobDetailView):
    @extend_schema(request=None, responses=out.SftJobSerializer)
    def post(self, request: Request, pk: int) -> Response:
        from webapp.store.job_services import sft_job_cancel

        return Response(out.SftJobSerializer(sft_job_cancel(job=self._job(pk))).data)
