"""django-axes' lockout check, for sign-ins that come with a request (the login form, the token
endpoint). `authenticate()` without a request (a shell, a test's `client.login`) has no address to
count and is left to the model backend, where axes would raise."""

from __future__ import annotations

from typing import Any

from axes.backends import AxesStandaloneBackend


class AxesBackend(AxesStandaloneBackend):
    def authenticate(self, request: Any = None, username: str | None = None, password: str | None = None, **kwargs: Any):  # fmt: skip
        if request is None:
            return None
        return super().authenticate(request, username, password, **kwargs)
