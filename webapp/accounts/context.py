"""Template context: the current user's roles, for navigation."""

from __future__ import annotations

from typing import Any

from webapp.accounts.roles import user_roles


def roles(request: Any) -> dict[str, Any]:
    held = user_roles(request.user) if hasattr(request, "user") else frozenset()
    return {"user_roles": sorted(r.value for r in held)}
