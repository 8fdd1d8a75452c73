"""B3 (benchmarks/b3_part_lookup.py, issue 34) at a tiny size on the real PostgreSQL: the bulk load that makes the
catalog's indexes and foreign key after the rows leaves the same indexes and key as a fresh catalog's, the lookups
see the parts the history says are visible, and `--engine`'s commit and time-travel rows run through the engine
on the loaded catalog."""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine, text

from airflow_txn.catalog import Catalog
from benchmarks import _bench
from benchmarks import b3_part_lookup as b3

pytestmark = pytest.mark.postgres


def _definitions(url: str) -> tuple[set[str], set[str]]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            indexes = {str(r[0]) for r in conn.execute(text(
                "SELECT indexdef FROM pg_indexes WHERE tablename = 'txn_parts'"))}
            keys = {str(r[0]) for r in conn.execute(text(
                "SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = 'txn_parts'::regclass"))}
    finally:
        engine.dispose()
    return indexes, keys


def test_the_bulk_load_has_the_catalogs_own_indexes_and_key_and_the_historys_visible_parts(pg_url: str) -> None:
    history = b3.History(3_000, tables=b3.TABLES)
    found = []
    with _bench.pg_databases(pg_url, "airflow_txn_test_b3_fresh", "airflow_txn_test_b3_loaded") as (fresh_url, url):
        fresh = Catalog(fresh_url)
        fresh.initialize()
        fresh.dispose()
        table_ids = b3._load_pg(url, history, unlogged=True)  # indexes and key dropped before the rows, made after
        found = [_definitions(fresh_url), _definitions(url)]
        catalog = Catalog(url)
        try:
            with catalog.engine.connect() as conn:  # the lookup-only runs' load: no WAL for the parts
                assert conn.execute(text("SELECT relpersistence FROM pg_class WHERE relname = 'txn_parts'")).scalar() \
                    == "u"
            for snapshot in history.snapshots.values():
                for t in (0, 17, 99):
                    assert b3.lookup(catalog, table_ids[t], snapshot) == history.visible_count(t, snapshot)
        finally:
            catalog.dispose()
    assert found[0] == found[1]
    indexes, keys = found[1]
    assert any("ix_txn_parts_span" in i for i in indexes) and any("FOREIGN KEY" in k for k in keys)


def test_the_engine_rows_time_a_commit_and_a_read_back_on_the_loaded_catalog(pg_url: str,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(b3, "ENGINE_COMMITS", 3)
    monkeypatch.setattr(b3, "ENGINE_ROWS", 10)
    rows = b3.run(True, 2_000, pg_url, ("postgresql",), engine=True)
    engine = [r for r in rows if r["measure"].startswith(("commit of a 3-table", "read of one table"))]
    loaded = f"catalog of {len(b3.History(2_000)):,} parts"
    assert [r["contender"] for r in engine] == [loaded, "fresh catalog", loaded, loaded], engine
    assert all(r["status"] == "ok" and r["n"] >= 1 for r in engine)
    assert engine[0]["ratio"] is not None and engine[2]["ratio"] is not None
