"""The project's URLs plus one page and one API path that fail, for the 500 responses' test."""

from django.urls import path

from project.urls import handler404, handler500, urlpatterns


def _fail(request):
    raise RuntimeError("a bug with a secret in its message: sk-test-123")


urlpatterns = [path("boom/", _fail), path("api/boom/", _fail), *urlpatterns]
__all__ = ["handler404", "handler500", "urlpatterns"]
