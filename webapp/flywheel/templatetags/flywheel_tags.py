"""`{% flywheel_overview as ov %}`: the flywheel page's server-rendered data (the page view stays a
plain render in webapp/pages)."""

from __future__ import annotations

from typing import Any

from django import template

from webapp.flywheel.selectors import flywheel_overview, pool_difficulty
from webapp.store.models import TaskPool

register = template.Library()


@register.simple_tag
def flywheel_data() -> dict[str, Any]:
    data = flywheel_overview()
    pool = TaskPool.objects.order_by("-flywheel_refreshes__created_at", "name").first()
    data["difficulty"] = pool_difficulty(pool) if pool is not None else None
    return data
