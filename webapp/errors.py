"""The project's own 404 and 500 responses (Django's handler404/handler500, used with DEBUG off):
JSON under /api/ as every API error is, the project's pages elsewhere. Neither shows settings, URL
patterns or a traceback."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.template import loader


def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    if _is_api(request):
        return JsonResponse({"detail": "Not found."}, status=404)
    return render(request, "404.html", status=404)


def server_error(request: HttpRequest) -> HttpResponse:
    if _is_api(request):
        return JsonResponse({"detail": "Server error."}, status=500)
    # No request context: whatever failed (the database, a context processor) must not fail this too.
    return HttpResponse(loader.get_template("500.html").render(), status=500)
