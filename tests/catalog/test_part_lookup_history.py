"""B3's synthetic history (benchmarks/b3_part_lookup.py) and its SQLite bulk load: the vectorized history stamps
exactly the removals a transaction-by-transaction replay gives, and the catalog the load fills (rows made by SQLite
from staged columns, indexes made after) has the catalog's own indexes and shows at each snapshot the parts the
history says are visible there. The PostgreSQL load: tests/catalog/test_part_lookup_bench.py."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np

from airflow_txn.catalog import Catalog
from airflow_txn.model.csn import ROLLBACK_CSN
from benchmarks import b3_part_lookup as b3


def test_the_history_stamps_the_removals_a_replay_gives() -> None:
    history = b3.History(20_000, tables=7, seed=3)
    assert len(history) - 20_000 in (0, 1, 2)
    visible: dict[int, list[int]] = {}
    removal = np.zeros(len(history), dtype=np.int64)
    starts = np.flatnonzero(np.diff(history.creation_txn, prepend=0))  # each transaction's first part
    for begin, end in zip(starts, [*starts[1:], len(history)], strict=True):
        txn, table, csn = int(history.creation_txn[begin]), int(history.table[begin]), int(history.creation_csn[begin])
        assert (history.table[begin:end] == table).all() and 1 <= end - begin <= 3
        if csn == ROLLBACK_CSN:
            continue
        if (history.removal_txn == txn).any():  # a compaction: it replaces every visible part of its table
            assert visible.get(table) and end - begin <= 2
            removal[visible[table]] = csn
            visible[table] = []
        visible.setdefault(table, []).extend(range(begin, end))
    assert (removal == history.removal_csn).all()
    assert ((history.removal_csn != 0) == (history.removal_txn != 0)).all()
    assert ((history.creation_csn == ROLLBACK_CSN).mean()) < 0.05


def _index_sql(path: Path) -> set[str]:
    db = sqlite3.connect(path)
    try:
        return {str(r[0]) for r in db.execute("SELECT sql FROM sqlite_master WHERE type = 'index' "
                                              "AND tbl_name = 'txn_parts' AND sql IS NOT NULL")}
    finally:
        db.close()


def test_the_sqlite_load_has_the_catalogs_indexes_and_the_historys_visible_parts(tmp_path: Path) -> None:
    fresh = Catalog(f"sqlite:///{tmp_path / 'fresh.db'}")
    fresh.initialize()
    fresh.dispose()
    history = b3.History(5_000, tables=b3.TABLES)
    table_ids = b3._load_sqlite(tmp_path / "b3.db", history)
    assert _index_sql(tmp_path / "b3.db") == _index_sql(tmp_path / "fresh.db")
    db = sqlite3.connect(tmp_path / "b3.db")
    try:  # filled with no journal, left in the catalog's own mode
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        db.close()
    catalog = Catalog(f"sqlite:///{tmp_path / 'b3.db'}")
    try:
        for snapshot in history.snapshots.values():
            for t in (0, 17, 99):
                assert b3.lookup(catalog, table_ids[t], snapshot) == history.visible_count(t, snapshot)
        with catalog.read() as conn:
            tids = conn.exec_driver_sql("SELECT creation_tid, removal_tid, path FROM txn_parts WHERE removal_tid "
                                        "IS NOT NULL LIMIT 1").one()
    finally:
        catalog.dispose()
    assert tids[0].endswith(b3._TID) and tids[1].endswith(b3._TID) and len(tids[2]) == 34
