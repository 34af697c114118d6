"""Hostile input never reaches the database or a 5xx: one place for what every request shares.

- JSON / form bodies and query strings with a NUL character (PostgreSQL text cannot hold one) are
  refused with a JSON 400 naming the field (`NulSafe*Parser`, `NulQueryMiddleware`);
- a JSON body nested deeper than `workers.json_input.MAX_DEPTH` is refused with a 400 before it is
  parsed (the parser would recurse into a RecursionError);
- a body over `DATA_UPLOAD_MAX_MEMORY_SIZE` on an API path answers a JSON 413, not Django's HTML page;
- `api_exception_handler` turns the few errors that can only come from the request into 4xx JSON.
Endpoints that stream their own body (think-aloud audio, task import files) set their own limits.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent
from django.db import DataError
from django.http import HttpRequest, HttpResponse, JsonResponse
from rest_framework import status
from rest_framework.exceptions import APIException, ParseError
from rest_framework.parsers import FormParser, JSONParser, MultiPartParser, get_encoding
from rest_framework.utils.json import strict_constant

from workers.json_input import json_loads

log = logging.getLogger(__name__)


def nul_field(data: Any, where: str = "") -> str | None:
    """The dotted path of the first key or string value holding a NUL character, or None."""
    if isinstance(data, str):
        return (where or "body") if "\x00" in data else None
    if isinstance(data, dict):
        for key, value in data.items():
            path = f"{where}.{key}" if where else str(key)
            if isinstance(key, str) and "\x00" in key:
                return (where or "body") + " (a key)"
            found = nul_field(value, path)
            if found:
                return found
    elif isinstance(data, list | tuple):
        for i, value in enumerate(data):
            found = nul_field(value, f"{where}[{i}]" if where else f"[{i}]")
            if found:
                return found
    return None


def _querydict_nul(qd: Any) -> str | None:
    for key, values in qd.lists():
        if "\x00" in key:
            return "(a key)"
        for value in values:
            if isinstance(value, str) and "\x00" in value:
                return key
    return None


def _refuse_nul(field: str) -> ParseError:
    return ParseError({field: ["NUL characters are not allowed."]})


class NulSafeJSONParser(JSONParser):
    """DRF's JSON parser with the nesting limit checked first, and NUL characters refused."""

    def parse(self, stream: Any, media_type: Any = None, parser_context: Any = None) -> Any:
        encoding = get_encoding(parser_context or {})
        try:
            text = stream.read().decode(encoding) if stream is not None else ""
            data = json_loads(text, parse_constant=strict_constant if self.strict else None)
        except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, a NaN in strict mode
            raise ParseError(f"JSON parse error - {exc}") from exc
        field = nul_field(data)
        if field:
            raise _refuse_nul(field)
        return data


class NulSafeFormParser(FormParser):
    def parse(self, stream: Any, media_type: Any = None, parser_context: Any = None) -> Any:
        data = super().parse(stream, media_type, parser_context)
        field = _querydict_nul(data)
        if field:
            raise _refuse_nul(field)
        return data


class NulSafeMultiPartParser(MultiPartParser):
    def parse(self, stream: Any, media_type: Any = None, parser_context: Any = None) -> Any:
        parsed = super().parse(stream, media_type, parser_context)
        field = _querydict_nul(parsed.data)
        if field:
            raise _refuse_nul(field)
        return parsed


class NulQueryMiddleware:
    """A NUL in the query string: JSON 400 on API paths (a plain 400 elsewhere), before any view."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        field = _querydict_nul(request.GET)
        if field is not None or "\x00" in request.path:
            field = field or "path"
            body = {field: ["NUL characters are not allowed."]}
            return JsonResponse(body, status=400)
        return self.get_response(request)


class PayloadTooLarge(APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "Request body too large."
    default_code = "payload_too_large"


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Any:
    """DRF's handler, plus: an over-large body → 413, too many form fields → 400, and a DataError
    (a value PostgreSQL refuses, which only a request can carry this far) → 400, logged to be fixed
    at its cause."""
    from rest_framework.views import exception_handler  # not at import: DRF settings name this module

    if isinstance(exc, RequestDataTooBig):
        exc = PayloadTooLarge(
            f"Request body too large: the limit is {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes."
        )
    elif isinstance(exc, TooManyFieldsSent):
        exc = ParseError("Too many form fields.")
    elif isinstance(exc, DataError):
        view = context.get("view")
        log.warning("DataError from input in %s: %s", type(view).__name__, exc)
        exc = ParseError(f"A value in the request cannot be stored: {exc}".strip())
    return exception_handler(exc, context)
