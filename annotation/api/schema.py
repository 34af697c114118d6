"""Shared OpenAPI pieces of the annotation endpoints (drf-spectacular)."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, inline_serializer
from rest_framework import serializers

# Every error answer of these endpoints is {"detail": "why"}.
DetailSerializer = inline_serializer("Detail", {"detail": serializers.CharField()})
# 400 and 403 (DRF's field errors or {"detail"}) are added to every operation by webapp.openapi.
DETAIL_RESPONSES = {
    404: OpenApiResponse(DetailSerializer, description="No such object among yours."),
    409: OpenApiResponse(DetailSerializer, description="Not allowed in the current state."),
}
FREE_FORM = OpenApiTypes.OBJECT

# The annotation and review endpoints answer JSON objects (sessions' state, review data, ...) whose
# shape docs/annotation.md describes; the lists answer arrays of such objects.
OBJECT_RESPONSES = {200: FREE_FORM, **DETAIL_RESPONSES}
CREATED_RESPONSES = {201: FREE_FORM, **DETAIL_RESPONSES}
ACCEPTED_RESPONSES = {202: FREE_FORM, **DETAIL_RESPONSES}
LIST_RESPONSES = {
    200: {"type": "array", "items": {"type": "object", "additionalProperties": {}}},
    **DETAIL_RESPONSES,
}
