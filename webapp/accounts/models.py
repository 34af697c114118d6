"""Roles are Django groups (see `roles.py`); the one table of accounts is the API tokens."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class ApiToken(models.Model):
    """An API token, stored as the SHA-256 of its key (the key itself is shown once, at sign-in).

    `prefix` (the key's first characters) finds the row; the digest is then compared in constant
    time. A user may hold several (one per sign-in); each expires on its own and can be revoked."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    prefix = models.CharField(max_length=8, db_index=True)
    digest = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.prefix}… of {self.user_id}"
