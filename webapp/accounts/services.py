"""Writes for users and roles."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.db import transaction

from webapp.accounts.roles import ALL_ROLES, Role

# Django-admin permissions per role (app_label.codename). Admins get every store/annotation/rl permission.
_ROLE_PERMISSIONS: dict[Role, list[str]] = {
    Role.ANNOTATOR: [],
    Role.REVIEWER: ["store.view_trajectory", "store.view_step"],
    Role.RESEARCHER: ["store.view_trajectory", "store.view_step", "store.view_task", "store.view_taskpool"],
    Role.ADMIN: ["*"],
}


def roles_ensure() -> dict[Role, Group]:
    """Create the role groups and their admin permissions; idempotent."""
    groups: dict[Role, Group] = {}
    for role in ALL_ROLES:
        group, _ = Group.objects.get_or_create(name=role.value)
        wanted = _ROLE_PERMISSIONS[role]
        if wanted == ["*"]:
            perms = Permission.objects.filter(
                content_type__app_label__in=["store", "annotation", "rl_control", "auth", "accounts"]
            )
        else:
            perms = Permission.objects.none()
            for dotted in wanted:
                app_label, codename = dotted.split(".")
                perms = perms | Permission.objects.filter(
                    content_type__app_label=app_label, codename=codename
                )
        group.permissions.set(perms)
        groups[role] = group
    return groups


@transaction.atomic
def user_create(*, username: str, password: str, roles: list[Role], email: str = "") -> Any:
    """Create (or update the password and roles of) a user holding `roles`."""
    groups = roles_ensure()
    user_model = get_user_model()
    user, _ = user_model.objects.get_or_create(username=username, defaults={"email": email})
    user.set_password(password)
    # Admins use Django admin for pools and tasks, so they need staff status.
    user.is_staff = Role.ADMIN in roles
    user.save()
    user.groups.set([groups[r] for r in roles])
    return user
