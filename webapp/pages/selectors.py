"""Reads that pages render on the server (the rest comes from the REST API in the browser)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.contrib.auth import get_user_model

from webapp.accounts.roles import ALL_ROLES

_ROLE_NAMES = {role.value for role in ALL_ROLES}


@dataclass(frozen=True)
class UserRow:
    username: str
    roles: list[str]
    is_active: bool
    is_superuser: bool
    last_login: datetime | None


def users_overview(*, limit: int = 50) -> tuple[list[UserRow], int]:
    """Up to `limit` users by name with their roles, and how many users there are in all."""
    users = get_user_model().objects.order_by("username").prefetch_related("groups")
    rows = [
        UserRow(
            username=user.get_username(),
            roles=sorted(g.name for g in user.groups.all() if g.name in _ROLE_NAMES),
            is_active=user.is_active,
            is_superuser=user.is_superuser,
            last_login=user.last_login,
        )
        for user in users[:limit]
    ]
    return rows, users.count()
