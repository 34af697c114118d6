"""Top-level URLs: pages, REST API (+ OpenAPI docs), Django admin, media in development."""

from django.conf import settings
from django.contrib import admin
from django.urls import include, path, re_path
from django.views.static import serve
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.authtoken.views import obtain_auth_token

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/auth/token/", obtain_auth_token, name="api-token"),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    path("api/rl/", include("rl_control.api.urls")),
    path("api/annotation/", include("annotation.api.urls")),
    path("api/review/", include("annotation.api.review_urls")),
    path("api/flywheel/", include("webapp.flywheel.api.urls")),
    path("api/fleet/", include("webapp.fleet.api.urls")),
    path("api/", include("webapp.store.api.urls")),
    path("", include("webapp.pages.urls")),
]

if settings.DEBUG or settings.STORAGES["default"]["BACKEND"].endswith("FileSystemStorage"):
    # Local media (filesystem storage). Behind S3 the storage serves its own URLs.
    urlpatterns += [
        re_path(r"^media/(?P<path>.*)$", serve, {"document_root": settings.MEDIA_ROOT}),
    ]
