"""API tokens: one per user, valid for `API_TOKEN_TTL_S` from when it was issued, revocable.

Issuing replaces an expired token with a new key; revoking deletes it (the next request with it gets
401). `ExpiringTokenAuthentication` is DRF's token authentication plus the expiry check.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from rest_framework.authentication import TokenAuthentication
from rest_framework.authtoken.models import Token
from rest_framework.exceptions import AuthenticationFailed


def token_expires_at(token: Token) -> datetime:
    return token.created + timedelta(seconds=settings.API_TOKEN_TTL_S)


def token_is_expired(token: Token) -> bool:
    return timezone.now() >= token_expires_at(token)


@transaction.atomic
def token_issue(*, user: Any) -> Token:
    """The user's valid token, or a new one when there is none or it has expired."""
    token = Token.objects.select_for_update().filter(user=user).first()
    if token is not None and not token_is_expired(token):
        return token
    if token is not None:
        token.delete()
    return Token.objects.create(user=user)


def token_revoke(*, user: Any) -> bool:
    """Delete the user's token and every VNC token minted for them; True when there was an API token."""
    from webapp.fleet.services import vnc_tokens_revoke_user

    deleted, _ = Token.objects.filter(user=user).delete()
    vnc_tokens_revoke_user(user_id=user.pk)
    return bool(deleted)


class ExpiringTokenAuthentication(TokenAuthentication):
    """`Authorization: Token <key>`, refused once the token is older than API_TOKEN_TTL_S."""

    def authenticate_credentials(self, key: str) -> tuple[Any, Token]:
        if "\x00" in key:
            raise AuthenticationFailed("Invalid token.")
        user, token = super().authenticate_credentials(key)
        if token_is_expired(token):
            raise AuthenticationFailed("Token expired; get a new one from POST /api/auth/token/.")
        return user, token
