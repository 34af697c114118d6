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


class SessionResult(serializers.Serializer):
    final_reward = serializers.FloatField(allow_null=True, help_text="The verifier's score, as stored.")
    success = serializers.BooleanField(allow_null=True)
    status = serializers.CharField()
    review_state = serializers.CharField()


class SessionState(serializers.Serializer):
    """What the workspace draws (docs/annotation.md "State")."""

    id = serializers.IntegerField()
    status = serializers.CharField()
    error = serializers.CharField(allow_blank=True)
    task = serializers.DictField(help_text="{id, external_id, instruction (the episode's), env_kind, pool}")
    trajectory_id = serializers.IntegerField(allow_null=True)
    result = SessionResult(allow_null=True, help_text="Null while the session runs.")
    review_state = serializers.CharField(allow_null=True)
    branch_of = serializers.IntegerField(allow_null=True)
    track = serializers.CharField()
    policy = serializers.DictField()
    observation = serializers.DictField()
    candidates = serializers.DictField(
        help_text="{obs_version, status, items: [{index, number, ...}], error}"
    )
    steps = serializers.ListField(
        child=serializers.DictField(), help_text="[{index, number, decision_number, ...}]"
    )


SESSION_RESPONSES = {200: SessionState, **DETAIL_RESPONSES}
SESSION_CREATED_RESPONSES = {201: SessionState, **DETAIL_RESPONSES}
