"""A pooled PostgreSQL connection is pinged before reuse only when it has been idle (database.PING_AFTER_IDLE_S) or
its socket has input (the server closed it).

Pinging at every checkout (SQLAlchemy's pool_pre_ping) cost a round trip and about 0.3 ms of client CPU per catalog
transaction: a quarter of a visible-part lookup (docs/BENCHMARKS.md, B3). A connection checked in moments ago is
reused as it is; one idle longer, or one the server closed, is pinged, and a dead one is replaced before the caller
sees it. A connection lost without a word within the window (here: its socket's input taken away, as a network
that drops the server's FIN would) shows as CatalogUnavailableError on its first statement, nothing done, and the
next transaction reconnects: the pool drops every connection older than the failure. Real PostgreSQL; the backends
are killed with pg_terminate_backend.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine, select, text

from airflow_txn.catalog import Catalog, database, part_records, schema
from airflow_txn.errors import CatalogUnavailableError
from tests.helpers import backend_pid, wait_until

pytestmark = pytest.mark.postgres

WINDOW = 0.2
"""The idle window these tests use (shorter than the default, to keep them quick)."""


@pytest.fixture
def catalog(pg_schema_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Catalog]:
    monkeypatch.setattr(database, "PING_AFTER_IDLE_S", WINDOW)
    made = Catalog(pg_schema_url)
    made.initialize()
    yield made
    made.dispose()


class Pings:
    """Counts the pings the catalog's dialect sends (every liveness check goes through `dialect.do_ping`)."""

    def __init__(self, catalog: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        dialect = catalog.engine.dialect
        ping = dialect.do_ping

        def counting(dbapi_connection: object) -> bool:
            self.count += 1
            return ping(dbapi_connection)

        monkeypatch.setattr(dialect, "do_ping", counting)


def _read(catalog: Catalog) -> int:
    """One catalog read; the backend that served it."""
    with catalog.read() as conn:
        conn.execute(select(schema.counters.c.name)).all()
        return backend_pid(conn)


def _idle_past_window() -> None:
    """Until the pooled connection has sat idle past the window, on the clock the pool reads (time.monotonic)."""
    past = time.monotonic() + WINDOW * 2
    wait_until(lambda: time.monotonic() > past, timeout=WINDOW * 2 + 10, what="the idle window to pass")


def _terminate(url: str, pid: int) -> None:
    """Kill the backend and wait until it has exited (its socket closed)."""
    engine = create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            assert conn.execute(text("SELECT pg_terminate_backend(:pid, 10000)"), {"pid": pid}).scalar_one()
    finally:
        engine.dispose()


def test_a_connection_reused_at_once_is_not_pinged(catalog: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    _read(catalog)
    pings = Pings(catalog, monkeypatch)
    for _ in range(10):
        _read(catalog)
    assert pings.count == 0


def test_an_idle_connection_is_pinged_before_reuse(catalog: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    _read(catalog)
    pings = Pings(catalog, monkeypatch)
    _idle_past_window()
    _read(catalog)
    assert pings.count == 1
    _read(catalog)  # used a moment ago: not again
    assert pings.count == 1


def test_a_connection_that_died_while_idle_is_replaced_unseen(catalog: Catalog, pg_schema_url: str) -> None:
    before = _read(catalog)
    _terminate(pg_schema_url, before)
    _idle_past_window()
    after = _read(catalog)  # the ping finds it dead; the pool connects anew before handing it out
    assert after != before
    with catalog.write() as conn:  # writes too
        conn.execute(text("SELECT 1"))


def test_a_connection_the_server_closed_is_replaced_unseen_within_the_window(
        catalog: Catalog, pg_schema_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    before = _read(catalog)
    pings = Pings(catalog, monkeypatch)
    _terminate(pg_schema_url, before)
    after = _read(catalog)  # at once: its socket has input (end of file), so it is pinged and replaced
    assert after != before
    assert pings.count == 1


def test_a_connection_lost_silently_within_the_window_is_a_clear_error_then_reconnects(
        catalog: Catalog, pg_schema_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    before = _read(catalog)
    monkeypatch.setattr(database, "_has_input", lambda _connection: False)  # the server's FIN never arrives
    _terminate(pg_schema_url, before)
    with pytest.raises(CatalogUnavailableError, match="lost the connection to the catalog"):
        _read(catalog)
    assert _read(catalog) != before  # no pause needed: the pool dropped what was older than the failure


def _lookup(catalog: Catalog) -> int:
    """One visible-part lookup (run on the driver's cursor: docs/DESIGN.md, D34); the backend that served it."""
    with catalog.read() as conn:
        part_records.visible_parts(conn, 1, None, 1)
        return backend_pid(conn)


def test_a_lookup_on_a_connection_lost_silently_is_a_clear_error_then_reconnects(
        catalog: Catalog, pg_schema_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The lookup's statement bypasses SQLAlchemy's execution, not its error handling: the lost connection is
    invalidated, the error is the catalog's, and the next read connects anew."""
    before = _lookup(catalog)
    monkeypatch.setattr(database, "_has_input", lambda _connection: False)
    _terminate(pg_schema_url, before)
    with pytest.raises(CatalogUnavailableError, match="lost the connection to the catalog"):
        _lookup(catalog)
    assert _lookup(catalog) != before
