"""Vacuum purges the catalog history no snapshot, recovery or retry needs (issue 16, case 14).

Rows of ended transactions and commit records stay at least `HISTORY_SECONDS` after they ended; the tests
let that time pass by running vacuum with this process's clock moved ahead (leases are judged by the
catalog's clock, so nothing alive is touched by it).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from sqlalchemy import func, select

from airflow_txn import Warehouse
from airflow_txn.catalog import schema
from airflow_txn.core.vacuum import HISTORY_SECONDS
from airflow_txn.errors import SerializationError, TransactionNotFoundError
from airflow_txn.model.csn import PREHISTORIC_CSN
from tests.catalog.test_clocks import clock_off_by
from tests.helpers import accounts, events, ids, make_tables

LATER = HISTORY_SECONDS + 3600


def _count(wh: Warehouse, table: object, *where: object) -> int:
    with wh.runtime.catalog.read() as conn:
        return int(conn.execute(select(func.count()).select_from(table).where(*where)).scalar_one())  # type: ignore[arg-type]


def _record_csns(wh: Warehouse) -> list[int]:
    with wh.runtime.catalog.read() as conn:
        return sorted(int(c) for c in conn.execute(select(schema.commit_log.c.csn)).scalars())


def _zookeeper_floor(wh: Warehouse) -> int | None:
    """The oldest record the ZooKeeper log still holds (the catalog keeps the records from there on)."""
    external = wh.runtime.oracle.external_log
    if external is None:
        return None
    first = external.records(after=PREHISTORIC_CSN - 1, limit=1)
    return first[0].csn if first else None


def test_vacuum_purges_history_no_snapshot_or_recovery_needs(
        wh: Warehouse, open_wh: Callable[[], Warehouse], monkeypatch: pytest.MonkeyPatch) -> None:
    """issue 16, case 14: read sets of ended transactions, commit records and table-commit rows below every
    horizon and running snapshot (each table's newest kept), and rows of ended transactions with no part left
    go; reads, time travel inside the window, the watermark, serializable validation, recovery and the
    transaction_info of kept transactions still work, and the counts are reported."""
    make_tables(wh)
    with wh.begin() as t:
        t.append("sales.events", events([1], day="2024-01-01"))  # the events table's only commit
    events_commit = wh.last_commit_csn("sales.events")
    first = wh.begin()
    first.append("sales.accounts", accounts({0: 0}))
    replaced = {first.tid: first.commit()}
    checker = wh.begin(isolation="serializable")
    checker.read("sales.accounts")  # a read set
    checker.append("sales.accounts", accounts({1: 1}))
    replaced[checker.tid] = checker.commit()
    rolled = wh.begin()
    rolled.append("sales.accounts", accounts({9: 9}))
    rolled.rollback()
    empty = wh.begin()
    empty.commit()  # read-only: no CSN
    replacer = wh.begin()
    replacer.overwrite("sales.accounts", accounts({2: 2}))  # removes the parts of `first` and `checker`
    replaced_at = replacer.commit()
    reader = open_wh().begin(isolation="serializable")  # a running snapshot: nothing at or above it goes
    assert ids(reader.read("sales.accounts")) == [2]
    reader.append("sales.events", events([7], day="2024-01-02"))  # a writer: its commit is validated
    with wh.begin() as t:
        t.append("sales.accounts", accounts({3: 3}))
    recent = watermark = wh.readable_csn()

    keep = min(replaced_at, _zookeeper_floor(wh) or replaced_at)  # the reader's snapshot is replaced_at
    # inside HISTORY_SECONDS: only read sets and table-commit rows (no time rule for them) go
    kept_anyway = wh.vacuum(retention_seconds=0)["rows_purged"]
    assert kept_anyway["transactions"] == kept_anyway["commit_log"] == 0
    assert kept_anyway["read_set"] == 1  # the checker's; the reader's is still needed
    assert kept_anyway["table_commits"] == (1 if keep == replaced_at else 0)  # the accounts commit of `first`
    with clock_off_by(monkeypatch, LATER):
        dry = wh.vacuum(retention_seconds=0, dry_run=True)["rows_purged"]
        purged = wh.vacuum(retention_seconds=0)["rows_purged"]
    assert purged == dry

    assert _record_csns(wh) == [c for c in range(2, recent + 1) if c >= keep]
    assert purged["commit_log"] == keep - 2
    assert wh.last_commit_csn("sales.events") == events_commit  # a table's newest commit row is kept
    gone = [rolled.tid, empty.tid] + [tid for tid, csn in replaced.items() if csn < keep]
    for tid in gone:
        with pytest.raises(TransactionNotFoundError):
            wh.transaction_info(tid)
    assert purged["transactions"] == len(gone)
    assert wh.transaction_info(replacer.tid)["commit_csn"] == replaced_at  # its part is still visible
    assert _count(wh, schema.read_set, schema.read_set.c.tid == reader.tid) == 1

    assert wh.readable_csn() == watermark
    assert ids(wh.read("sales.accounts")) == [2, 3]
    assert ids(wh.read("sales.accounts", csn=replaced_at)) == [2]  # time travel inside the window
    assert ids(wh.read("sales.events")) == [1]
    with pytest.raises(SerializationError):  # a commit after its snapshot wrote what it read: still seen
        reader.commit()
    assert wh.recover()["missing_files"] == []
    with wh.begin() as t:
        t.append("sales.accounts", accounts({4: 4}))
    assert ids(wh.read("sales.accounts")) == [2, 3, 4]
    assert _record_csns(wh)[-1] == wh.readable_csn()


def test_nothing_is_purged_while_the_window_keeps_it(wh: Warehouse, monkeypatch: pytest.MonkeyPatch) -> None:
    """issue 16, case 14: with a retention window longer than the time passed, ended transactions and commit
    records stay (transaction_info and time travel of the window need them)."""
    make_tables(wh)
    t = wh.begin()
    t.append("sales.accounts", accounts({1: 1}))
    t.rollback()
    with wh.begin() as done:
        done.append("sales.accounts", accounts({2: 2}))
    before = _record_csns(wh)
    with clock_off_by(monkeypatch, LATER):
        purged = wh.vacuum(retention_seconds=LATER + 3600)["rows_purged"]
    assert purged["transactions"] == purged["commit_log"] == purged["table_commits"] == 0
    assert wh.transaction_info(t.tid)["state"] == "rolled_back"
    assert _record_csns(wh) == before


def _merge_rows(wh: Warehouse) -> list[str]:
    with wh.runtime.catalog.read() as conn:
        return sorted(str(t) for t in conn.execute(select(schema.compactions.c.tid)).scalars())


def _merge_sources_left(wh: Warehouse, tid: str) -> int:
    return _count(wh, schema.parts, schema.parts.c.removal_tid == tid)


def test_vacuum_purges_merge_rows_once_their_sources_are_gone(
        wh: Warehouse, monkeypatch: pytest.MonkeyPatch) -> None:
    """The year simulator's finding: txn_compactions grew one row per partition per night forever. A merge's row
    goes once no part row carries its tid as removal_tid (follow_merges and the protection of merge sources need
    nothing more of it) and it is older than the history kept; each table's newest merge stays (last_merge_times,
    merges_signature: the publishers' and the manifests' check that merges happened)."""
    from airflow_txn.catalog import compaction_records

    make_tables(wh)
    for n in range(2):
        with wh.begin() as t:
            t.append("sales.events", events([n], day="2024-01-01"))
    assert wh.compact("sales.events")["merged"] == 1
    (first,) = _merge_rows(wh)
    with wh.begin() as t:
        t.append("sales.events", events([5], day="2024-01-01"))
    assert wh.compact("sales.events")["merged"] == 1  # merges the first merge's part: a second row
    (second,) = set(_merge_rows(wh)) - {first}
    with wh.runtime.catalog.read() as conn:
        last_merge = compaction_records.last_merge_times(conn)

    # inside the window their sources stay, and so do the rows
    with clock_off_by(monkeypatch, LATER):
        kept = wh.vacuum(retention_seconds=LATER + 3600)["rows_purged"]
    assert kept["compactions"] == 0
    assert _merge_rows(wh) == sorted([first, second])
    assert _merge_sources_left(wh, first) == 2

    # the sources go at once; the rows stay as long as the history of transactions does
    assert wh.vacuum(retention_seconds=0)["rows_purged"]["compactions"] == 0
    assert _merge_sources_left(wh, first) == _merge_sources_left(wh, second) == 0
    assert _merge_rows(wh) == sorted([first, second])

    with clock_off_by(monkeypatch, LATER):
        dry = wh.vacuum(retention_seconds=0, dry_run=True)["rows_purged"]
        assert _merge_rows(wh) == sorted([first, second])  # a dry run deletes nothing
        purged = wh.vacuum(retention_seconds=0)["rows_purged"]
    assert purged["compactions"] == dry["compactions"]
    assert purged["compactions"] == 1
    assert _merge_rows(wh) == [second]  # the table's newest merge stays
    with wh.runtime.catalog.read() as conn:
        assert compaction_records.last_merge_times(conn) == last_merge
    assert ids(wh.read("sales.events")) == [0, 1, 5]
    with clock_off_by(monkeypatch, LATER):
        assert wh.vacuum(retention_seconds=0)["rows_purged"]["compactions"] == 0  # levels off


def test_a_merge_row_stays_while_its_sources_do(wh: Warehouse, monkeypatch: pytest.MonkeyPatch) -> None:
    """A merge older than the history kept whose sources a reader may still need (a transaction older than the
    merge is open) keeps its row: a retried statement that chose the sources follows it to the merged part."""
    make_tables(wh)
    for n in range(2):
        with wh.begin() as t:
            t.append("sales.events", events([n], day="2024-01-01"))
            t.append("sales.events", events([10 + n], day="2024-01-02"))
    old = wh.begin()  # open since before the merges: its snapshot still sees the sources
    assert wh.compact("sales.events")["merged"] == 2  # two merges, one of them not the table's newest
    merges = _merge_rows(wh)
    assert len(merges) == 2
    with clock_off_by(monkeypatch, LATER):
        purged = wh.vacuum(retention_seconds=0)["rows_purged"]
    assert purged["compactions"] == 0
    assert [_merge_sources_left(wh, tid) for tid in merges] == [2, 2]
    assert _merge_rows(wh) == merges
    old.rollback()
