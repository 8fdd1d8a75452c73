"""Catalog transactions PostgreSQL aborts to break a deadlock are run again (Catalog.write_retrying).

Found by the randomized histories: a statement's removal locks and another transaction's stamps took
the same part rows in different orders; PostgreSQL aborted one with `deadlock detected`, which reached
the user as a raw OperationalError. Here two real connections build that cycle on purpose.
"""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import Connection, select, text, update
from sqlalchemy.exc import DBAPIError

from airflow_txn.catalog import Catalog, schema
from airflow_txn.catalog.database import retryable_reason
from tests.helpers import backend_pid, blocked_by, wait_until

pytestmark = pytest.mark.postgres

_c = schema.counters.c


def _lock(conn: Connection, name: str) -> None:
    conn.execute(update(schema.counters).where(_c.name == name).values(value=_c.value))


def _names(catalog: Catalog) -> list[str]:
    with catalog.read() as conn:
        return sorted(str(n) for n in conn.execute(select(_c.name)).scalars())[:2]


def test_a_deadlock_victim_is_run_again_and_succeeds(pg_schema_url: str) -> None:
    catalog = Catalog(pg_schema_url)
    catalog.initialize()
    first, second = _names(catalog)
    other_holds_first = threading.Event()
    victim_waits = threading.Event()
    errors: list[BaseException] = []
    runs: list[int] = []

    def other() -> None:  # locks `first`, then (once the victim waits on it) `second`
        try:
            with catalog.write() as conn:
                _lock(conn, first)
                other_holds_first.set()
                victim_waits.wait(60)
                # the victim waits on `first` before this locks `second`, so its deadlock check fires first
                wait_until(lambda: blocked_by(pg_schema_url, backend_pid(conn)), what="the victim to wait on `first`")
                _lock(conn, second)
        except BaseException as exc:
            errors.append(exc)

    def body(conn: Connection) -> str:  # locks `second`, then `first`: the opposite order
        runs.append(1)
        _lock(conn, second)
        if len(runs) == 1:
            other_holds_first.wait(10)
            victim_waits.set()
        _lock(conn, first)
        return "done"

    thread = threading.Thread(target=other)
    thread.start()
    try:
        assert catalog.write_retrying(body, "the test's transaction") == "done"
    finally:
        thread.join(30)
        catalog.engine.dispose()
    assert not errors, errors
    assert len(runs) == 2, "the deadlock victim was not run again"


def test_other_database_errors_are_not_retried(pg_schema_url: str) -> None:
    catalog = Catalog(pg_schema_url)
    catalog.initialize()
    runs: list[int] = []

    def body(conn: Connection) -> None:
        runs.append(1)
        conn.execute(text("SELECT 1 / 0"))

    with pytest.raises(DBAPIError) as raised:
        catalog.write_retrying(body, "a broken query")
    catalog.engine.dispose()
    assert retryable_reason(raised.value) is None and runs == [1]
