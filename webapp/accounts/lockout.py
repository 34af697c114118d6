"""What a locked-out client sees (django-axes, `AXES_LOCKOUT_CALLABLE`): 429 with the time left and
how retries count, as JSON for the API and as the sign-in page with a message for browsers.

The lock runs `AXES_COOLOFF_TIME` from the failure that set it; attempts during the lock, even with
the right password, are refused and do not extend it (`AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT`
off)."""

from __future__ import annotations

import math
from typing import Any

from axes.helpers import get_client_username
from axes.models import AccessAttempt
from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils import timezone


def _seconds_left(request: HttpRequest, credentials: dict[str, Any] | None) -> int:
    cooloff = settings.AXES_COOLOFF_TIME.total_seconds()
    username = get_client_username(request, credentials)
    attempt = (
        AccessAttempt.objects.filter(username=username, ip_address=getattr(request, "axes_ip_address", None))
        .order_by("-attempt_time")
        .first()
    )
    if attempt is None:
        return int(cooloff)
    return max(1, math.ceil(cooloff - (timezone.now() - attempt.attempt_time).total_seconds()))


def lockout_message(seconds_left: int | None = None) -> str:
    seconds = settings.AXES_COOLOFF_TIME.total_seconds() if seconds_left is None else seconds_left
    minutes = max(1, math.ceil(seconds / 60))
    return (
        f"Too many failed sign-in attempts for this account from your address. "
        f"Sign-in is locked for {minutes} more minute{'s' if minutes != 1 else ''}. "
        f"Attempts during the lock, even with the right password, are refused and do not extend it."
    )


def lockout_response(request: HttpRequest, *args: Any) -> HttpResponse:
    """Axes calls this with (request, original_response, credentials) or (request, credentials)."""
    credentials = args[-1] if args and isinstance(args[-1], dict) else None
    seconds_left = _seconds_left(request, credentials)
    if request.path.startswith("/api/"):
        response: HttpResponse = JsonResponse({"detail": lockout_message(seconds_left)}, status=429)
    else:
        context = {"form": AuthenticationForm(request), "lockout_message": lockout_message(seconds_left)}
        response = render(request, "registration/login.html", context, status=429)
    response["Retry-After"] = str(seconds_left)
    return response
