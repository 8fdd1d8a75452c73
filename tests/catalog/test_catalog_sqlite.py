"""The SQLite catalog's transactions: `write()` holds the database lock from its start, `read()` is one
snapshot, and neither leaves a statement outside its transaction.

The BEGIN is emitted by Catalog.write/read themselves (no `begin` event listener: docs/BENCHMARKS.md, B1),
so these check, with a second plain sqlite3 connection, that the lock and the snapshot are really there.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import select, update

from airflow_txn.catalog import Catalog, schema

_c = schema.counters.c
_GATE = schema.COUNTER_SNAPSHOT_GATE


@pytest.fixture
def catalog(tmp_path: Path) -> Catalog:
    cat = Catalog(f"sqlite:///{tmp_path / 'catalog.db'}")
    cat.initialize()
    yield cat
    cat.dispose()


def _other(catalog: Catalog) -> sqlite3.Connection:
    """A second connection that gives up at once when the database is locked."""
    assert catalog.engine.url.database
    return sqlite3.connect(catalog.engine.url.database, timeout=0, isolation_level=None)


def _gate(catalog: Catalog) -> int:
    with catalog.read() as conn:
        return int(conn.execute(select(_c.value).where(_c.name == _GATE)).scalar_one())


def test_write_holds_the_database_lock_before_its_first_statement(catalog: Catalog) -> None:
    other = _other(catalog)
    try:
        with catalog.write(), pytest.raises(sqlite3.OperationalError, match="locked"):
            other.execute("BEGIN IMMEDIATE")
        other.execute("BEGIN IMMEDIATE")  # free again once write() ended
        other.execute("COMMIT")
    finally:
        other.close()


def test_read_takes_no_write_lock(catalog: Catalog) -> None:
    other = _other(catalog)
    try:
        with catalog.read() as conn:
            conn.execute(select(_c.value)).all()
            other.execute("BEGIN IMMEDIATE")
            other.execute("COMMIT")
    finally:
        other.close()


def test_read_is_one_snapshot(catalog: Catalog) -> None:
    before = _gate(catalog)
    other = _other(catalog)
    try:
        with catalog.read() as conn:
            first = conn.execute(select(_c.value).where(_c.name == _GATE)).scalar_one()
            other.execute("UPDATE txn_counters SET value = value + 5 WHERE name = ?", (_GATE,))
            second = conn.execute(select(_c.value).where(_c.name == _GATE)).scalar_one()
        assert first == second == before  # in autocommit the second read would see the update
    finally:
        other.close()
    assert _gate(catalog) == before + 5


def test_write_is_undone_whole_when_it_raises(catalog: Catalog) -> None:
    before = _gate(catalog)
    with pytest.raises(RuntimeError, match="boom"), catalog.write() as conn:
        conn.execute(update(schema.counters).where(_c.name == _GATE).values(value=_c.value + 1))
        conn.execute(update(schema.counters).where(_c.name == _GATE).values(value=_c.value + 1))
        raise RuntimeError("boom")
    assert _gate(catalog) == before


def test_write_commits_on_a_clean_exit(catalog: Catalog) -> None:
    before = _gate(catalog)
    with catalog.write() as conn:
        conn.execute(update(schema.counters).where(_c.name == _GATE).values(value=_c.value + 1))
    assert _gate(catalog) == before + 1
