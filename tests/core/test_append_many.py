"""Transaction.append_many: several tables in ONE statement (files written side by side, registered at once).

It runs on every back end of the core suite, so in `postgres-zookeeper-s3` the part uploads really overlap
(storage/side_by_side.py) against a real S3 server; the cases check what must hold either way: all tables
or none, bad input refused before anything is written, a retry under a key replacing the whole statement,
and no file left behind when a write or the registration fails.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from airflow_txn import Warehouse
from airflow_txn.errors import (
    InvalidArgumentError,
    SchemaMismatchError,
    StorageError,
    TableNotFoundError,
    TransactionClosedError,
)
from airflow_txn.storage import side_by_side
from airflow_txn.storage.root import Storage
from tests.core.test_errors import bind, rejected_all, still_usable
from tests.helpers import accounts, events, ids, make_tables, part_writer_tags, storage_files, unregistered_parts

KEY = "dag=etl/task=load/map=0"


@pytest.fixture
def tables(wh: Warehouse) -> Warehouse:
    """sales.events (partitioned by day) and sales.accounts, empty."""
    make_tables(wh)
    return wh


def _two_days() -> pa.Table:
    return pa.concat_tables([events([1, 2]), events([3], day="2024-01-02")])


def test_one_statement_stages_every_table_and_one_commit_shows_them_all(tables: Warehouse) -> None:
    wh = tables
    t = wh.begin()
    staged = t.append_many({"sales.events": _two_days(), "sales.accounts": accounts({1: 10, 2: 20})})
    assert staged == {"sales.events": 3, "sales.accounts": 2}
    assert ids(wh.read("sales.events")) == [] and ids(wh.read("sales.accounts")) == []  # nothing visible yet
    assert sorted(ids(t.read("sales.events"))) == [1, 2, 3]  # the transaction sees its own writes
    csn = t.commit()
    assert sorted(ids(wh.read("sales.events", csn=csn))) == [1, 2, 3]
    assert sorted(ids(wh.read("sales.accounts", csn=csn))) == [1, 2]
    assert ids(wh.read("sales.events", csn=csn - 1)) == []
    parts = wh.transaction_info(t.tid)["parts"]
    assert len(parts) == 3  # two partitions of events, one part of accounts
    for part in parts:
        tags = part_writer_tags(wh, part["table"], part["path"])
        assert tags["tid"] == t.tid and tags["table"] == part["table"]


def test_bad_input_for_one_table_stages_nothing_for_any(tables: Warehouse, root: Path | str) -> None:
    """Every table's data is checked before the first file is written (invariant 9)."""
    wh = tables
    t = wh.begin()
    good = {"sales.accounts": accounts({1: 10})}
    rejected_all(wh, root, SchemaMismatchError, [
        bind(t.append_many, {**good, "sales.events": pa.table({"id": [1]})}),
        bind(t.append_many, {**good, "sales.events": pa.table({"id": ["x"], "day": ["d"], "value": [1.0]})}),
    ])
    rejected_all(wh, root, TableNotFoundError, [bind(t.append_many, {**good, "sales.nope": accounts({2: 2})})])
    rejected_all(wh, root, InvalidArgumentError, [bind(t.append_many, {}), bind(t.append_many, [good])],
                 match="append_many takes a non-empty dict")
    still_usable(wh, t)
    assert ids(wh.read("sales.accounts")) == [99]  # still_usable's row only


def test_a_retry_under_the_key_replaces_the_whole_statement(tables: Warehouse) -> None:
    """One key, one statement over two tables: the retry withdraws BOTH tables' earlier rows, also from a
    table the retry no longer writes."""
    wh = tables
    t = wh.begin()
    t.append_many({"sales.events": _two_days(), "sales.accounts": accounts({1: 10})}, key=KEY)
    t.append_many({"sales.events": events([7])}, key=KEY)  # the retry: other rows, one table only
    assert sorted(ids(t.read("sales.events"))) == [7]
    assert ids(t.read("sales.accounts")) == []
    t.append_many({"sales.events": events([8]), "sales.accounts": accounts({5: 50})}, key=KEY)
    t.commit()
    assert sorted(ids(wh.read("sales.events"))) == [8]
    assert ids(wh.read("sales.accounts")) == [5]


def test_a_failed_write_leaves_no_file_and_fails_the_transaction(tables: Warehouse, root: Path | str,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A storage error in one of the statement's writes: the other writes are waited for and removed, nothing
    is registered, and the transaction is failed (a storage failure is no rejected input)."""
    wh = tables
    before = storage_files(root)
    real = Storage.write_part
    written = threading.Condition()
    events_parts: list[Any] = []

    def failing_for_accounts(self: Storage, directory: str, partition: Any, data: pa.Table, tags: Any) -> Any:
        if tags["table"] == "sales.accounts":
            with written:  # the other writes (two days of events) finish first, so there is something to remove
                assert written.wait_for(lambda: len(events_parts) == 2, timeout=60), "the events parts were not written"
            raise StorageError("injected: the store refused the upload")
        part = real(self, directory, partition, data, tags)
        with written:
            events_parts.append(part)
            written.notify_all()
        return part

    t = wh.begin()
    with monkeypatch.context() as patched, pytest.raises(StorageError, match="injected"):
        patched.setattr(Storage, "write_part", failing_for_accounts)
        t.append_many({"sales.events": _two_days(), "sales.accounts": accounts({1: 10})})
    assert storage_files(root) == before
    assert unregistered_parts(wh, "sales.events") == {}
    assert wh.transaction_info(t.tid)["parts"] == []
    with pytest.raises(TransactionClosedError):
        t.append("sales.accounts", accounts({2: 2}))


def test_a_refused_registration_removes_the_files_it_wrote(tables: Warehouse, root: Path | str) -> None:
    """The transaction was rolled back by another handle after this statement's checks: the registration
    refuses it, and the files it wrote are removed at once (storage as it was)."""
    wh = tables
    t = wh.begin()
    t.append("sales.accounts", accounts({1: 1}))  # the tables are now known: the append checks only at registration
    before = storage_files(root)
    wh.attach(t.tid).rollback()
    with pytest.raises(TransactionClosedError):
        t.append_many({"sales.events": _two_days(), "sales.accounts": accounts({2: 2})})
    assert storage_files(root) == before


# -- the runner itself (no warehouse) ----------------------------------------------------------------------


def test_side_by_side_waits_for_every_call_when_one_fails() -> None:
    finished: list[str] = []
    release = threading.Event()

    def slow() -> str:
        release.wait(5)
        finished.append("slow")
        return "slow"

    def failing() -> str:
        release.set()
        raise ValueError("boom")

    outcomes = side_by_side.run_settled([slow, failing, lambda: "quick"])
    assert outcomes[0] == "slow" and finished == ["slow"]  # the failure did not return before `slow` ended
    assert isinstance(outcomes[1], ValueError) and outcomes[2] == "quick"


def test_one_after_the_other_stops_at_the_first_failure() -> None:
    ran: list[int] = []

    def call(n: int) -> int:
        ran.append(n)
        if n == 1:
            raise OSError("disk full")
        return n

    outcomes = side_by_side.run_settled([lambda: call(0), lambda: call(1), lambda: call(2)], parallel=False)
    assert ran == [0, 1]
    assert outcomes[0] == 0 and isinstance(outcomes[1], OSError)
    assert isinstance(outcomes[2], side_by_side.NotStartedError)
