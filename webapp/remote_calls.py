"""STYLE 16 in one place: a call to an environment, a model or another process never runs inside a
database transaction, and the thread's pooled connection goes back while it waits."""

from __future__ import annotations

from django.db import connection


class TransactionHeld(RuntimeError):
    """A remote call was made inside a database transaction (claim, commit, call, then store)."""


def before_remote_call(what: str) -> None:
    """Refuse a call made inside a transaction (it would hold its locks and connection for the
    call's length); otherwise give this thread's connection back to the pool while the call runs
    (the next query takes one again). A test case's own wrapping transaction does not count."""
    if any(not getattr(block, "_from_testcase", False) for block in connection.atomic_blocks):
        raise TransactionHeld(f"{what} inside a database transaction")
    if not connection.in_atomic_block:
        connection.close()
