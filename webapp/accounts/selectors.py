"""Reads for users and roles."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db.models import QuerySet

from webapp.accounts.roles import Role


def users_with_role(role: Role) -> QuerySet:
    return get_user_model().objects.filter(groups__name=role.value, is_active=True).order_by("username")
