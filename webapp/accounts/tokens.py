"""API tokens (`Authorization: Token <key>`), Knox-style: only the SHA-256 of a key is stored.

Every sign-in (`POST /api/auth/token/`) issues a new random key, returned that once; a token is valid
for `API_TOKEN_TTL_S` after it was issued and until it is revoked (your own: `DELETE
/api/auth/token/` for the one in use, `DELETE /api/auth/token/<id>/` for any; an admin: all of a
user's). The row holds the key's first characters (to find it) and its digest (compared in constant
time), so a copy of the database holds no usable key.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone
from rest_framework.authentication import TokenAuthentication
from rest_framework.exceptions import AuthenticationFailed

from webapp.accounts.models import ApiToken

PREFIX_CHARS = 8


def token_digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def token_issue(*, user: Any) -> tuple[ApiToken, str]:
    """A new token for `user`: its row and its key (the only time the key exists in the clear).
    The user's expired tokens are forgotten on the way (they authenticate nobody)."""
    now = timezone.now()
    ApiToken.objects.filter(user=user, expires_at__lte=now).delete()
    key = secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        user=user,
        prefix=key[:PREFIX_CHARS],
        digest=token_digest(key),
        expires_at=now + timedelta(seconds=settings.API_TOKEN_TTL_S),
    )
    return token, key


def token_find(key: str) -> ApiToken | None:
    """The token whose key is `key` (expired or not), or None."""
    digest = token_digest(key)
    for token in ApiToken.objects.select_related("user").filter(prefix=key[:PREFIX_CHARS]):
        if hmac.compare_digest(token.digest, digest):
            return token
    return None


def token_revoke(*, user: Any, token_id: int | None = None) -> bool:
    """Delete one of `user`'s tokens (`token_id`), or all of them, and every VNC token minted for the
    user (a live-desktop grant must not outlive the credential it was minted under); True when an API
    token was deleted."""
    from webapp.fleet.services import vnc_tokens_revoke_user

    tokens = ApiToken.objects.filter(user=user)
    if token_id is not None:
        tokens = tokens.filter(pk=token_id)
    deleted, _ = tokens.delete()
    vnc_tokens_revoke_user(user_id=user.pk)
    return bool(deleted)


class ExpiringTokenAuthentication(TokenAuthentication):
    """`Authorization: Token <key>`: the key's digest must match a token that has not expired."""

    def authenticate_credentials(self, key: str) -> tuple[Any, ApiToken]:
        token = token_find(key) if "\x00" not in key else None
        if token is None:
            raise AuthenticationFailed("Invalid token.")
        if timezone.now() >= token.expires_at:
            raise AuthenticationFailed("Token expired; get a new one from POST /api/auth/token/.")
        if not token.user.is_active:
            raise AuthenticationFailed("User inactive or deleted.")
        return token.user, token
