"""`POST /api/tasks/import/`: admins upload OSWorld JSON, a JSONL / CSV list or an archive of them.

All-or-nothing like the command: 400 with every issue, or 201 (some task created) / 200 (only
updates) with the counts and the imported tasks. Oversized uploads get 413 before they are read.
"""

from __future__ import annotations

from typing import Any

from django.urls import path
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from webapp.accounts.permissions import IsAdmin
from webapp.store.api.serializers import TaskSerializer
from webapp.store.importers import FORMATS, SourceFile, TaskImportError, task_import_run
from webapp.store.importers.sources import is_archive
from webapp.store.importers.types import max_file_bytes, max_upload_bytes
from webapp.store.models import Task
from webapp.store.names import validate_segment


def _too_large(size: int) -> Response:
    return Response(
        {"detail": f"upload is {size} bytes; the limit is {max_upload_bytes()} bytes. Split the import."},
        status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
    )


_RESULT = inline_serializer(
    "TaskImportResult",
    {
        "created": serializers.IntegerField(),
        "updated": serializers.IntegerField(),
        "unsupported": serializers.IntegerField(help_text="Imported disabled: cannot run locally."),
        "tasks": TaskSerializer(many=True),
    },
)


class TaskImportView(APIView):
    permission_classes = [IsAdmin]
    parser_classes = [MultiPartParser, FormParser]

    class InputSerializer(serializers.Serializer):
        pool = serializers.CharField(
            max_length=200,
            validators=[validate_segment],
            help_text="Name of the task pool to import into (one path segment: no '/', '..', control characters).",
        )
        create_pool = serializers.BooleanField(
            default=False, help_text="Create the pool if it does not exist."
        )
        format = serializers.ChoiceField(choices=FORMATS, default="auto")
        file = serializers.FileField(
            required=False,
            help_text="OSWorld .json, .jsonl, .csv, or a .zip / .tar.gz / .tgz / .tar of them.",
        )
        miniwob = serializers.CharField(
            required=False,
            allow_blank=True,
            help_text="MiniWoB++ task names from the wheel, comma-separated; '*' for every task.",
        )

        def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
            if attrs.get("file") is None and not attrs.get("miniwob", "").strip():
                raise serializers.ValidationError("give a file to upload or MiniWoB++ task names")
            return attrs

    @extend_schema(
        request={"multipart/form-data": InputSerializer},
        responses={
            201: _RESULT,
            200: _RESULT,
            400: inline_serializer(
                "TaskImportIssues",
                {
                    "detail": serializers.CharField(),
                    "issues": serializers.ListField(child=serializers.DictField()),
                },
            ),
            413: inline_serializer("TaskImportTooLarge", {"detail": serializers.CharField()}),
        },
        description="Import tasks (admins only). Nothing is written unless every task in the upload is valid.",
    )
    def post(self, request: Request) -> Response:
        try:
            declared = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            declared = 0
        if declared > max_upload_bytes():
            return _too_large(declared)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        uploads: list[SourceFile] = []
        if data.get("file") is not None:
            upload = data["file"]
            if upload.size > max_upload_bytes():
                return _too_large(upload.size)
            if not is_archive(upload.name) and upload.size > max_file_bytes():
                return Response(
                    {
                        "detail": f"file is {upload.size} bytes; the per-file limit is {max_file_bytes()} bytes."
                    },
                    status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
                )
            uploads.append(SourceFile(upload.name, upload.read()))
        miniwob = None
        if data.get("miniwob", "").strip():
            names = [n for n in data["miniwob"].split(",") if n.strip()]
            miniwob = [] if names == ["*"] else names
        try:
            result = task_import_run(
                pool_name=data["pool"],
                create_pool=data["create_pool"],
                uploads=uploads,
                fmt=data["format"],
                miniwob=miniwob,
            )
        except TaskImportError as exc:
            return Response(
                {
                    "detail": f"nothing imported: {len(exc.issues)} issue(s)",
                    "issues": [i.as_dict() for i in exc.issues],
                },
                status=status.HTTP_400_BAD_REQUEST,
            )
        tasks = Task.objects.select_related("pool").in_bulk(result.task_ids)
        body = {
            "created": result.created,
            "updated": result.updated,
            "unsupported": result.unsupported,
            "tasks": TaskSerializer([tasks[i] for i in result.task_ids], many=True).data,
        }
        return Response(body, status=status.HTTP_201_CREATED if result.created else status.HTTP_200_OK)


urlpatterns = [path("tasks/import/", TaskImportView.as_view(), name="api-tasks-import")]
