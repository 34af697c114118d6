"""Token API: sign in for a new token (`POST /api/auth/token/`), list yours (`GET`), revoke the one in
use (`DELETE /api/auth/token/`) or any of yours (`DELETE /api/auth/token/<id>/`); admins revoke all
of a user's (`DELETE /api/auth/tokens/<user_id>/`)."""

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

from webapp.accounts.models import ApiToken
from webapp.accounts.permissions import IsAdmin
from webapp.accounts.tokens import token_issue, token_revoke


class TokenOutput(serializers.ModelSerializer):
    class Meta:
        model = ApiToken
        fields = ["id", "prefix", "created_at", "expires_at"]
        read_only_fields = fields


_ISSUED = inline_serializer(
    "ApiToken",
    {
        "token": serializers.CharField(help_text="The key: shown this once, never stored."),
        "id": serializers.IntegerField(),
        "prefix": serializers.CharField(),
        "expires_at": serializers.DateTimeField(),
    },
)
_REVOKED = inline_serializer("ApiTokenRevoked", {"revoked": serializers.BooleanField()})


class TokenView(APIView):
    """POST: username + password → a new token. GET: your tokens (never their keys). DELETE: revoke
    the token this request carries (signed in by session: all of yours)."""

    serializer_class = AuthTokenSerializer

    def get_permissions(self):
        return [AllowAny()] if self.request.method == "POST" else [IsAuthenticated()]

    def get_authenticators(self):
        # Obtaining a token needs no session (and so no CSRF token); the rest accepts either.
        if getattr(getattr(self, "request", None), "method", None) == "POST":
            return []
        return super().get_authenticators()

    @extend_schema(request=AuthTokenSerializer, responses={200: _ISSUED}, auth=[])
    def post(self, request: Request) -> Response:
        # The Django request, so django-axes marks a lockout where its middleware looks for it.
        serializer = AuthTokenSerializer(data=request.data, context={"request": request._request})
        serializer.is_valid(raise_exception=True)
        token, key = token_issue(user=serializer.validated_data["user"])
        return Response({"token": key, **TokenOutput(token).data})

    @extend_schema(responses={200: TokenOutput(many=True)})
    def get(self, request: Request) -> Response:
        return Response(TokenOutput(ApiToken.objects.filter(user=request.user), many=True).data)

    @extend_schema(request=None, responses={200: _REVOKED})
    def delete(self, request: Request) -> Response:
        in_use = request.auth.pk if isinstance(request.auth, ApiToken) else None
        return Response({"revoked": token_revoke(user=request.user, token_id=in_use)})


class OwnTokenRevokeView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(operation_id="api_auth_token_revoke_one", request=None, responses={200: _REVOKED})
    def delete(self, request: Request, token_id: int) -> Response:
        if not token_revoke(user=request.user, token_id=token_id):
            raise NotFound("You have no such token.")
        return Response({"revoked": True})


class UserTokenRevokeView(APIView):
    permission_classes = [IsAdmin]

    @extend_schema(request=None, responses={200: _REVOKED})
    def delete(self, request: Request, user_id: int) -> Response:
        user = get_user_model().objects.filter(pk=user_id).first()
        if user is None:
            raise NotFound("No such user.")
        return Response({"revoked": token_revoke(user=user)}, status=status.HTTP_200_OK)
