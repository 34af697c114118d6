"""Shared OpenAPI pieces of the annotation endpoints (drf-spectacular)."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, inline_serializer
from rest_framework import serializers

# Every error answer of these endpoints is {"detail": "why"}.
DetailSerializer = inline_serializer("Detail", {"detail": serializers.CharField()})
DETAIL_RESPONSES = {
    400: OpenApiResponse(DetailSerializer, description="Bad input; nothing changed."),
    403: OpenApiResponse(DetailSerializer, description="Not signed in, or the role may not do this."),
    404: OpenApiResponse(DetailSerializer, description="No such object among yours."),
    409: OpenApiResponse(DetailSerializer, description="Not allowed in the current state."),
}
FREE_FORM = OpenApiTypes.OBJECT
