"""Keys with attempt numbers (Airflow try numbers): writes of one attempt accumulate, a newer attempt
replaces older ones, a stale (zombie) attempt is refused without harming the transaction."""

from __future__ import annotations

from collections.abc import Callable

import pyarrow.compute as pc
import pytest

from airflow_txn import Warehouse
from airflow_txn.errors import InvalidNameError, StaleAttemptError
from tests.harness.statements import statements
from tests.helpers import accounts, events, ids, make_tables

KEY = "backfill/load_day/0"


def test_writes_of_one_attempt_accumulate_across_tables(wh: Warehouse) -> None:
    make_tables(wh)
    t = wh.begin().use_key(KEY, attempt=1)
    t.append("sales.events", events([1, 2]))
    t.append("sales.accounts", accounts({1: 10}))
    t.append("sales.events", events([3]))
    t.commit()
    assert ids(wh.read("sales.events")) == [1, 2, 3]
    assert ids(wh.read("sales.accounts")) == [1]


def test_newer_attempt_replaces_every_write_of_older_ones(wh: Warehouse,
                                                          open_wh: Callable[[], Warehouse]) -> None:
    make_tables(wh)
    with wh.begin() as seed:
        seed.append("sales.accounts", accounts({1: 10, 2: 20}))
    first = wh.begin().use_key(KEY, attempt=1)
    first.append("sales.events", events([1, 2]))
    first.update("sales.accounts", pc.field("id") == 1, {"balance": 11})
    # the retry runs in another process, attached to the same transaction
    retry = open_wh().attach(first.tid).use_key(KEY, attempt=2)
    retry.append("sales.events", events([7]))
    assert ids(retry.read("sales.events")) == [7]
    assert sorted(retry.read("sales.accounts").column("balance").to_pylist()) == [10, 20]
    retry.update("sales.accounts", pc.field("id") == 2, {"balance": 22})
    retry.commit()
    assert ids(wh.read("sales.events")) == [7]
    assert sorted(wh.read("sales.accounts").column("balance").to_pylist()) == [10, 22]


def test_stale_attempt_is_refused_and_changes_nothing(wh: Warehouse) -> None:
    make_tables(wh)
    t = wh.begin()
    zombie = wh.attach(t.tid).use_key(KEY, attempt=1)
    retry = wh.attach(t.tid).use_key(KEY, attempt=2)
    retry.append("sales.events", events([2]))
    before = wh.transaction_info(t.tid)["parts"]
    with pytest.raises(StaleAttemptError, match="stale"):
        zombie.append("sales.events", events([1]))
    assert wh.transaction_info(t.tid)["parts"] == before
    assert t.state == "active"
    retry.append("sales.events", events([3]))
    t.commit()
    assert ids(wh.read("sales.events")) == [2, 3]


def test_explicit_compensation_hides_the_failed_attempt(wh: Warehouse) -> None:
    make_tables(wh)
    t = wh.begin().use_key(KEY, attempt=1)
    t.append("sales.events", events([1, 2]))
    assert t.compensate(attempt=2) == 1
    assert t.read("sales.events").num_rows == 0
    with pytest.raises(InvalidNameError):
        wh.attach(t.tid).compensate()
    t.rollback()


def test_explicit_keys_replace_each_previous_write(wh: Warehouse) -> None:
    make_tables(wh)
    t = wh.begin()
    t.append("sales.events", events([1]), key="k")
    t.append("sales.events", events([2]), key="k")
    t.commit()
    assert ids(wh.read("sales.events")) == [2]


def test_tables_read_lists_each_keys_reads_and_forgets_a_retried_attempts(wh: Warehouse) -> None:
    """What the Airflow layer reports as lineage inputs: the tables read through keyed handles, per key and
    attempt; a retry withdraws its failed attempt's reads. last_commit_csn(at=) is the version such a read saw."""
    make_tables(wh)
    with wh.begin() as seed:
        seed.append("sales.accounts", accounts({1: 10}))
    seeded = wh.last_commit_csn("sales.accounts")
    t = wh.begin().use_key(KEY, attempt=1)
    t.read("sales.accounts")
    other = wh.attach(t.tid).use_key("backfill/other/-1", attempt=1)
    other.read("sales.events")
    other.append("sales.events", events([1]))
    assert wh.tables_read(t.tid) == ["sales.accounts", "sales.events"]
    assert wh.tables_read(t.tid, KEY, 1) == ["sales.accounts"]
    assert wh.tables_read(t.tid, KEY, 2) == []
    wh.attach(t.tid).use_key(KEY, attempt=2).compensate(attempt=2)  # the retry withdraws attempt 1
    assert wh.tables_read(t.tid) == ["sales.events"]
    with wh.begin() as later:
        later.append("sales.accounts", accounts({2: 20}))
    assert wh.last_commit_csn("sales.accounts", at=t.snapshot_csn) == seeded < wh.last_commit_csn("sales.accounts")
    assert wh.last_commit_csn("sales.events", at=t.snapshot_csn) is None


def test_a_key_with_nothing_before_its_attempt_is_withdrawn_by_one_lookup(wh: Warehouse) -> None:
    """Withdrawing what earlier attempts of a key staged costs one catalog statement when there is nothing to withdraw
    (a task's first try, or its later statements): it used to look up dependents, compensate and forget scans with
    nine. Each write of an attempt saves as many (docs/BENCHMARKS.md, B11). Results unchanged: test_attempts above."""
    make_tables(wh)
    t = wh.begin()
    first = wh.attach(t.tid).use_key(KEY, attempt=1)
    with statements(wh) as seen:
        assert first.compensate(attempt=1) == 0
    assert not [s for s in seen if s.startswith(("UPDATE txn_parts", "UPDATE txn_table_versions", "DELETE"))], seen
    assert sum("txn_scans" in s or "txn_parts" in s for s in seen) <= 1, seen
    first.append("sales.events", events([1]))
    with statements(wh) as seen:  # the attempt's second write: its own first write is not before it
        first.append("sales.events", events([2]))
    assert not [s for s in seen if s.startswith(("UPDATE txn_parts", "UPDATE txn_table_versions", "DELETE"))], seen
    retry = wh.attach(t.tid).use_key(KEY, attempt=2)
    assert retry.compensate(attempt=2) == 2  # what attempt 1 staged is found and withdrawn
    retry.append("sales.events", events([3]))
    t.commit()
    assert ids(wh.read("sales.events")) == [3]
