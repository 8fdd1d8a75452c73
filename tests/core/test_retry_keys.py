"""Invariant 7: staging again under the same key replaces the earlier attempt, so retries never duplicate."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pytest

from airflow_txn import ROLLBACK_CSN, Transaction, Warehouse
from airflow_txn.errors import SerializationError
from tests.helpers import ACCOUNTS, EVENTS, accounts, events, ids, storage_files

KEY = "dag=etl/task=load/map=0"


def _created(wh: Warehouse, t: Transaction) -> list[dict[str, Any]]:
    return [p for p in wh.transaction_info(t.tid)["parts"] if p["role"] == "created"]


def _removed(wh: Warehouse, t: Transaction) -> list[dict[str, Any]]:
    return [p for p in wh.transaction_info(t.tid)["parts"] if p["role"] == "removed"]


def _balances(wh: Warehouse | Transaction, table: str = "bank.accounts") -> dict[int, int]:
    return {r["id"]: r["balance"] for r in wh.read(table).to_pylist()}


def _seed(wh: Warehouse, *parts: dict[int, int]) -> None:
    wh.create_table("bank.accounts", ACCOUNTS)
    with wh.begin() as t:
        for rows in parts:
            t.append("bank.accounts", accounts(rows))


def test_append_twice_with_a_key_does_not_duplicate(wh: Warehouse) -> None:
    _seed(wh)
    t = wh.begin()
    t.append("bank.accounts", accounts({1: 10, 2: 20}), key=KEY)
    t.append("bank.accounts", accounts({1: 10, 2: 20}), key=KEY)  # the retried task
    assert ids(t.read("bank.accounts")) == [1, 2]
    parts = _created(wh, t)
    assert len(parts) == 2 and all(p["key"] == KEY for p in parts)
    assert sorted(p["creation_csn"] or 0 for p in parts) == [0, ROLLBACK_CSN]  # first attempt compensated
    assert wh.vacuum(retention_seconds=0)["parts_removed"] == 1  # its files may go while T still runs
    assert ids(t.read("bank.accounts")) == [1, 2]
    csn = t.commit()
    assert ids(wh.read("bank.accounts")) == [1, 2]
    assert [p["creation_csn"] for p in _created(wh, t)] == [csn]


def test_retry_may_stage_different_data_and_only_the_last_attempt_counts(wh: Warehouse) -> None:
    _seed(wh)
    wh.create_table("sales.events", EVENTS, partition_by=["day"])
    t = wh.begin()
    t.append("sales.events", events([1, 2], day="2024-01-01"), key=KEY)
    t.append("sales.events", events([3], day="2024-01-02"), key=KEY)
    t.append("sales.events", events([4, 5], day="2024-01-03"), key=KEY)
    t.commit()
    assert ids(wh.read("sales.events")) == [4, 5]


def test_different_keys_and_no_key_accumulate(wh: Warehouse) -> None:
    _seed(wh)
    t = wh.begin()
    t.append("bank.accounts", accounts({1: 10}), key="dag=etl/task=a/map=0")
    t.append("bank.accounts", accounts({2: 20}), key="dag=etl/task=a/map=1")
    t.append("bank.accounts", accounts({3: 30}), key="dag=etl/task=b/map=0")
    t.append("bank.accounts", accounts({4: 40}))
    t.append("bank.accounts", accounts({4: 40}))  # no key: a plain second append
    t.commit()
    assert sorted(wh.read("bank.accounts").column("id").to_pylist()) == [1, 2, 3, 4, 4]


def test_retry_of_a_task_writing_two_tables_with_a_key_per_table(wh: Warehouse) -> None:
    _seed(wh)
    wh.create_table("bank.audit", ACCOUNTS)
    t = wh.begin()
    for attempt in (1, 2):  # the whole task runs twice
        t.append("bank.accounts", accounts({1: 10 * attempt}), key=f"{KEY}/accounts")
        t.append("bank.audit", accounts({1: attempt}), key=f"{KEY}/audit")
    assert _balances(t) == {1: 20}
    assert _balances(t, "bank.audit") == {1: 2}
    t.commit()
    assert _balances(wh) == {1: 20}
    assert _balances(wh, "bank.audit") == {1: 2}


def test_same_key_in_another_transaction_is_independent(wh: Warehouse) -> None:
    _seed(wh)
    t1 = wh.begin()
    t2 = wh.begin()
    t1.append("bank.accounts", accounts({1: 10}), key=KEY)
    t2.append("bank.accounts", accounts({2: 20}), key=KEY)
    t1.commit()
    t2.commit()
    assert _balances(wh) == {1: 10, 2: 20}


def test_overwrite_retried_releases_and_retakes_its_removal_locks(wh: Warehouse, root: Path) -> None:
    _seed(wh, {1: 10, 2: 20})
    old = wh.read("bank.accounts")
    t = wh.begin()
    t.overwrite("bank.accounts", accounts({3: 30}), key=KEY)
    first_removed = {p["path"] for p in _removed(wh, t)}
    assert len(first_removed) == 1
    t.overwrite("bank.accounts", accounts({4: 40}), key=KEY)  # the retry
    assert {p["path"] for p in _removed(wh, t)} == first_removed  # the lock was taken again
    assert _balances(t) == {4: 40}  # old rows not duplicated, first attempt gone
    other = wh.begin()
    with pytest.raises(SerializationError):  # the lock is held after the retry
        other.update("bank.accounts", pc.field("id") == 1, {"balance": 0})
    other.rollback()
    assert wh.read("bank.accounts").equals(old)
    csn = t.commit()
    assert _balances(wh) == {4: 40}
    assert all(p["removal_csn"] == csn for p in _removed(wh, t))
    wh.vacuum(retention_seconds=0)
    assert len([f for f in storage_files(root) if f.endswith(".parquet")]) == 1


def test_overwrite_retried_on_fewer_partitions_releases_the_others(wh: Warehouse) -> None:
    wh.create_table("sales.events", EVENTS, partition_by=["day"])
    with wh.begin() as t0:
        t0.append("sales.events", events([1], day="2024-01-01"))
        t0.append("sales.events", events([2], day="2024-01-02"))
    t = wh.begin()
    both = [{"day": "2024-01-01"}, {"day": "2024-01-02"}]
    t.overwrite("sales.events", events([10], day="2024-01-01"), partitions=both, key=KEY)
    assert len(_removed(wh, t)) == 2
    t.overwrite("sales.events", events([11], day="2024-01-01"), partitions=[{"day": "2024-01-01"}], key=KEY)
    assert [p["partition"] for p in _removed(wh, t)] == [{"day": "2024-01-01"}]
    with wh.begin() as other:  # 2024-01-02 is free again
        other.update("sales.events", pc.field("id") == 2, {"value": 2.0})
    t.commit()
    rows = {r["id"]: r["value"] for r in wh.read("sales.events").to_pylist()}
    assert rows == {2: 2.0, 11: 1.0}


def test_update_retried_is_computed_from_the_snapshot_again(wh: Warehouse) -> None:
    _seed(wh, {1: 10, 2: 20}, {3: 30})
    t = wh.begin()
    bump = {"balance": pc.field("balance") + 1}
    t.update("bank.accounts", pc.field("id") == 1, bump, key=KEY)
    t.update("bank.accounts", pc.field("id") == 1, bump, key=KEY)  # retried: +1 once, not twice
    assert _balances(t) == {1: 11, 2: 20, 3: 30}
    t.commit()
    assert _balances(wh) == {1: 11, 2: 20, 3: 30}
    assert len(wh.read("bank.accounts")) == 3


def test_delete_retried_with_the_same_key(wh: Warehouse) -> None:
    _seed(wh, {1: 10, 2: 20, 3: 30})
    t = wh.begin()
    t.delete("bank.accounts", pc.field("id") == 1, key=KEY)
    t.delete("bank.accounts", pc.field("id") == 2, key=KEY)  # the retry deletes something else
    t.commit()
    assert _balances(wh) == {1: 10, 3: 30}


def test_retry_after_compensation_commits_only_the_second_attempt(wh: Warehouse, root: Path) -> None:
    _seed(wh, {1: 10})
    t = wh.begin()
    t.update("bank.accounts", pc.field("id") == 1, {"balance": 11}, key=KEY)  # the first try
    assert len(_removed(wh, t)) == 1
    # the failed try's staged parts are compensated before the retry runs
    assert t.compensate(KEY) == 2  # its created part and its removal lock
    assert [p["creation_csn"] for p in _created(wh, t)] == [ROLLBACK_CSN]
    assert _removed(wh, t) == []  # its removal lock was released
    assert _balances(t) == {1: 10}
    t.append("bank.accounts", accounts({2: 22}), key=KEY)  # the second attempt
    csn = t.commit()
    assert _balances(wh) == {1: 10, 2: 22}
    assert sorted(p["creation_csn"] for p in _created(wh, t)) == [csn, ROLLBACK_CSN]
    files_before = storage_files(root)
    wh.vacuum(retention_seconds=0)  # the compensated attempt's files go, the committed ones stay
    assert len(storage_files(root)) == len(files_before) - 1  # its part file (one plain file, no sidecar)
    assert _balances(wh) == {1: 10, 2: 22}
    with wh.begin() as other:  # the part the first try had locked is writable
        other.update("bank.accounts", pc.field("id") == 1, {"balance": 12})
    assert _balances(wh) == {1: 12, 2: 22}


def test_default_key_is_used_when_no_key_is_passed(wh: Warehouse) -> None:
    _seed(wh)
    t = wh.begin()
    t.default_key = KEY
    t.append("bank.accounts", accounts({1: 10}))
    t.append("bank.accounts", accounts({1: 10}))  # retried task, key from the default
    assert [p["key"] for p in _created(wh, t)] == [KEY, KEY]
    t.append("bank.accounts", accounts({2: 20}), key="explicit")  # an explicit key wins
    assert ids(t.read("bank.accounts")) == [1, 2]
    attached = wh.attach(t.tid)  # a new handle has no default key: appends accumulate
    attached.append("bank.accounts", accounts({3: 30}))
    attached.append("bank.accounts", accounts({3: 30}))
    t.commit()
    assert sorted(wh.read("bank.accounts").column("id").to_pylist()) == [1, 2, 3, 3]
