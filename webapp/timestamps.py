"""One format for every timestamp the REST API, its WebSocket messages and the exports write: UTC ISO
8601 with exactly 6 fractional digits, `2026-11-26T12:34:56.123456+00:00` — what Python 3.10's
`fromisoformat`, JavaScript's `Date` and the export's SQL path (`to_char`) all read and write alike.

Serializer fields use REST_FRAMEWORK["DATETIME_FORMAT"] (DRF converts to
TIME_ZONE, which is UTC, first); datetimes placed raw in a response dict go through `JSONRenderer`
(DRF's own encoder would cut them to milliseconds); hand-built dicts call `iso_utc`.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from rest_framework import renderers
from rest_framework.utils.encoders import JSONEncoder as DRFJSONEncoder


def iso_utc(value: dt.datetime | None) -> str | None:
    """UTC ISO 8601 with exactly 6 fractional digits, or None."""
    return value.astimezone(dt.UTC).isoformat(timespec="microseconds") if value is not None else None


def now_utc() -> str:
    return iso_utc(dt.datetime.now(dt.UTC)) or ""


class JSONEncoder(DRFJSONEncoder):
    def default(self, obj: Any) -> Any:
        if isinstance(obj, dt.datetime):
            return iso_utc(obj if obj.tzinfo is not None else obj.replace(tzinfo=dt.UTC))
        return super().default(obj)


class JSONRenderer(renderers.JSONRenderer):
    encoder_class = JSONEncoder
