"""Hudi RFC-73's four multi-table scenarios: commit, conflict, concurrent read, failed update."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from airflow_txn import ROLLBACK_CSN, Warehouse
from airflow_txn.core import crashpoints
from airflow_txn.errors import SerializationError, StorageError, TransactionClosedError
from tests.helpers import ACCOUNTS, accounts, ids, storage_files

TABLES = ("db.t1", "db.t2", "db.t3")


def _setup(wh: Warehouse) -> int:
    """Three tables with one committed part each (ids 1..3 in every table); returns that CSN."""
    for name in TABLES:
        wh.create_table(name, ACCOUNTS)
    with wh.begin(label="seed") as t:
        for name in TABLES:
            t.append(name, accounts({1: 100, 2: 200, 3: 300}))
    return wh.readable_csn()


def _state(wh: Warehouse, csn: int | None = None) -> dict[str, list[dict[str, Any]]]:
    return {name: wh.read(name, csn=csn).sort_by("id").to_pylist() for name in TABLES}


# -- scenario 1: one transaction updates three tables -----------------------------------------------
def test_scenario1_three_tables_commit_at_one_csn(wh: Warehouse) -> None:
    seeded = _setup(wh)
    t = wh.begin(label="w1")
    t.append("db.t1", accounts({4: 400}))
    t.update("db.t2", pc.field("id") == 2, {"balance": 222})
    t.delete("db.t3", pc.field("id") == 3)
    # staged, tracked under the tid, invisible to everyone else
    assert _state(wh) == _state(wh, seeded)
    assert ids(t.read("db.t1")) == [1, 2, 3, 4]
    info = wh.transaction_info(t.tid)
    assert info["state"] == "active"
    assert info["tables"] == list(TABLES)

    csn = t.commit()

    assert t.state == "committed"
    assert csn == seeded + 1 == wh.readable_csn()
    assert {wh.last_commit_csn(name) for name in TABLES} == {csn}
    assert wh.transaction_info(t.tid)["commit_csn"] == csn
    record = wh.commit_log(limit=1)[0]
    assert record["csn"] == csn and record["tid"] == t.tid and record["applied"]
    assert sorted(record["tables"]) == list(TABLES)
    after = _state(wh, csn)
    assert ids(wh.read("db.t1", csn=csn)) == [1, 2, 3, 4]
    assert {r["id"]: r["balance"] for r in after["db.t2"]} == {1: 100, 2: 222, 3: 300}
    assert ids(wh.read("db.t3", csn=csn)) == [1, 2]
    # the previous CSN still shows the state before, in all three tables
    assert all(ids(wh.read(name, csn=seeded)) == [1, 2, 3] for name in TABLES)
    assert wh.read("db.t2", csn=seeded).to_pylist()[1]["balance"] == 200
    # every part of the transaction carries the same commit CSN
    for part in wh.transaction_info(t.tid)["parts"]:
        key = "creation_csn" if part["role"] == "created" else "removal_csn"
        assert part[key] == csn


# -- scenario 2: two writers conflict on a shared part ---------------------------------------------
@pytest.mark.parametrize("second", ["overwrite", "update"])
def test_scenario2_second_writer_of_a_part_fails_at_once(wh: Warehouse, open_wh: Callable[[], Warehouse],
                                                         root: Path, second: str) -> None:
    seeded = _setup(wh)
    w1 = wh.begin(label="w1")
    w2 = open_wh().begin(label="w2")  # another process
    w2.append("db.t2", accounts({9: 900}))  # W2 already staged work in another table
    w1.update("db.t1", pc.field("id") == 1, {"balance": 111})  # W1 takes the part of t1
    files_before = storage_files(root)

    with pytest.raises(SerializationError):
        if second == "overwrite":
            w2.overwrite("db.t1", accounts({1: 1}))
        else:
            w2.update("db.t1", pc.field("id") == 3, {"balance": 333})  # another row, same part

    # the failed statement left no file behind and W2 can now only roll back
    assert storage_files(root) == files_before
    with pytest.raises(TransactionClosedError):
        w2.append("db.t3", accounts({8: 800}))
    with pytest.raises(TransactionClosedError):
        w2.commit()
    assert w2.state == "active"
    w2.rollback()
    assert w2.state == "rolled_back"
    assert all(p["creation_csn"] == ROLLBACK_CSN
               for p in wh.transaction_info(w2.tid)["parts"] if p["role"] == "created")

    csn = w1.commit()  # the first writer is unaffected
    assert w1.state == "committed"
    state = _state(wh, csn)
    assert {r["id"]: r["balance"] for r in state["db.t1"]} == {1: 111, 2: 200, 3: 300}
    assert state["db.t2"] == _state(wh, seeded)["db.t2"]  # none of W2's staged rows
    assert state["db.t3"] == _state(wh, seeded)["db.t3"]


def test_scenario2_conflict_is_per_part_and_appends_never_conflict(wh: Warehouse) -> None:
    _setup(wh)
    with wh.begin() as t:  # a second part in t1
        t.append("db.t1", accounts({10: 1000}))
    w1 = wh.begin()
    w2 = wh.begin()
    w1.update("db.t1", pc.field("id") == 1, {"balance": 111})
    w2.update("db.t1", pc.field("id") == 10, {"balance": 1010})  # a different part of the same table
    w2.append("db.t1", accounts({11: 1100}))
    w1.append("db.t1", accounts({12: 1200}))
    w1.commit()
    w2.commit()
    got = {r["id"]: r["balance"] for r in wh.read("db.t1").to_pylist()}
    assert got == {1: 111, 2: 200, 3: 300, 10: 1010, 11: 1100, 12: 1200}


def test_scenario2_conflict_with_an_already_committed_writer(wh: Warehouse) -> None:
    _setup(wh)
    w1 = wh.begin()
    w2 = wh.begin()
    w1.overwrite("db.t1", accounts({1: 1}))
    w1.commit()
    with pytest.raises(SerializationError):  # W2's snapshot still shows the part W1 replaced
        w2.update("db.t1", pc.field("id") == 1, {"balance": 5})
    w2.rollback()
    assert wh.read("db.t1").to_pylist() == [{"id": 1, "balance": 1}]


# -- scenario 3: concurrent readers during pending updates -----------------------------------------
def test_scenario3_reader_sees_previous_state_of_staged_tables(wh: Warehouse,
                                                               open_wh: Callable[[], Warehouse]) -> None:
    seeded = _setup(wh)
    reader_wh = open_wh()
    before = _state(reader_wh)
    w1 = wh.begin()
    w1.append("db.t1", accounts({4: 400}))
    w1.update("db.t2", pc.field("id") == 1, {"balance": 1})
    # t3's update is still in progress: R1 reads all three
    r1 = reader_wh.begin(label="r1")
    assert {name: r1.read(name).sort_by("id").to_pylist() for name in TABLES} == before
    assert _state(reader_wh) == before
    w1.delete("db.t3", pc.field("id") == 1)
    assert _state(reader_wh) == before
    csn = w1.commit()

    # a reader after the commit sees all of it; the transaction begun before keeps its snapshot
    after = _state(reader_wh)
    assert after != before
    assert ids(reader_wh.read("db.t1")) == [1, 2, 3, 4]
    assert ids(reader_wh.read("db.t3")) == [2, 3]
    assert reader_wh.read("db.t2").sort_by("id").to_pylist()[0]["balance"] == 1
    assert r1.snapshot_csn == seeded
    assert {name: r1.read(name).sort_by("id").to_pylist() for name in TABLES} == before
    r2 = reader_wh.begin()
    assert r2.snapshot_csn == csn
    assert {name: r2.read(name).sort_by("id").to_pylist() for name in TABLES} == after
    assert r1.commit() == seeded  # read-only: nothing to commit, no conflict


def test_scenario3_reader_in_the_middle_of_apply_sees_nothing(wh: Warehouse, open_wh: Callable[[], Warehouse],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Stop the committer in the middle of making its commit visible: a reader still sees none of it.
    External log (ZooKeeper): after the first table was stamped, the record unapplied. SQL oracle: the
    record and its stamps share one catalog transaction, so the middle is that transaction, still open
    (the CSN taken); a reader's reads go on beside it (WAL on SQLite, MVCC on PostgreSQL)."""
    seeded = _setup(wh)
    reader_wh = open_wh()
    before = _state(reader_wh)
    seen: dict[str, Any] = {}
    real_hit = crashpoints.hit
    external = wh.runtime.oracle.external_log is not None
    middle = crashpoints.COMMIT_MID_APPLY if external else crashpoints.COMMIT_MID_RECORD

    def stop_in_the_middle(name: str) -> None:
        if name == middle and not seen:
            seen["record"] = reader_wh.commit_log(limit=1)[0]
            seen["watermark"] = reader_wh.readable_csn()
            seen["state"] = _state(reader_wh)
            if external:  # beginning takes the write lock SQLite's open commit transaction holds
                r = reader_wh.begin()
                seen["snapshot"] = r.snapshot_csn
                seen["txn_view"] = {n: r.read(n).sort_by("id").to_pylist() for n in TABLES}
                seen["reader_txn"] = r
        real_hit(name)

    monkeypatch.setattr(crashpoints, "hit", stop_in_the_middle)
    w1 = wh.begin()
    for name in TABLES:
        w1.append(name, accounts({7: 7}))
    csn = w1.commit()

    if external:
        assert seen["record"]["csn"] == csn and not seen["record"]["applied"]  # really mid-apply
    else:
        assert seen["record"]["csn"] == seeded  # really inside the commit: its record not visible yet
    assert seen["watermark"] == seeded
    assert seen["state"] == before
    assert wh.readable_csn() == csn
    assert all(ids(reader_wh.read(n)) == [1, 2, 3, 7] for n in TABLES)
    if external:
        assert seen["snapshot"] == seeded and seen["txn_view"] == before
        reader_txn = seen["reader_txn"]
        assert {n: reader_txn.read(n).sort_by("id").to_pylist() for n in TABLES} == before


def test_scenario3_concurrent_reader_thread_sees_all_or_nothing(wh: Warehouse,
                                                                open_wh: Callable[[], Warehouse]) -> None:
    _setup(wh)
    reader_wh = open_wh()
    done = threading.Event()
    observed: list[tuple[int, ...]] = []
    errors: list[BaseException] = []

    def reader() -> None:
        try:
            while not done.is_set() or len(observed) < 3:
                csn = reader_wh.readable_csn()
                observed.append(tuple(reader_wh.read(n, csn=csn).num_rows for n in TABLES))
        except BaseException as exc:  # reported to the main thread below
            errors.append(exc)

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for round_ in range(4):
            with wh.begin() as t:
                for name in TABLES:
                    t.append(name, accounts({100 + round_: 1}))
    finally:
        done.set()
        thread.join(timeout=60)
    assert not errors, errors
    assert observed
    assert all(len(set(counts)) == 1 for counts in observed), [c for c in observed if len(set(c)) > 1]
    assert all(ids(wh.read(n)) == [1, 2, 3, 100, 101, 102, 103] for n in TABLES)


# -- scenario 4: a failed update rolls everything back ---------------------------------------------
def test_scenario4_io_error_in_third_table_rolls_back_all(wh: Warehouse, root: Path | str,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    seeded = _setup(wh)
    before = _state(wh)
    files_before = storage_files(root)
    storage = wh.runtime.storage
    real_write = storage.write_part

    def failing_write(table_directory: str, partition: Any, data: pa.Table, sidecar: dict[str, Any]) -> Any:
        if sidecar.get("table") == "db.t3":
            raise StorageError("simulated I/O error writing db.t3")
        return real_write(table_directory, partition, data, sidecar)

    # monkeypatch.context, not monkeypatch.undo(): that would also unset the AWS_* variables of an s3:// root
    with monkeypatch.context() as patch:
        patch.setattr(storage, "write_part", failing_write)
        with pytest.raises(StorageError, match="simulated"), wh.begin(label="w1") as t:
            t.append("db.t1", accounts({4: 400}))
            t.update("db.t2", pc.field("id") == 2, {"balance": 0})
            t.update("db.t3", pc.field("id") == 3, {"balance": 0})

    assert t.state == "rolled_back"
    assert wh.readable_csn() == seeded  # nothing committed
    assert _state(wh) == before
    info = wh.transaction_info(t.tid)
    assert info["commit_csn"] is None
    assert all(p["creation_csn"] == ROLLBACK_CSN for p in info["parts"] if p["role"] == "created")
    assert all(p["removal_csn"] is None for p in info["parts"])
    # the removal lock on t2's part was released: a new writer can update it
    with wh.begin() as t2:
        t2.update("db.t2", pc.field("id") == 2, {"balance": 2})
    assert {r["id"]: r["balance"] for r in wh.read("db.t2").to_pylist()}[2] == 2
    # rollback touched no file; vacuum removes the staged files of the failed transaction
    untouched = ("db/t1/", "db/t3/")
    assert {f for f in storage_files(root) if f.startswith("db/t1/")} > \
        {f for f in files_before if f.startswith("db/t1/")}  # t1's staged files are still there
    wh.vacuum(retention_seconds=0)
    assert {f for f in storage_files(root) if f.startswith(untouched)} == \
        {f for f in files_before if f.startswith(untouched)}
    assert _state(wh) == {**before, "db.t2": wh.read("db.t2").sort_by("id").to_pylist()}


def test_scenario4_failed_statement_allows_only_rollback(wh: Warehouse, monkeypatch: pytest.MonkeyPatch) -> None:
    seeded = _setup(wh)
    before = _state(wh)
    storage = wh.runtime.storage
    real_read = storage.read_part

    def failing_read(table_directory: str, *args: Any) -> pa.Table:
        if table_directory.endswith("t3"):  # an internal error while computing the update of t3
            raise OSError("simulated I/O error reading a part of db.t3")
        return real_read(table_directory, *args)

    t = wh.begin()
    t.append("db.t1", accounts({4: 400}))
    t.update("db.t2", pc.field("id") == 1, {"balance": 1})
    with monkeypatch.context() as patch, pytest.raises(OSError, match="simulated"):
        patch.setattr(storage, "read_part", failing_read)
        t.update("db.t3", pc.field("id") == 3, {"balance": 0})
    with pytest.raises(TransactionClosedError):
        t.commit()
    assert _state(wh) == before and wh.readable_csn() == seeded
    t.rollback()
    assert t.state == "rolled_back"
    assert _state(wh) == before and wh.readable_csn() == seeded
    with pytest.raises(TransactionClosedError):
        t.append("db.t1", accounts({5: 500}))
