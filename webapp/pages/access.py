"""Role checks for page views: anonymous users go to the login page, the wrong role gets a 403 page."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse

from webapp.accounts.roles import user_roles
from webapp.pages.nav import PAGES_BY_NAME

View = Callable[..., HttpResponse]  # (request, *url arguments)


def page_view(name: str) -> Callable[[View], View]:
    """Guard a view with the roles that the page table (`nav.PAGES`) gives page `name`."""
    page = PAGES_BY_NAME[name]
    allowed = ", ".join(sorted(role.value for role in page.roles))

    def decorate(view: View) -> View:
        @wraps(view)
        def guarded(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if not page.allows(user_roles(request.user)):
                raise PermissionDenied(f"{page.label} is open to: {allowed}.")
            return view(request, *args, **kwargs)

        return login_required(guarded)

    return decorate
