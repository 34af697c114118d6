"""The four roles (Django groups) and what each may do."""

from __future__ import annotations

from enum import StrEnum

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser


class Role(StrEnum):
    ANNOTATOR = "annotator"
    REVIEWER = "reviewer"
    RESEARCHER = "researcher"
    ADMIN = "admin"


ALL_ROLES: tuple[Role, ...] = tuple(Role)


def user_roles(user: AbstractBaseUser | AnonymousUser) -> frozenset[Role]:
    """The roles a user holds; superusers hold all of them. Cached on the user object per request."""
    if not user.is_authenticated:
        return frozenset()
    cached = getattr(user, "_flywheel_roles", None)
    if cached is not None:
        return cached
    if getattr(user, "is_superuser", False):
        roles = frozenset(ALL_ROLES)
    else:
        names = set(user.groups.values_list("name", flat=True))
        roles = frozenset(r for r in ALL_ROLES if r.value in names)
    user._flywheel_roles = roles
    return roles


def has_role(user: AbstractBaseUser | AnonymousUser, *roles: Role) -> bool:
    return bool(user_roles(user) & set(roles))
