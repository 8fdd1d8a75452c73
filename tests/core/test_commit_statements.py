"""What a commit asks of the catalog (issue 34, B6: a commit's CPU is mostly its statements, ~0.4 ms each through
SQLAlchemy and the driver). Counted on the catalog's statements, never timed; what the commit does is checked by the
rest of the suite (the crash matrix, the histories, D27's conflict tests)."""

from __future__ import annotations

import pyarrow as pa

from airflow_txn import Warehouse
from tests.harness.statements import statements
from tests.helpers import events, ids, make_tables


def _names(seen: list[str], prefix: str) -> list[str]:
    return [s for s in seen if s.startswith(prefix)]


def test_an_append_only_commit_leaves_schema_versions_alone_and_stamps_its_parts_in_one_statement(
        wh: Warehouse) -> None:
    """A transaction that staged no schema change, committed by the SQL oracle: the tables it touched read once
    (parts and versions in one statement), nothing re-read for D27's check that this answers, no stamp of
    txn_table_versions and one of txn_parts (created and removed together). With ZooKeeper (the production pairing)
    the commit reads what it touched under its row lock (final once committing: D27's check and the apply take that;
    before the lock, a transaction with staged parts needs no such read), and its apply stamps table by table
    (apply.py), each table's parts in one statement."""
    make_tables(wh)
    with wh.begin() as warm:  # this process's caches (a table's directory) filled, as in a loop of commits
        warm.append("sales.events", events([0]))
    t = wh.begin()
    t.append("sales.events", events([1]))
    with statements(wh) as seen:
        csn = t.commit()
    seen[:] = [s for s in seen if not s.startswith("BEGIN")]  # SQLite's, sent by Catalog.read()/write()
    # both oracles: what the transaction touched read once (ZooKeeper: under the row lock, final from then on, so
    # D27's check and the apply take it; it was read 3 times), no version stamp, created and removed parts stamped
    # together (ZooKeeper: per table, one here)
    touched = [s for s in seen if s.startswith("SELECT") and "DISTINCT" in s and "txn_parts.creation_tid" in s]
    assert len(touched) == 1, "\n".join(seen)
    assert not _names(seen, "UPDATE txn_table_versions"), seen
    assert len(_names(seen, "UPDATE txn_parts")) == 1, seen
    if wh.runtime.oracle.external_log is None:  # ZooKeeper's commit has steps of its own (commit_external.py)
        assert len(seen) <= 13, "\n".join(seen)  # was 19: 6 statements of ~0.4 ms of CPU each (B6's notes)
        locked = [i for i, s in enumerate(seen) if s.startswith("UPDATE txn_counters")]
        assert len(locked) == 1, seen
        under_lock = seen[locked[0] + 1:]  # what every other commit waits for: the read set is read before
        assert not [s for s in under_lock if "txn_read_set" in s], "\n".join(under_lock)  # (final under the row lock)
        assert len(under_lock) <= 6, "\n".join(under_lock)  # was 7
    else:  # under the row lock, then the log append and the apply
        assert len(_names(seen, "SELECT txn_table_versions.table_id, txn_table_versions.version")) == 1, seen
        assert len(seen) <= 19, "\n".join(seen)  # was 26
    assert ids(wh.read("sales.events")) == [0, 1] and wh.last_commit_csn("sales.events") == csn


def test_a_commit_that_changed_a_schema_stamps_its_version_and_its_parts(wh: Warehouse) -> None:
    """The same commit with a column added in the transaction: the version is stamped with the parts' CSN."""
    make_tables(wh)
    t = wh.begin()
    t.add_column("sales.events", pa.field("note", pa.string()))
    t.append("sales.events", events([2]).append_column("note", pa.array(["x"], pa.string())))
    with statements(wh) as seen:
        csn = t.commit()
    assert _names(seen, "UPDATE txn_table_versions"), seen
    assert "note" in wh.schema("sales.events").names
    assert ids(wh.read("sales.events")) == [2] and wh.last_commit_csn("sales.events") == csn
