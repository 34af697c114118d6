"""Overload answered cleanly, in one place: no database connection could be had (the pool's wait ran
out, or PostgreSQL refused a new client) → 503 with Retry-After; an environment that did not answer
in time → 504. Never a 500. HTTP through `OverloadMiddleware` (every view, DRF's included: DRF
re-raises what its handler does not know), websockets through `OverloadGuard` (close code 1013,
"try again later"). Background work (the RL engine's Celery tasks) uses the same test through
`database_lost`: a lost connection is an expected event there, logged in one line, not a traceback."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import psycopg
from django.conf import settings
from django.db import DatabaseError, connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from psycopg_pool import PoolTimeout

log = logging.getLogger(__name__)

# SQLSTATEs of a server that cannot serve this request now: too_many_connections ("sorry, too many
# clients already", "remaining connection slots are reserved"), cannot_connect_now (starting up),
# admin_shutdown / crash_shutdown (the connection was terminated, e.g. pg_terminate_backend).
_REFUSED_SQLSTATES = {"53300", "57P01", "57P02", "57P03"}
# The same without a SQLSTATE: a connection the server closed, used again ("the connection is
# closed"), or lost mid-query ("server closed the connection unexpectedly").
_REFUSED_MESSAGES = (
    "too many clients",
    "the connection is closed",
    "server closed the connection unexpectedly",
)


def database_busy(exc: BaseException) -> bool:
    """True when `exc` (or the driver error Django wrapped in it) says no connection could be had."""
    for err in (exc, exc.__cause__):
        if isinstance(err, PoolTimeout):
            return True
        if isinstance(err, psycopg.OperationalError) and getattr(err, "sqlstate", None) in _REFUSED_SQLSTATES:
            return True
        if isinstance(err, psycopg.OperationalError) and any(m in str(err) for m in _REFUSED_MESSAGES):
            return True
    return False


def database_lost(exc: BaseException) -> bool:
    """For background work: when `exc` says the database connection was lost or could not be had
    (`database_busy`: PostgreSQL terminated it, restarted, or refused a new client), close this
    thread's connection (the pool discards a broken one; the next query gets a fresh one) and
    return True: the caller logs one line (`first_line(exc)`) and carries on. False for anything
    else, which the caller logs with its traceback."""
    if not database_busy(exc):
        return False
    try:
        connection.close()
    except DatabaseError:  # closing a connection the server dropped may fail too; it is gone either way
        log.debug("closing the lost database connection failed", exc_info=True)
    return True


class PoolDiscardFilter(logging.Filter):
    """Drops psycopg_pool's "discarding closed/broken connection" warnings: the code that lost the
    connection logs the one line that says what was lost and what happens next (`database_lost`,
    `overload_response`); the pool's own line about the same connection adds nothing. Its other
    warnings (cannot connect, a connection returned mid-transaction) still show."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(
            ("discarding closed connection", "discarding broken connection")
        )


def first_line(exc: BaseException) -> str:
    """The first line of `exc`'s message (libpq's messages for a lost connection run to three)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _env_timed_out(exc: BaseException) -> bool:
    from webapp.fleet.services import EnvTimeout

    return isinstance(exc, EnvTimeout)


def overload_response(exc: BaseException) -> HttpResponse | None:
    """The 503/504 answer for an overload error, None for any other exception."""
    if database_busy(exc):
        retry = settings.DB_OVERLOAD_RETRY_AFTER_S
        log.warning("no database connection free (%s): 503", exc)
        body = {"detail": f"The server is busy: no database connection was free. Retry in {retry} s."}
        return JsonResponse(body, status=503, headers={"Retry-After": str(retry)})
    if _env_timed_out(exc):
        return JsonResponse({"detail": str(exc)}, status=504)
    return None


class OverloadMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        return overload_response(exception)


class OverloadGuard:
    """ASGI wrapper for websockets: a consumer (or the auth middleware) that cannot get a database
    connection closes the socket with 1013 instead of crashing with a traceback."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        accepted = False

        async def tracked_send(message: dict[str, Any]) -> None:
            nonlocal accepted
            accepted = accepted or message.get("type") == "websocket.accept"
            await send(message)

        try:
            await self.inner(scope, receive, tracked_send)
        except Exception as exc:
            if not database_busy(exc):
                raise
            log.warning("websocket %s: no database connection free (%s): closed 1013", scope.get("path"), exc)
            await _close_busy(send, accepted)


async def _close_busy(send: Any, accepted: bool) -> None:
    """Close with 1013 (accepted first, so the browser sees the code and not a failed handshake)."""
    try:
        if not accepted:
            await send({"type": "websocket.accept"})
        await send({"type": "websocket.close", "code": 1013, "reason": "server busy, retry"})
    except Exception:  # the client is already gone
        log.debug("the websocket was already closed")
