"""`/media/<path>`: every media file through authentication and a per-object check (webapp.store.media)."""

from __future__ import annotations

from django.core.files.storage import default_storage
from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework.exceptions import NotFound, PermissionDenied
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.views import APIView

from webapp.store.media import media_name_clean, media_readable_by, media_response
from webapp.timestamps import JSONRenderer


class MediaView(APIView):
    """A screenshot, think-aloud recording, checkpoint file or export archive, if the caller may read it."""

    permission_classes = [IsAuthenticated]
    renderer_classes = [JSONRenderer]  # refusals are JSON for browsers too (no browsable-API page)

    @extend_schema(
        responses={(200, "application/octet-stream"): OpenApiTypes.BINARY},
        description="Media file (screenshot, audio, checkpoint file, export archive) for a caller allowed "
        "to read the object it belongs to; 403 otherwise.",
    )
    def get(self, request: Request, name: str) -> HttpResponse:
        clean = media_name_clean(name)
        if clean is None or not media_readable_by(request.user, clean):
            raise PermissionDenied("You may not read this media file.")
        if default_storage.__class__.__name__ == "FileSystemStorage" and not default_storage.exists(clean):
            raise NotFound("No such media file.")
        return media_response(clean)
