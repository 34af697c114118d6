"""What a locked-out client sees (django-axes, `AXES_LOCKOUT_CALLABLE`): 429 with the cool-off time,
as JSON for the API and as the sign-in page with a message for browsers."""

from __future__ import annotations

import math
from typing import Any

from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render


def lockout_message() -> str:
    minutes = max(1, math.ceil(settings.AXES_COOLOFF_TIME.total_seconds() / 60))
    return (
        f"Too many failed sign-in attempts for this account from your address. "
        f"Sign-in is locked for {minutes} minute{'s' if minutes != 1 else ''}; try again later."
    )


def lockout_response(request: HttpRequest, *_: Any) -> HttpResponse:
    """Axes calls this with (request, original_response, credentials) or (request, credentials)."""
    retry_after = str(int(settings.AXES_COOLOFF_TIME.total_seconds()))
    if request.path.startswith("/api/"):
        response: HttpResponse = JsonResponse({"detail": lockout_message()}, status=429)
    else:
        context = {"form": AuthenticationForm(request), "lockout_message": lockout_message()}
        response = render(request, "registration/login.html", context, status=429)
    response["Retry-After"] = retry_after
    return response
