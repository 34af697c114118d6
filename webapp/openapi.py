"""OpenAPI post-processing (drf-spectacular `POSTPROCESSING_HOOKS`): every operation documents the
errors every endpoint can answer — 403 (not signed in, or the role may not), 503 (busy: no database
connection free, with Retry-After; webapp/overload.py) and, where a request body or query is
validated, 400 — with the body the API sends: `{"detail": "why"}` or DRF's `{"field": ["message"]}`."""

from __future__ import annotations

from typing import Any

ERROR_SCHEMA = {
    "type": "object",
    "description": '{"detail": "why"} or, for field errors, {"<field>": ["message", ...]}.',
    "properties": {"detail": {"type": "string"}},
    "additionalProperties": True,
}
_VALIDATING = {"post", "put", "patch"}


def _error(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
    }


def add_error_responses(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    result.setdefault("components", {}).setdefault("schemas", {})["Error"] = ERROR_SCHEMA
    for path, operations in result.get("paths", {}).items():
        for method, operation in operations.items():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            responses = operation["responses"]
            secured = operation.get("security") != [] and path.startswith("/api/")
            if secured and "403" not in responses:
                responses["403"] = _error("Not signed in, or your role may not do this.")
            has_query = any(p.get("in") == "query" for p in operation.get("parameters", []))
            if (method in _VALIDATING or has_query) and "400" not in responses:
                responses["400"] = _error("Invalid input; nothing was changed.")
            if "503" not in responses:
                responses["503"] = _error(
                    "Busy: no database connection was free; retry after Retry-After seconds."
                )
    return result
