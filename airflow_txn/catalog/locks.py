"""Maintenance locks: one holder per warehouse at a time for a whole run (vacuum), freed when it ends or dies.

A run can take minutes, so the lock cannot be a row lock inside one catalog transaction (on SQLite
that would stop every writer). PostgreSQL: a session-level advisory lock on a connection of its own,
keyed by the lock's name and the catalog's schema (two warehouses in one database do not wait for
each other); the server frees it when the session ends, a crash included. SQLite (one machine):
`flock` on a file beside the database file (`<database>.<name>.lock`), which the kernel frees when the
process dies. Another database, or an in-memory SQLite catalog (private to one process), takes no lock.
A second holder waits for the first.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError

from airflow_txn.catalog.database import Catalog

_PG_NAMESPACE = 731_100_422  # first key of airflow_txn's two-key advisory locks (its own key space)
_PG_LOCK = text("SELECT pg_advisory_lock(:ns, hashtext(current_schema() || ':' || :name))")
_PG_UNLOCK = text("SELECT pg_advisory_unlock(:ns, hashtext(current_schema() || ':' || :name))")


@contextmanager
def exclusive(catalog: Catalog, name: str) -> Iterator[None]:
    """Hold the warehouse-wide lock `name` for the block, waiting while someone else holds it."""
    if catalog.dialect == "postgresql":
        with _advisory(catalog, name):
            yield
        return
    database = make_url(catalog.url).database if catalog.dialect == "sqlite" else None
    if not database or database == ":memory:":
        yield
        return
    with _file_lock(f"{database}.{name}.lock"):
        yield


@contextmanager
def _advisory(catalog: Catalog, name: str) -> Iterator[None]:
    params = {"ns": _PG_NAMESPACE, "name": name}
    conn = catalog.engine.connect().execution_options(isolation_level="AUTOCOMMIT")  # no transaction held open
    try:
        conn.execute(_PG_LOCK, params)
        try:
            yield
        finally:
            try:
                conn.execute(_PG_UNLOCK, params)
            except DBAPIError:  # the session is gone, and the lock with it
                conn.invalidate()
    finally:
        conn.close()


@contextmanager
def _file_lock(path: str) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
