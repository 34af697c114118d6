"""Token API: obtain (`POST /api/auth/token/`), revoke your own (`DELETE /api/auth/token/`), and
admins revoke anyone's (`DELETE /api/auth/tokens/<user_id>/`)."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.authtoken.serializers import AuthTokenSerializer
from rest_framework.exceptions import NotFound
from rest_framework.permissions import AllowAny, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from webapp.accounts.permissions import IsAdmin
from webapp.accounts.tokens import token_expires_at, token_issue, token_revoke

_TOKEN = inline_serializer(
    "ApiToken", {"token": serializers.CharField(), "expires_at": serializers.DateTimeField()}
)
_REVOKED = inline_serializer("ApiTokenRevoked", {"revoked": serializers.BooleanField()})


class TokenView(APIView):
    """POST: username + password → token (the same one until it expires). DELETE: revoke yours."""

    serializer_class = AuthTokenSerializer

    def get_permissions(self):
        return [AllowAny()] if self.request.method == "POST" else [IsAuthenticated()]

    def get_authenticators(self):
        # Obtaining a token needs no session (and so no CSRF token); revoking accepts either.
        if getattr(getattr(self, "request", None), "method", None) == "POST":
            return []
        return super().get_authenticators()

    @extend_schema(request=AuthTokenSerializer, responses={200: _TOKEN}, auth=[])
    def post(self, request: Request) -> Response:
        # The Django request, so django-axes marks a lockout where its middleware looks for it.
        serializer = AuthTokenSerializer(data=request.data, context={"request": request._request})
        serializer.is_valid(raise_exception=True)
        token = token_issue(user=serializer.validated_data["user"])
        return Response({"token": token.key, "expires_at": token_expires_at(token)})

    @extend_schema(request=None, responses={200: _REVOKED})
    def delete(self, request: Request) -> Response:
        return Response({"revoked": token_revoke(user=request.user)})


class UserTokenRevokeView(APIView):
    permission_classes = [IsAdmin]

    @extend_schema(request=None, responses={200: _REVOKED})
    def delete(self, request: Request, user_id: int) -> Response:
        user = get_user_model().objects.filter(pk=user_id).first()
        if user is None:
            raise NotFound("No such user.")
        return Response({"revoked": token_revoke(user=user)}, status=status.HTTP_200_OK)
