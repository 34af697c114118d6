"""DRF permission classes by role."""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import BasePermission

from webapp.accounts.roles import Role, has_role


class _RolePermission(BasePermission):
    roles: tuple[Role, ...] = ()
    message = "Your role does not allow this."

    def has_permission(self, request: Any, view: Any) -> bool:
        return bool(request.user and request.user.is_authenticated and has_role(request.user, *self.roles))


class IsAdmin(_RolePermission):
    roles = (Role.ADMIN,)
    message = "Only admins may do this."


class IsResearcherOrAdmin(_RolePermission):
    roles = (Role.RESEARCHER, Role.ADMIN)
    message = "Only researchers and admins may do this."


class CanReadTrajectories(_RolePermission):
    """Everyone with a role reads trajectories; the selector narrows what annotators and reviewers see."""

    roles = (Role.ANNOTATOR, Role.REVIEWER, Role.RESEARCHER, Role.ADMIN)
    message = "You need a role to read trajectories."


class CanExport(_RolePermission):
    roles = (Role.RESEARCHER, Role.ADMIN)
    message = "Only researchers and admins may export trajectories."


class CanReadTasks(_RolePermission):
    roles = (Role.ANNOTATOR, Role.REVIEWER, Role.RESEARCHER, Role.ADMIN)
    message = "You need a role to read tasks."
