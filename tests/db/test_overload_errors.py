"""Which database errors are "busy, retry" (503 with Retry-After) and which are not: a real pool's
timeout, the server's refusals by SQLSTATE, each as Django wraps them."""

from __future__ import annotations

import time

import psycopg
import pytest
from django.db import connection
from django.db.utils import OperationalError, ProgrammingError
from psycopg_pool import ConnectionPool, PoolTimeout

from webapp.overload import database_busy, overload_response
from webapp.settings.env import database_url


def _wrapped(driver_error: Exception, django_class: type[Exception]) -> Exception:
    """As Django raises it: its own class, the driver's error as the cause."""
    try:
        raise django_class(str(driver_error)) from driver_error
    except django_class as exc:
        return exc


@pytest.mark.django_db
def test_a_pool_that_has_no_connection_left_is_busy() -> None:
    with ConnectionPool(database_url(connection.settings_dict), min_size=1, max_size=1, timeout=0.2) as pool:
        with pool.connection():
            with pytest.raises(PoolTimeout) as caught:
                pool.getconn()
    exc = _wrapped(caught.value, OperationalError)
    assert database_busy(exc)
    response = overload_response(exc)
    assert response is not None and response.status_code == 503 and response["Retry-After"] == "2"


@pytest.mark.parametrize("sqlstate", ["53300", "57P01", "57P02", "57P03"])
def test_server_refusals_are_busy(sqlstate: str) -> None:
    error = psycopg.errors.lookup(sqlstate)("refused")
    assert database_busy(_wrapped(error, OperationalError))


def test_other_database_errors_are_not_busy() -> None:
    assert not database_busy(_wrapped(psycopg.errors.UndefinedTable("no such table"), ProgrammingError))
    assert not database_busy(ValueError("not a database error"))
    assert overload_response(ValueError("x")) is None


def test_a_connection_the_server_terminated_used_again_is_busy() -> None:
    """The second use of a terminated connection raises a plain OperationalError with no SQLSTATE
    ("the connection is closed"): it is a 503 like the first (57P01), not a 500."""
    url = database_url(connection.settings_dict, name="postgres").replace("postgres://", "postgresql://", 1)
    with psycopg.connect(url, autocommit=True) as victim, psycopg.connect(url, autocommit=True) as admin:
        pid = victim.info.backend_pid
        admin.execute("SELECT pg_terminate_backend(%s)", [pid])
        while admin.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone():
            time.sleep(0.05)  # the backend has sent its goodbye and gone
        errors = []
        for _ in range(2):
            with pytest.raises(psycopg.OperationalError) as caught:
                victim.execute("SELECT 1")
            errors.append(caught.value)
    assert [e.sqlstate for e in errors] == ["57P01", None]
    assert all(database_busy(_wrapped(e, OperationalError)) for e in errors)


@pytest.mark.django_db(transaction=True)
def test_a_lost_connection_is_closed_and_the_next_query_gets_a_fresh_one() -> None:
    """Background work (the RL engine's tasks): Django's pooled connection terminated by the server
    is recognised and closed (`database_lost`), the next query runs on a fresh connection, and the
    pool's own "discarding closed connection" warning is dropped (the task logs the one line)."""
    import logging

    from webapp.overload import database_lost

    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    pool_log = logging.getLogger("psycopg.pool")
    pool_log.addHandler(handler)
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            pid = cursor.fetchone()[0]
        with psycopg.connect(database_url(connection.settings_dict), autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", [pid])
        with pytest.raises(OperationalError) as caught, connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        assert database_lost(caught.value)
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            assert cursor.fetchone()[0] != pid
    finally:
        pool_log.removeHandler(handler)
    assert not [r for r in records if "discarding" in r.getMessage()], records
    assert not database_lost(ValueError("not a database error"))
