"""Top-level URLs: pages, REST API (+ OpenAPI docs), Django admin, media behind login."""

from django.conf import settings
from django.contrib import admin
from django.contrib.auth.decorators import login_required
from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerSplitView

from webapp.accounts.api import OwnTokenRevokeView, TokenView, UserTokenRevokeView
from webapp.store.api.media_views import MediaView

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/auth/token/", TokenView.as_view(), name="api-token"),
    path("api/auth/token/<int:token_id>/", OwnTokenRevokeView.as_view(), name="api-token-own-revoke"),
    path("api/auth/tokens/<int:user_id>/", UserTokenRevokeView.as_view(), name="api-token-revoke"),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # Browsable docs for signed-in users (assets from drf-spectacular-sidecar: no internet needed).
    # Swagger UI's initialiser as a file (?script), not inline: the CSP allows no inline script.
    path(
        "api/docs/",
        login_required(SpectacularSwaggerSplitView.as_view(url_name="api-schema")),
        name="api-docs",
    ),
    path("api/redoc/", login_required(SpectacularRedocView.as_view(url_name="api-schema")), name="api-redoc"),
    path("api/rl/", include("rl_control.api.urls")),
    path("api/annotation/", include("annotation.api.urls")),
    path("api/review/", include("annotation.api.review_urls")),
    path("api/flywheel/", include("webapp.flywheel.api.urls")),
    path("api/fleet/", include("webapp.fleet.api.urls")),
    path("api/", include("webapp.store.api.urls")),
    path("", include("webapp.pages.urls")),
    path("", include("annotation.pages")),
    path("", include("rl_control.pages")),
]

# Media only through an authenticated view that checks the object each file belongs to
# (webapp/store/media.py); in production nginx sends the bytes (X-Accel-Redirect).
urlpatterns.insert(
    0, re_path(rf"^{settings.MEDIA_URL.strip('/')}/(?P<name>.+)$", MediaView.as_view(), name="media")
)

# With DEBUG off (`make up`, production): the project's own 404/500, JSON under /api/ (webapp/errors.py).
handler404 = "webapp.errors.page_not_found"
handler500 = "webapp.errors.server_error"
