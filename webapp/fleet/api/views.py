"""The fleet API: the whole environment fleet for the fleet page, and a read-only Watch of any
desktop in it (researchers and admins)."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from webapp.accounts.permissions import IsResearcherOrAdmin
from webapp.fleet import selectors, services

MAX_ENV_ID = 64


class FleetView(APIView):
    """Every env host (heartbeat age) and environment (kind, state, health, age, boot time, lease
    owner with a link: an RL run, an annotation session, a flywheel job)."""

    permission_classes = [IsResearcherOrAdmin]

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request) -> Response:
        return Response(selectors.fleet_overview())


class FleetEnvWatchView(APIView):
    """A read-only VNC proxy URL for one live desktop of the fleet; its lease is left untouched."""

    permission_classes = [IsResearcherOrAdmin]

    @extend_schema(request=None, responses={200: OpenApiTypes.OBJECT, 404: OpenApiTypes.OBJECT,
                                            409: OpenApiTypes.OBJECT, 410: OpenApiTypes.OBJECT})  # fmt: skip
    def post(self, request: Request, env_id: str) -> Response:
        if len(env_id) > MAX_ENV_ID or not selectors.fleet_env(env_id):
            raise NotFound("No such environment in the fleet.")
        try:
            grant = services.env_watch_grant(
                env_id=env_id, session_key=f"fleet:{request.user.pk}", user_id=request.user.pk
            )
        except services.LeaseLost as exc:
            return Response({"detail": f"environment {env_id} is {exc.state}"}, status=status.HTTP_410_GONE)
        except services.EnvCallFailed as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        return Response(grant)
