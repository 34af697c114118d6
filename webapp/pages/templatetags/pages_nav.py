"""Navigation for the current user, from the page table in `webapp.pages.nav`."""

from __future__ import annotations

from typing import Any

from django import template

from webapp.accounts.roles import user_roles
from webapp.pages.nav import NavLink, nav_links, tool_links

register = template.Library()


@register.simple_tag(takes_context=True)
def page_links(context: dict[str, Any]) -> list[NavLink]:
    request = context["request"]
    return nav_links(user_roles(request.user), request.path)


@register.simple_tag(takes_context=True)
def tools(context: dict[str, Any]) -> list[NavLink]:
    return tool_links(user_roles(context["request"].user))
