"""Streamed native JSONL export: one trajectory per line, screenshots as URLs, constant memory."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.files.storage import default_storage
from django.db.models import QuerySet

from webapp.store.export.records import iter_trajectory_records, json_line
from webapp.store.export.sql_stream import iter_jsonl_chunks_sql
from webapp.store.models import Trajectory

_FLUSH_BYTES = 256 * 1024


def media_url_builder() -> Callable[[str], str]:
    """Absolute URLs for stored files. Filesystem storage is a string join (fast); other backends
    (S3) are asked for each URL, which may sign it."""
    base = _filesystem_media_base()
    if base is not None:
        return lambda name: base + name
    return default_storage.url


def _filesystem_media_base() -> str | None:
    if default_storage.__class__.__name__ != "FileSystemStorage":
        return None
    return settings.PUBLIC_BASE_URL.rstrip("/") + "/" + settings.MEDIA_URL.strip("/") + "/"


def iter_jsonl_chunks(queryset: QuerySet[Trajectory], *, chunk_size: int = 2000) -> Iterator[bytes]:
    """Bytes chunks holding whole JSON lines: PostgreSQL builds the lines when screenshot URLs are
    a plain prefix (filesystem storage), Python otherwise (e.g. signed S3 URLs)."""
    base = _filesystem_media_base()
    if base is not None:
        return iter_jsonl_chunks_sql(queryset, media_base=base)
    return iter_jsonl_chunks_python(queryset, chunk_size=chunk_size)


def iter_jsonl_chunks_python(queryset: QuerySet[Trajectory], *, chunk_size: int = 2000) -> Iterator[bytes]:
    """Bytes chunks of ~256 KiB, each holding whole JSON lines, built from Python records."""
    dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
    buffer: list[str] = []
    size = 0
    for record in iter_trajectory_records(queryset, media_ref=media_url_builder(), chunk_size=chunk_size):
        line = json_line(dumps(record))
        buffer.append(line)
        size += len(line)
        if size >= _FLUSH_BYTES:
            buffer.append("")
            yield "\n".join(buffer).encode()
            buffer, size = [], 0
    if buffer:
        buffer.append("")
        yield "\n".join(buffer).encode()


async def aiter_sync(iterator: Iterator[Any]) -> AsyncIterator[Any]:
    """Drive a sync iterator from async code one item at a time in Django's sync thread, so an ASGI
    StreamingHttpResponse streams instead of buffering the whole body (and the DB cursor stays on
    one thread)."""
    sentinel = object()

    def advance() -> Any:
        return next(iterator, sentinel)

    step = sync_to_async(advance, thread_sensitive=True)
    while True:
        item = await step()
        if item is sentinel:
            return
        yield item
