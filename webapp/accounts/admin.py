"""Users in the Django admin with their roles (role = Django group, see `roles.py`)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.db.models import QuerySet
from django.http import HttpRequest

from webapp.accounts.models import ApiToken
from webapp.accounts.roles import ALL_ROLES

User = get_user_model()


class RoleListFilter(admin.SimpleListFilter):
    title = "role"
    parameter_name = "role"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(r.value, r.value) for r in ALL_ROLES] + [("none", "no role")]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        value = self.value()
        if value == "none":
            return queryset.exclude(groups__name__in=[r.value for r in ALL_ROLES]).filter(is_superuser=False)
        if value in {r.value for r in ALL_ROLES}:
            return queryset.filter(groups__name=value).distinct()
        return queryset


if admin.site.is_registered(User):
    admin.site.unregister(User)


@admin.register(User)
class FlywheelUserAdmin(UserAdmin):
    list_display = ["username", "email", "roles", "is_active", "is_staff", "is_superuser", "last_login"]
    list_filter = [RoleListFilter, "is_active", "is_staff", "is_superuser"]

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return super().get_queryset(request).prefetch_related("groups")

    @admin.display(description="roles")
    def roles(self, user: Any) -> str:
        role_names = {r.value for r in ALL_ROLES}
        held = sorted(g.name for g in user.groups.all() if g.name in role_names)
        if user.is_superuser:
            return "superuser (all roles)"
        return ", ".join(held) or "—"


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """API tokens by prefix (the keys are not stored); deleting one revokes it."""

    list_display = ["prefix", "user", "created_at", "expires_at"]
    list_filter = ["user"]
    search_fields = ["prefix", "user__username"]
    readonly_fields = ["user", "prefix", "digest", "created_at", "expires_at"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # a token is made by signing in, which is the only time its key is shown
