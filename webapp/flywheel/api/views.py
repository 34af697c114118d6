"""Flywheel API: an overview for the page, datasets (build, card, export), validation settings and
runs, jobs (rejection sampling, merge, refresh, SFT; cancel), promotion, pool difficulty. Reads are
open to researchers and admins; actions to admins."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from webapp.accounts.permissions import IsAdmin, IsResearcherOrAdmin
from webapp.flywheel import selectors
from webapp.flywheel.api import schema as F
from webapp.flywheel.models import DatasetIteration, FlywheelJob, JobKind, PromotionTarget, Split
from webapp.flywheel.services import datasets, jobs, promotion, validation
from webapp.store.checkpoints import CheckpointError
from webapp.store.models import Checkpoint, ExportFormat, TaskPool, TrajectorySource, ValidationMode
from webapp.store.services import StoreError


def _checkpoint(version: str | None) -> Checkpoint | None:
    if not version:
        return None
    found = Checkpoint.objects.filter(version=version).first()
    if found is None:
        raise ValidationError({"checkpoint": [f"no checkpoint {version!r}"]})
    return found


class _ReadWrite(APIView):
    """GET for researchers and admins, POST for admins."""

    def get_permissions(self) -> list[Any]:
        return [IsResearcherOrAdmin()] if self.request.method == "GET" else [IsAdmin()]


class OverviewView(APIView):
    permission_classes = [IsResearcherOrAdmin]

    @extend_schema(responses=F.Overview)
    def get(self, request: Request) -> Response:
        return Response(selectors.flywheel_overview())


class DatasetListView(_ReadWrite):
    class InputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "DatasetBuildInput"  # the component's name in the OpenAPI schema

        name = serializers.CharField(required=False, allow_blank=True, default="")
        sources = serializers.ListField(
            child=serializers.ChoiceField(TrajectorySource.choices), required=False, default=list
        )
        pool = serializers.IntegerField(required=False, allow_null=True, default=None)
        created_after = serializers.DateTimeField(required=False, allow_null=True, default=None)
        created_before = serializers.DateTimeField(required=False, allow_null=True, default=None)

    @extend_schema(operation_id="api_flywheel_datasets_list", responses=F.Dataset(many=True))
    def get(self, request: Request) -> Response:
        return Response([selectors.dataset_json(d) for d in DatasetIteration.objects.all()[:200]])

    @extend_schema(request=InputSerializer, responses={201: F.Dataset})
    def post(self, request: Request) -> Response:
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        filters = {k: (v[k].isoformat() if hasattr(v[k], "isoformat") else v[k])
                   for k in ("sources", "pool", "created_after", "created_before") if v[k]}  # fmt: skip
        try:
            ds = datasets.dataset_build(filters=filters, name=v["name"], user=request.user)
        except datasets.DatasetError as exc:
            raise ValidationError({"detail": str(exc)}) from exc
        return Response(selectors.dataset_json(ds), status=status.HTTP_201_CREATED)


class DatasetDetailView(APIView):
    permission_classes = [IsResearcherOrAdmin]

    @extend_schema(responses=F.Dataset)
    def get(self, request: Request, pk: int) -> Response:
        ds = DatasetIteration.objects.filter(pk=pk).first()
        if ds is None:
            raise NotFound("no such dataset")
        return Response(selectors.dataset_json(ds))


class DatasetExportView(APIView):
    permission_classes = [IsResearcherOrAdmin]

    class InputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "DatasetExportInput"  # the component's name in the OpenAPI schema

        format = serializers.ChoiceField(ExportFormat.choices)
        split = serializers.ChoiceField([("", "both"), *Split.choices], required=False, default="")

    @extend_schema(request=InputSerializer, responses={201: F.ExportStarted})
    def post(self, request: Request, pk: int) -> Response:
        ds = DatasetIteration.objects.filter(pk=pk).first()
        if ds is None:
            raise NotFound("no such dataset")
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            job = datasets.dataset_export(dataset=ds, user=request.user, **data.validated_data)
        except (datasets.DatasetError, StoreError) as exc:
            raise ValidationError({"detail": str(exc)}) from exc
        return Response({"export_job": job.pk, "status": job.status, "filters": job.filters},
                        status=status.HTTP_201_CREATED)  # fmt: skip


class PoolValidationView(_ReadWrite):
    class InputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "PoolValidationInput"  # the component's name in the OpenAPI schema

        mode = serializers.ChoiceField(ValidationMode.choices)
        judge_url = serializers.CharField(required=False, allow_blank=True, default="")
        judge_model = serializers.CharField(required=False, allow_blank=True, default="judge")
        keep_failure_prefix = serializers.BooleanField(required=False, default=True)

    def _pool(self, pk: int) -> TaskPool:
        pool = TaskPool.objects.filter(pk=pk).first()
        if pool is None:
            raise NotFound("no such pool")
        return pool

    def _json(self, pool: TaskPool) -> dict[str, Any]:
        config = validation.pool_validation(pool.pk)
        pool.refresh_from_db()
        return {"pool": pool.pk, "mode": pool.validation_mode, "judge_url": config.judge_url,
                "judge_model": config.judge_model, "keep_failure_prefix": config.keep_failure_prefix}  # fmt: skip

    @extend_schema(responses=F.PoolValidation)
    def get(self, request: Request, pk: int) -> Response:
        return Response(self._json(self._pool(pk)))

    @extend_schema(request=InputSerializer, responses=F.PoolValidation)
    def post(self, request: Request, pk: int) -> Response:
        pool = self._pool(pk)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            validation.pool_validation_set(pool_id=pool.pk, **data.validated_data)
        except validation.ValidationError as exc:
            raise ValidationError({"detail": str(exc)}) from exc
        return Response(self._json(pool))


class PoolDifficultyView(APIView):
    permission_classes = [IsResearcherOrAdmin]

    @extend_schema(responses=F.PoolDifficulty)
    def get(self, request: Request, pk: int) -> Response:
        pool = TaskPool.objects.filter(pk=pk).first()
        if pool is None:
            raise NotFound("no such pool")
        return Response(selectors.pool_difficulty(pool))


class ValidateView(APIView):
    """Validate every finished, unvalidated trajectory (optionally of one pool) with its pool's V(s)."""

    permission_classes = [IsAdmin]

    class InputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "ValidateInput"  # the component's name in the OpenAPI schema

        pool = serializers.IntegerField(required=False, allow_null=True, default=None)

    @extend_schema(request=InputSerializer, responses=F.ValidateCounts)
    def post(self, request: Request) -> Response:
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        return Response(validation.validate_pending(pool_id=data.validated_data["pool"]))


class JobListView(_ReadWrite):
    class InputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "JobCreateInput"  # the component's name in the OpenAPI schema

        kind = serializers.ChoiceField(JobKind.choices)
        checkpoint = serializers.CharField(required=False, allow_blank=True, default="")
        params = serializers.DictField(required=False, default=dict)

    @extend_schema(
        operation_id="api_flywheel_jobs_list",
        parameters=[OpenApiParameter("kind", str, required=False)],
        responses=F.Job(many=True),
    )
    def get(self, request: Request) -> Response:
        qs = FlywheelJob.objects.select_related("checkpoint")
        if request.query_params.get("kind"):
            qs = qs.filter(kind=request.query_params["kind"])
        return Response([selectors.job_json(j) for j in qs[:100]])

    @extend_schema(request=InputSerializer, responses={201: F.Job})
    def post(self, request: Request) -> Response:
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        try:
            with transaction.atomic():
                job = jobs.job_create(kind=v["kind"], params=v["params"], user=request.user,
                                      checkpoint=_checkpoint(v["checkpoint"]))  # fmt: skip
        except (jobs.JobError, ValueError, TypeError) as exc:
            raise ValidationError({"detail": str(exc)}) from exc
        return Response(selectors.job_json(job), status=status.HTTP_201_CREATED)


class JobDetailView(APIView):
    permission_classes = [IsResearcherOrAdmin]

    @extend_schema(responses=F.Job)
    def get(self, request: Request, pk: int) -> Response:
        job = FlywheelJob.objects.select_related("checkpoint").filter(pk=pk).first()
        if job is None:
            raise NotFound("no such job")
        return Response(selectors.job_json(job))


class JobCancelView(APIView):
    permission_classes = [IsAdmin]

    @extend_schema(request=None, responses=F.Job)
    def post(self, request: Request, pk: int) -> Response:
        job = FlywheelJob.objects.filter(pk=pk).first()
        if job is None:
            raise NotFound("no such job")
        return Response(selectors.job_json(jobs.job_cancel(job=job)))


class PromoteView(APIView):
    permission_classes = [IsAdmin]

    class InputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "PromoteInput"  # the component's name in the OpenAPI schema

        checkpoint = serializers.CharField()
        targets = serializers.ListField(child=serializers.ChoiceField(PromotionTarget.choices), min_length=1)
        push_to = serializers.CharField(required=False, allow_blank=True, default="")

    @extend_schema(request=InputSerializer, responses=F.Promoted)
    def post(self, request: Request) -> Response:
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        checkpoint = _checkpoint(v["checkpoint"])
        if checkpoint is None:
            raise ValidationError({"checkpoint": ["name the checkpoint to promote"]})
        try:
            rows = promotion.checkpoint_promote(
                checkpoint=checkpoint,
                targets=v["targets"],
                user=request.user,
                push_to=v["push_to"] or None,
            )
        except (CheckpointError, ValueError) as exc:
            raise ValidationError({"detail": str(exc)}) from exc
        return Response({"checkpoint": checkpoint.version, "targets": [r.target for r in rows]})
