"""Annotation API: start a session, read its state, decide, submit, abandon, heartbeat."""

from __future__ import annotations

import time
from typing import Any

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation import selectors, services
from annotation.api import schema as S
from annotation.api.schema import (
    SESSION_CREATED_RESPONSES,
    SESSION_RESPONSES,
)
from annotation.models import AnnotationSession
from annotation.services.decisions import DECISION_KINDS
from webapp.accounts.permissions import _RolePermission
from webapp.accounts.roles import Role
from webapp.fleet import services as fleet
from webapp.store.selectors import tasks_visible_to


class IsAnnotator(_RolePermission):
    roles = (Role.ANNOTATOR, Role.ADMIN)
    message = "Only annotators may annotate."


def _error(exc: Exception, code: int) -> Response:
    return Response({"detail": str(exc)}, status=code)


def _session(request: Request, pk: int) -> AnnotationSession:
    session = selectors.sessions_visible_to(request.user).filter(pk=pk).first()
    if session is None:
        raise NotFound("No such annotation session.")
    return session


class SessionStartInput(serializers.Serializer):
    task = serializers.IntegerField(required=False, help_text="Task id; omit to take the next assigned task.")
    pool = serializers.IntegerField(
        required=False, help_text="With no task: take the next task of this pool."
    )
    track = serializers.ChoiceField(choices=["expert", "novice"], required=False)


class SessionListStartView(APIView):
    permission_classes = [IsAnnotator]

    @extend_schema(responses=S.ok(S.SessionRow(many=True)))
    def get(self, request: Request) -> Response:
        sessions = selectors.sessions_visible_to(request.user)[:100]
        return Response(
            [
                {"id": s.pk, "status": s.status, "task": s.task.external_id, "pool": s.task.pool.name,
                 "steps": s.trajectory.num_steps if s.trajectory_id else 0, "created_at": s.created_at}
                for s in sessions
            ]
        )  # fmt: skip

    @extend_schema(request=SessionStartInput, responses=SESSION_CREATED_RESPONSES)
    def post(self, request: Request) -> Response:
        data = SessionStartInput(data=request.data)
        data.is_valid(raise_exception=True)
        track = data.validated_data.get("track")
        if "task" in data.validated_data:
            task = get_object_or_404(tasks_visible_to(request.user), pk=data.validated_data["task"])
        else:
            assignment = selectors.next_assignment(request.user, data.validated_data.get("pool"))
            if assignment is None:
                return _error(NotFound("No task is assigned to you."), status.HTTP_404_NOT_FOUND)
            task, track = assignment.task, track or assignment.track
        try:
            session = services.session_start(user=request.user, task=task, track=track or "expert")
        except fleet.NoEnvironmentAvailable as exc:
            return _error(exc, status.HTTP_503_SERVICE_UNAVAILABLE)
        except services.SessionConflict as exc:
            return _error(exc, status.HTTP_409_CONFLICT)
        except (fleet.LeaseLost, fleet.EnvCallFailed) as exc:
            return _error(exc, status.HTTP_502_BAD_GATEWAY)
        return Response(selectors.session_state(session), status=status.HTTP_201_CREATED)


class SessionDetailView(APIView):
    permission_classes = [IsAnnotator]

    @extend_schema(responses=SESSION_RESPONSES)
    def get(self, request: Request, pk: int) -> Response:
        return Response(selectors.session_state(_session(request, pk)))


class DecisionInput(serializers.Serializer):
    kind = serializers.ChoiceField(choices=DECISION_KINDS)
    obs_version = serializers.IntegerField()
    index = serializers.IntegerField(required=False, allow_null=True)
    thought = serializers.CharField(required=False, allow_blank=True, max_length=20000)
    action_text = serializers.CharField(required=False, allow_blank=True, max_length=20000)
    convention = serializers.ChoiceField(
        choices=["screen", "relative_1000", "relative_999", "absolute_resized"], required=False
    )
    answer = serializers.CharField(required=False, allow_blank=True, max_length=20000)
    time_taken_ms = serializers.IntegerField(required=False, min_value=0)
    takeover = serializers.BooleanField(required=False, default=False)


class SessionDecideView(APIView):
    permission_classes = [IsAnnotator]

    @extend_schema(request=DecisionInput, responses=S.ok(S.DecideResult))
    def post(self, request: Request, pk: int) -> Response:
        session = _session(request, pk)
        data = DecisionInput(data=request.data)
        data.is_valid(raise_exception=True)
        values: dict[str, Any] = dict(data.validated_data)
        kind = values.pop("kind")
        timings: dict[str, float] = {}
        try:
            result = services.session_decide(
                session_id=session.pk, user=request.user, kind=kind, data=values, timings=timings
            )
        except services.DecisionInvalid as exc:
            return _error(exc, status.HTTP_400_BAD_REQUEST)
        except services.SessionConflict as exc:
            return _error(exc, status.HTTP_409_CONFLICT)
        started = time.perf_counter()
        session.refresh_from_db()
        response = Response({**result, "state": selectors.session_state(session)})
        timings["state"] = round((time.perf_counter() - started) * 1000, 1)
        # where the time went, for the browser's developer tools and `bench team`
        response["Server-Timing"] = ", ".join(f"{name};dur={ms}" for name, ms in timings.items())
        return response


class SessionSubmitView(APIView):
    permission_classes = [IsAnnotator]

    @extend_schema(request=None, responses=SESSION_RESPONSES)
    def post(self, request: Request, pk: int) -> Response:
        session = _session(request, pk)
        try:
            services.session_submit(session=session)
        except services.SessionConflict as exc:
            return _error(exc, status.HTTP_409_CONFLICT)
        return Response(selectors.session_state(session))


class SessionAbandonView(APIView):
    permission_classes = [IsAnnotator]

    @extend_schema(request=None, responses=SESSION_RESPONSES)
    def post(self, request: Request, pk: int) -> Response:
        session = services.session_abandon(session=_session(request, pk), reason="abandoned by the annotator")
        return Response(selectors.session_state(session))


class SessionHeartbeatView(APIView):
    permission_classes = [IsAnnotator]

    @extend_schema(request=None, responses=S.ok(S.Heartbeat))
    def post(self, request: Request, pk: int) -> Response:
        return Response({"lease": services.session_heartbeat(session=_session(request, pk))})


class VncInput(serializers.Serializer):
    read_only = serializers.BooleanField(required=False, default=False)


class SessionVncView(APIView):
    """A VNC proxy URL for the session's desktop, for its annotator (drive) or an admin (watch)."""

    permission_classes = [IsAnnotator]

    @extend_schema(request=VncInput, responses={**S.ok(S.VncGrant), 410: S.DetailSerializer})
    def post(self, request: Request, pk: int) -> Response:
        session = _session(request, pk)
        data = VncInput(data=request.data)
        data.is_valid(raise_exception=True)
        if session.status != "active":
            return _error(
                services.SessionConflict(f"session {pk} is {session.status}"), status.HTTP_409_CONFLICT
            )
        read_only = data.validated_data["read_only"] or session.user_id != request.user.pk
        from annotation.services.common import session_lease

        try:
            grant = fleet.vnc_token_mint(
                lease=session_lease(session), session_key=f"annotation:{session.pk}",
                user_id=request.user.pk, read_only=read_only,
            )  # fmt: skip
        except fleet.EnvCallFailed as exc:
            return _error(exc, status.HTTP_409_CONFLICT)
        except fleet.LeaseLost as exc:
            return _error(exc, status.HTTP_410_GONE)
        return Response(grant)


class TakeoverEndInput(serializers.Serializer):
    thought = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=20000,
        help_text="What the annotator did by hand, and why.",
    )


class SessionTakeoverEndView(APIView):
    """Hand control back after driving the desktop: the recorded input becomes `takeover` steps,
    the screen is observed again and the model proposes for it."""

    permission_classes = [IsAnnotator]

    @extend_schema(request=TakeoverEndInput, responses=S.ok(S.TakeoverEnded))
    def post(self, request: Request, pk: int) -> Response:
        from annotation.services.takeover import takeover_end

        session = _session(request, pk)
        data = TakeoverEndInput(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            result = takeover_end(
                session_id=session.pk, user=request.user, thought=data.validated_data.get("thought", "")
            )
        except services.SessionConflict as exc:
            return _error(exc, status.HTTP_409_CONFLICT)
        session.refresh_from_db()
        return Response({**result, "state": selectors.session_state(session)})


class SessionTakeoverStartView(APIView):
    """The annotator takes the controls: their input (recorded by the VNC proxy) and, on desktops,
    the screen before each action are recorded until they hand control back."""

    permission_classes = [IsAnnotator]

    @extend_schema(request=None, responses=S.ok(S.TakeoverStarted))
    def post(self, request: Request, pk: int) -> Response:
        from annotation.services.takeover import takeover_start

        session = _session(request, pk)
        try:
            return Response(takeover_start(session_id=session.pk, user=request.user))
        except services.SessionConflict as exc:
            return _error(exc, status.HTTP_409_CONFLICT)
