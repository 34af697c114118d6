"""Think-aloud API (issue 6).

Annotators, on their own session (`/api/annotation/sessions/<id>/thinkaloud/...`):
- `GET .../thinkaloud/`: state (status, chunks, the next chunk index, per-step words, server clock);
- `PUT .../thinkaloud/chunks/<index>/?start_clock=S[&rtt_ms=R]`: the raw chunk bytes as the body with
  its audio Content-Type (webm, ogg, wav); idempotent by index (201 new, 200 the same bytes again);
- `POST .../thinkaloud/finish/`: queue the full transcription pass;
- `PATCH .../thinkaloud/steps/<index>/ {"thought"}` and `POST .../steps/<index>/move/
  {"direction": "previous"|"next", "count"}`: correct a step's thought or its word boundary.
Reviewers, on a trajectory they review (`/api/annotation/thinkaloud/trajectories/<id>/...`): the same
state, edit and move.
Admins: `GET`/`PUT /api/annotation/thinkaloud/asr/ {"model"}`: the Whisper model (AsrModelView).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.api import schema as S
from annotation.api.views import IsAnnotator, _session
from annotation.models import AnnotationSession
from annotation.review.selectors import trajectory_for_reviewer
from annotation.thinkaloud import services
from annotation.thinkaloud.selectors import asr_models_state, thinkaloud_state
from webapp.accounts.permissions import IsAdmin, _RolePermission
from webapp.accounts.roles import Role


class IsReviewerOrAdmin(_RolePermission):
    roles = (Role.REVIEWER, Role.ADMIN)
    message = "Only reviewers and admins may do this."


def _detail(message: str, code: int) -> Response:
    return Response({"detail": message}, status=code)


def _float(raw: Any, name: str) -> float:
    try:
        return float(raw)
    except (TypeError, ValueError):
        raise services.ChunkRejected(f"query parameter {name} must be a number, got {raw!r}") from None


class ThinkAloudStateView(APIView):
    permission_classes = [IsAnnotator]

    @extend_schema(responses=S.ok(S.ThinkAloudState))
    def get(self, request: Request, pk: int) -> Response:
        return Response(thinkaloud_state(_session(request, pk)))


class ChunkUploadView(APIView):
    """The body is the chunk itself (no multipart): what MediaRecorder gave, as a Blob."""

    permission_classes = [IsAnnotator]
    parser_classes: list[Any] = []

    @extend_schema(
        request={"audio/webm": bytes, "audio/ogg": bytes, "audio/wav": bytes},
        responses={
            **S.ok(S.ThinkAloudChunkStored),
            201: S.ThinkAloudChunkStored,
            413: S.DetailSerializer,
            415: S.DetailSerializer,
        },
    )
    def put(self, request: Request, pk: int, index: int) -> Response:
        session = _session(request, pk)
        if session.user_id != request.user.pk:  # admins see every session; only its annotator speaks
            return _detail("Only the session's annotator may record its audio.", status.HTTP_403_FORBIDDEN)
        limit = settings.THINKALOUD_MAX_CHUNK_BYTES
        try:
            declared = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            declared = 0
        if declared > limit:  # refuse before reading the body
            return _detail(f"chunk is {declared} bytes, more than the limit of {limit}", 413)
        try:
            if "start_clock" not in request.query_params:
                raise services.ChunkRejected(
                    "query parameter start_clock (session-clock seconds) is required"
                )
            start = _float(request.query_params["start_clock"], "start_clock")
            rtt = request.query_params.get("rtt_ms")
            chunk, created = services.chunk_upload(
                session=session, index=index, start_clock=start, data=request._request.read(limit + 1),
                content_type=request.META.get("CONTENT_TYPE", ""),
                clock_rtt_ms=_float(rtt, "rtt_ms") if rtt not in (None, "") else None,
            )  # fmt: skip
        except services.ChunkRejected as exc:
            return _detail(str(exc), exc.status)
        body = {
            "index": chunk.index,
            "start_clock": chunk.start_clock,
            "duration_s": chunk.duration_s,
            "size": chunk.size,
            "created": created,
        }
        return Response(body, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)


class ThinkAloudFinishView(APIView):
    permission_classes = [IsAnnotator]

    @extend_schema(request=None, responses=S.ok(S.ThinkAloudState, 202))
    def post(self, request: Request, pk: int) -> Response:
        session = _session(request, pk)
        if session.user_id != request.user.pk:
            return _detail("Only the session's annotator may record its audio.", status.HTTP_403_FORBIDDEN)
        try:
            recording = services.recording_finish(session=session)
        except services.ThinkAloudConflict as exc:
            return _detail(str(exc), status.HTTP_409_CONFLICT)
        return Response(thinkaloud_state(session, recording), status=status.HTTP_202_ACCEPTED)


class ThoughtInput(serializers.Serializer):
    thought = serializers.CharField(allow_blank=True, max_length=5000, trim_whitespace=True)


class MoveInput(serializers.Serializer):
    direction = serializers.ChoiceField(choices=["previous", "next"])
    count = serializers.IntegerField(min_value=1, default=1)


def _edit(session: AnnotationSession, request: Request, index: int) -> Response:
    data = ThoughtInput(data=request.data)
    data.is_valid(raise_exception=True)
    try:
        services.step_thought_edit(session=session, step_index=index, text=data.validated_data["thought"])
    except services.ThinkAloudConflict as exc:
        return _detail(str(exc), status.HTTP_404_NOT_FOUND)
    return Response(thinkaloud_state(session))


def _move(session: AnnotationSession, request: Request, index: int) -> Response:
    data = MoveInput(data=request.data)
    data.is_valid(raise_exception=True)
    try:
        services.step_words_move(
            session=session, step_index=index, direction=data.validated_data["direction"],
            count=data.validated_data["count"],
        )  # fmt: skip
    except services.ThinkAloudConflict as exc:
        return _detail(str(exc), status.HTTP_409_CONFLICT)
    return Response(thinkaloud_state(session))


class StepThoughtView(APIView):
    permission_classes = [IsAnnotator]

    @extend_schema(request=ThoughtInput, responses=S.ok(S.ThinkAloudState))
    def patch(self, request: Request, pk: int, index: int) -> Response:
        return _edit(_session(request, pk), request, index)


class StepMoveView(APIView):
    permission_classes = [IsAnnotator]

    @extend_schema(request=MoveInput, responses=S.ok(S.ThinkAloudState))
    def post(self, request: Request, pk: int, index: int) -> Response:
        return _move(_session(request, pk), request, index)


def _reviewed_session(request: Request, trajectory_id: int) -> AnnotationSession:
    trajectory = trajectory_for_reviewer(request.user, trajectory_id)
    session = (
        AnnotationSession.objects.select_related("task").filter(trajectory=trajectory).first()
        if trajectory is not None
        else None
    )
    if session is None:
        raise NotFound("No think-aloud for this trajectory among yours to review.")
    return session


class ReviewThinkAloudView(APIView):
    permission_classes = [IsReviewerOrAdmin]

    @extend_schema(responses=S.ok(S.ThinkAloudState))
    def get(self, request: Request, trajectory_id: int) -> Response:
        return Response(thinkaloud_state(_reviewed_session(request, trajectory_id)))


class ReviewStepThoughtView(APIView):
    permission_classes = [IsReviewerOrAdmin]

    @extend_schema(request=ThoughtInput, responses=S.ok(S.ThinkAloudState))
    def patch(self, request: Request, trajectory_id: int, index: int) -> Response:
        return _edit(_reviewed_session(request, trajectory_id), request, index)


class ReviewStepMoveView(APIView):
    permission_classes = [IsReviewerOrAdmin]

    @extend_schema(request=MoveInput, responses=S.ok(S.ThinkAloudState))
    def post(self, request: Request, trajectory_id: int, index: int) -> Response:
        return _move(_reviewed_session(request, trajectory_id), request, index)


class AsrModelInput(serializers.Serializer):
    model = serializers.CharField(max_length=32)


class AsrModelView(APIView):
    """Admins: which Whisper model transcribes think-aloud (`GET`), and choosing one (`PUT {"model"}`):
    refused with 400 unless its package is installed and its files match their pinned SHA-256."""

    permission_classes = [IsAdmin]

    @extend_schema(responses=S.ok(S.AsrModels))
    def get(self, request: Request) -> Response:
        return Response(asr_models_state())

    @extend_schema(request=AsrModelInput, responses=S.ok(S.AsrModels))
    def put(self, request: Request) -> Response:
        data = AsrModelInput(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            services.asr_model_set(model=data.validated_data["model"], user=request.user)
        except services.AsrModelRejected as exc:
            return _detail(str(exc), status.HTTP_400_BAD_REQUEST)
        return Response(asr_models_state())
