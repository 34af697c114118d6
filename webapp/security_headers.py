"""The Content-Security-Policy header on every response (`CONTENT_SECURITY_POLICY`, webapp/settings).

Scripts come only from our own origin — no inline script, no eval — so an injected `<script>` or
`onclick=` does not run. Pages and the API docs are built for it: the templates carry no inline
script (data goes in `json_script` blocks, which are not executed) and Swagger UI loads its
initialiser as a file (`SpectacularSwaggerSplitView`).
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urlsplit

from django.conf import settings
from django.http import HttpRequest, HttpResponse


def origin_of(url: str) -> str:
    """`scheme://host[:port]` of `url`, or "" for an empty or relative one."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}" if parts.scheme and parts.netloc else ""


def content_security_policy(*, vnc_proxy_url: str, media_origins: list[str]) -> str:
    """The policy: our origin for everything, plus the VNC proxy's websocket and the media store."""
    extra_media = " ".join(o for o in media_origins if o)
    vnc = origin_of(vnc_proxy_url)
    directives = {
        "default-src": "'self'",
        "script-src": "'self'",
        # ReDoc runs its search in a worker it makes from a blob: only a script already allowed can.
        "worker-src": "'self' blob:",
        # Pages set a few `style=` attributes from their scripts (bar widths, marker positions).
        "style-src": "'self' 'unsafe-inline'",
        "img-src": f"'self' data: blob: {extra_media}".strip(),
        "media-src": f"'self' blob: {extra_media}".strip(),
        "connect-src": f"'self' {vnc}".strip(),
        "font-src": "'self' data:",
        "object-src": "'none'",
        "base-uri": "'self'",
        "form-action": "'self'",
        "frame-ancestors": "'none'",
    }
    return "; ".join(f"{name} {value}" for name, value in directives.items())


class ContentSecurityPolicyMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if settings.CONTENT_SECURITY_POLICY:
            response.setdefault("Content-Security-Policy", settings.CONTENT_SECURITY_POLICY)
        return response
