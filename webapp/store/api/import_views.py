"""`POST /api/tasks/import/`: admins upload OSWorld JSON, JSONL / CSV lists or archives of them;
`POST /api/tasks/import/preview/`: the same upload read and validated, nothing written.

Each uploaded file is taken whole or not at all (an archive is one file). With several files (a
folder from the pools page) the good files are imported in one transaction and the refused ones
come back per file with a reason per task; when no file is good: 400 with every issue. 201 (some
task created) / 200 (only updates) with the counts, the imported tasks and the per-file report.
Oversized uploads get 413 before they are read.
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
from webapp.store.importers import (
    FORMATS,
    FileReport,
    SourceFile,
    TaskImportError,
    records_by_file,
    records_collect,
    tasks_import,
)
from webapp.store.importers.sources import is_archive
from webapp.store.importers.types import ImportIssue, max_file_bytes, max_upload_bytes
from webapp.store.job_services import osworld_checks_queue
from webapp.store.models import Task, TaskPool
from webapp.store.names import MAX_PATH_CHARS, validate_relative_path, validate_segment


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
        "refused_files": serializers.IntegerField(help_text="Files not imported (see `files`)."),
        "tasks": TaskSerializer(many=True),
        "files": serializers.ListField(child=serializers.DictField()),
    },
)


class ImportInput(serializers.Serializer):
    pool = serializers.CharField(
        max_length=200,
        validators=[validate_segment],
        help_text="Name of the task pool to import into (one path segment: no '/', '..', control characters).",
    )
    create_pool = serializers.BooleanField(default=False, help_text="Create the pool if it does not exist.")
    format = serializers.ChoiceField(choices=FORMATS, default="auto")
    file = serializers.ListField(
        child=serializers.FileField(),
        required=False,
        help_text="One or more files (repeat the field): OSWorld .json, .jsonl, .csv, or a .zip / .tar.gz / .tgz / .tar of them.",
    )
    path = serializers.ListField(
        child=serializers.CharField(max_length=MAX_PATH_CHARS, validators=[validate_relative_path]),
        required=False,
        help_text="With a folder: each file's path inside it ('sub/tasks.json'), one per `file` in the same "
        "order (browsers send only the base name as the file's name); the reports name files by it.",
    )
    miniwob = serializers.CharField(
        required=False,
        allow_blank=True,
        help_text="MiniWoB++ task names from the wheel, comma-separated; '*' for every task.",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if not attrs.get("file") and not attrs.get("miniwob", "").strip():
            raise serializers.ValidationError("give a file to upload or MiniWoB++ task names")
        paths, files = attrs.get("path"), attrs.get("file") or []
        if paths is not None:
            if len(paths) != len(files):
                raise serializers.ValidationError(
                    {"path": [f"give one path per file: {len(paths)} paths, {len(files)} files"]}
                )
            for i, (given, f) in enumerate(zip(paths, files, strict=True)):
                if given.rsplit("/", 1)[-1] != f.name:
                    raise serializers.ValidationError(
                        {"path": {str(i): [f"{given!r} does not end in the file's name {f.name!r}"]}}
                    )
        return attrs


_FILE_REPORT = serializers.ListField(
    child=serializers.DictField(),
    help_text="Per file: {file, ok, tasks: [{external_id, instruction, env_kind, supported, "
    "unsupported_reasons, importance, exists}], issues: [{file, field, reason, message}]}.",
)
_ISSUES = inline_serializer(
    "TaskImportIssues",
    {"detail": serializers.CharField(), "issues": serializers.ListField(child=serializers.DictField()),
     "files": _FILE_REPORT},
)  # fmt: skip


def _read(request: Request) -> tuple[dict[str, Any] | None, list[FileReport], Response | None]:
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = 0
    if declared > max_upload_bytes():
        return None, [], _too_large(declared)
    serializer = ImportInput(data=request.data)
    serializer.is_valid(raise_exception=True)
    data = serializer.validated_data
    files = data.get("file") or []
    total = sum(f.size for f in files)
    if total > max_upload_bytes():
        return None, [], _too_large(total)
    for f in files:
        if not is_archive(f.name) and f.size > max_file_bytes():
            detail = f"file {f.name} is {f.size} bytes; the per-file limit is {max_file_bytes()} bytes."
            return None, [], Response({"detail": detail}, status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE)
    names = data.get("path") or [f.name for f in files]
    reports = records_by_file(
        [SourceFile(name, f.read()) for name, f in zip(names, files, strict=True)], data["format"]
    )
    if data.get("miniwob", "").strip():
        names = [n.strip() for n in data["miniwob"].split(",") if n.strip()]
        try:
            wob = records_collect(miniwob=[] if names == ["*"] else names)
        except TaskImportError as exc:
            reports.append(FileReport("MiniWoB++", issues=exc.issues))
        else:
            given = {r.external_id: r.origin for rep in reports for r in rep.records}
            clashes = [
                ImportIssue(r.origin, "id", f"duplicate id {r.external_id!r}, also in {given[r.external_id]}")
                for r in wob
                if r.external_id in given
            ]
            reports.append(FileReport("MiniWoB++", records=[] if clashes else wob, issues=clashes))
    return data, reports, None


def _report(reports: list[FileReport], pool_name: str) -> list[dict[str, Any]]:
    pool = TaskPool.objects.filter(name=pool_name.strip()).first()
    ids = [r.external_id for rep in reports for r in rep.records]
    existing = (
        set(Task.objects.filter(pool=pool, external_id__in=ids).values_list("external_id", flat=True))
        if pool
        else set()
    )
    return [
        {"file": rep.file, "ok": rep.ok,
         "tasks": [{"external_id": r.external_id, "instruction": r.instruction, "env_kind": r.env_kind,
                    "source": r.source, "origin": r.origin, "supported": r.supported,
                    "unsupported_reasons": r.unsupported_reasons, "importance": r.importance,
                    "exists": r.external_id in existing} for r in rep.records],
         "issues": [i.as_dict() for i in rep.issues]}
        for rep in reports
    ]  # fmt: skip


def _refused(reports: list[FileReport], body: list[dict[str, Any]]) -> Response:
    issues = [i.as_dict() for rep in reports for i in rep.issues]
    return Response(
        {"detail": f"nothing imported: {len(issues)} issue(s)", "issues": issues, "files": body},
        status=status.HTTP_400_BAD_REQUEST,
    )


class TaskImportPreviewView(APIView):
    permission_classes = [IsAdmin]
    parser_classes = [MultiPartParser, FormParser]

    @extend_schema(
        request={"multipart/form-data": ImportInput},
        responses={
            200: inline_serializer(
                "TaskImportPreview",
                {
                    "pool_exists": serializers.BooleanField(),
                    "importable": serializers.IntegerField(),
                    "refused_files": serializers.IntegerField(),
                    "files": _FILE_REPORT,
                },
            ),
            400: inline_serializer("TaskImportPreviewInvalid", {"detail": serializers.CharField()}),
            413: inline_serializer("TaskImportPreviewTooLarge", {"detail": serializers.CharField()}),
        },
        description="Read and validate an upload as the import would (admins only); nothing is written.",
    )
    def post(self, request: Request) -> Response:
        data, reports, refused = _read(request)
        if refused is not None or data is None:
            return refused or _too_large(0)
        return Response(
            {
                "pool_exists": TaskPool.objects.filter(name=data["pool"].strip()).exists(),
                "importable": sum(len(r.records) for r in reports),
                "refused_files": sum(1 for r in reports if not r.ok),
                "files": _report(reports, data["pool"]),
            }
        )


class TaskImportView(APIView):
    permission_classes = [IsAdmin]
    parser_classes = [MultiPartParser, FormParser]

    @extend_schema(
        request={"multipart/form-data": ImportInput},
        responses={
            201: _RESULT,
            200: _RESULT,
            400: _ISSUES,
            413: inline_serializer("TaskImportTooLarge", {"detail": serializers.CharField()}),
        },
        description="Import tasks (admins only). Each file is imported whole or refused with its issues; "
        "the good files are written in one transaction.",
    )
    def post(self, request: Request) -> Response:
        data, reports, refused = _read(request)
        if refused is not None or data is None:
            return refused or _too_large(0)
        good = [r for r in reports if r.ok]
        body = _report(reports, data["pool"])
        if not good:
            return _refused(reports, body)
        try:
            result = tasks_import(
                pool_name=data["pool"],
                create_pool=data["create_pool"],
                records=[rec for r in good for rec in r.records],
            )
        except TaskImportError as exc:
            return Response(
                {"detail": f"nothing imported: {len(exc.issues)} issue(s)",
                 "issues": [i.as_dict() for i in exc.issues], "files": body},
                status=status.HTTP_400_BAD_REQUEST,
            )  # fmt: skip
        tasks = Task.objects.select_related("pool").in_bulk(result.task_ids)
        # Each enabled OSWorld task is set up and evaluated once with no action, in the background.
        checks = osworld_checks_queue(task_ids=result.task_ids)
        response = {
            "created": result.created,
            "updated": result.updated,
            "unsupported": result.unsupported,
            "refused_files": len(reports) - len(good),
            "osworld_checks_queued": checks,
            "tasks": TaskSerializer([tasks[i] for i in result.task_ids], many=True).data,
            "files": body,
        }
        return Response(response, status=status.HTTP_201_CREATED if result.created else status.HTTP_200_OK)


class PoolOSWorldCheckView(APIView):
    permission_classes = [IsAdmin]

    @extend_schema(
        request=None,
        responses={
            202: inline_serializer("OSWorldCheckQueued", {"queued": serializers.IntegerField()}),
            404: inline_serializer("OSWorldCheckNoPool", {"detail": serializers.CharField()}),
        },
        description="Queue the no-action check for the pool's enabled OSWorld tasks (admins only): each is set "
        "up on a real desktop and evaluated with no action; one that already passes, or whose set-up "
        "fails, is disabled with the reason.",
    )
    def post(self, request: Request, pk: int) -> Response:
        if not TaskPool.objects.filter(pk=pk).exists():
            return Response({"detail": f"no pool {pk}"}, status=status.HTTP_404_NOT_FOUND)
        ids = Task.objects.filter(pool_id=pk).values_list("pk", flat=True)
        return Response({"queued": osworld_checks_queue(task_ids=ids)}, status=status.HTTP_202_ACCEPTED)


urlpatterns = [
    path("pools/<int:pk>/osworld-check/", PoolOSWorldCheckView.as_view(), name="api-pool-osworld-check"),
    path("tasks/import/", TaskImportView.as_view(), name="api-tasks-import"),
    path("tasks/import/preview/", TaskImportPreviewView.as_view(), name="api-tasks-import-preview"),
]
