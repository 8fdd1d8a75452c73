"""Invariant 7 across keys: a retried key never resurrects rows other keys removed, nor duplicates rows
they carried over, and a newer attempt fences older ones from the moment it starts.

When key K is staged again (or compensated), every other key whose statements rewrote K's earlier
output (took the removal lock on a part K staged) is invalidated with it: its staged parts are
withdrawn too, transitively, and commit refuses with InvalidatedKeysError naming those keys until each
has run again. A write with no key cannot run again, so a retry whose output it rewrote is refused
(RetryConflictError). Either way the transaction stays usable.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable

import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import func, select

from airflow_txn import Warehouse
from airflow_txn.catalog import schema
from airflow_txn.errors import InvalidatedKeysError, RetryConflictError, StaleAttemptError
from tests.helpers import EVENTS, events, ids
from tests.keyed_model import DAYS, MERGES, Latest, Op, commit_running_again, rows_table, sorted_rows

D1 = [{"day": "2024-01-01"}]


def _seed(wh: Warehouse, rows: list[int]) -> None:
    wh.create_table("sales.events", events([]).schema, partition_by=["day"])
    with wh.begin() as t:
        t.append("sales.events", events(rows))


def test_a_retry_does_not_resurrect_rows_another_key_replaced(wh: Warehouse) -> None:
    """Issue 16, case 1: B deletes id 1 from committed P=[1,2,3]; A overwrites d1 with [10]; B runs
    again. Before the fix B's retry released its lock on P and the commit read [2,3,10]."""
    _seed(wh, [1, 2, 3])
    t = wh.begin()
    t.delete("sales.events", pc.field("id") == 1, key="B")
    t.overwrite("sales.events", events([10]), partitions=D1, key="A")
    t.delete("sales.events", pc.field("id") == 1, key="B")  # B again
    with pytest.raises(InvalidatedKeysError, match="'A'") as refused:
        t.commit()
    assert refused.value.keys == ["A"] and refused.value.by == {"A": "B"}
    assert wh.transaction_info(t.tid)["must_run_again"] == {"A": "B"}
    assert t.state == "active"
    assert ids(t.read("sales.events")) == [2, 3]  # A's work is withdrawn until A runs again
    t.overwrite("sales.events", events([10]), partitions=D1, key="A")  # A runs again
    assert wh.transaction_info(t.tid)["must_run_again"] == {}
    t.commit()
    assert ids(wh.read("sales.events")) == [10]


def test_a_retry_through_another_handle_with_attempts(wh: Warehouse,
                                                      open_wh: Callable[[], Warehouse]) -> None:
    """Issue 16, case 1 with attached handles and use_key: B's attempt 2 invalidates A's attempt 1,
    whose later statements are then stale; A's attempt 2 re-runs and the commit reads [10]."""
    _seed(wh, [1, 2, 3])
    t = wh.begin()
    b1 = open_wh().attach(t.tid).use_key("B", attempt=1)
    a1 = open_wh().attach(t.tid).use_key("A", attempt=1)
    b1.delete("sales.events", pc.field("id") == 1)
    a1.overwrite("sales.events", events([10]), partitions=D1)
    b2 = open_wh().attach(t.tid).use_key("B", attempt=2)
    b2.delete("sales.events", pc.field("id") == 1)
    with pytest.raises(StaleAttemptError, match="invalidated"):
        a1.append("sales.events", events([11]))  # A's invalidated attempt may not go on
    with pytest.raises(InvalidatedKeysError):
        t.commit()
    a2 = open_wh().attach(t.tid).use_key("A", attempt=2)
    a2.overwrite("sales.events", events([10]), partitions=D1)
    t.commit()
    assert ids(wh.read("sales.events")) == [10]


def test_a_retry_after_a_downstream_rewrite_does_not_duplicate_rows(wh: Warehouse) -> None:
    """Issue 16, case 2: L appends [1,2,3]; C deletes id 3 (restaging [1,2] under C); L runs again.
    Before the fix C's copy of L's first rows lived on and the commit read [1,1,2,2,3]."""
    _seed(wh, [])
    t = wh.begin()
    t.append("sales.events", events([1, 2, 3]), key="L")
    t.delete("sales.events", pc.field("id") == 3, key="C")
    t.append("sales.events", events([1, 2, 3]), key="L")  # L again (cleared without its downstream)
    assert ids(t.read("sales.events")) == [1, 2, 3]
    with pytest.raises(InvalidatedKeysError, match=r"'C'.*'L'"):
        t.commit()
    t.delete("sales.events", pc.field("id") == 3, key="C")
    t.commit()
    assert ids(wh.read("sales.events")) == [1, 2]


def test_invalidation_is_transitive(wh: Warehouse) -> None:
    """Issue 16, case 2 one step further: D updated C's copy of L's rows; L's retry invalidates both."""
    _seed(wh, [])
    t = wh.begin()
    t.append("sales.events", events([1, 2, 3]), key="L")
    t.delete("sales.events", pc.field("id") == 3, key="C")
    t.update("sales.events", pc.field("id") == 2, {"value": 5.0}, key="D")
    t.append("sales.events", events([1, 2, 3]), key="L")
    with pytest.raises(InvalidatedKeysError) as refused:
        t.commit()
    assert refused.value.keys == ["C", "D"]
    t.delete("sales.events", pc.field("id") == 3, key="C")
    with pytest.raises(InvalidatedKeysError, match="'D'"):
        t.commit()
    t.update("sales.events", pc.field("id") == 2, {"value": 5.0}, key="D")
    t.commit()
    assert {r["id"]: r["value"] for r in wh.read("sales.events").to_pylist()} == {1: 1.0, 2: 5.0}


def test_compensating_a_key_invalidates_its_consumers(wh: Warehouse) -> None:
    """Issue 16, case 2 through compensate(): withdrawing L (a failed task) withdraws C's copy too."""
    _seed(wh, [])
    t = wh.begin()
    t.append("sales.events", events([1, 2, 3]), key="L")
    t.delete("sales.events", pc.field("id") == 3, key="C")
    assert t.compensate("L") == 3  # L's part, and C's part and lock
    assert t.read("sales.events").num_rows == 0
    t.append("sales.events", events([1, 2, 3]), key="L")
    t.delete("sales.events", pc.field("id") == 3, key="C")
    t.commit()
    assert ids(wh.read("sales.events")) == [1, 2]


def test_a_retry_whose_output_an_unkeyed_write_rewrote_is_refused(wh: Warehouse) -> None:
    """Issue 16, case 2 with a consumer that cannot run again (no key): the retry is refused, the
    transaction stays usable and unchanged."""
    _seed(wh, [])
    t = wh.begin()
    t.append("sales.events", events([1, 2, 3]), key="L")
    t.delete("sales.events", pc.field("id") == 3)  # no key
    before = wh.transaction_info(t.tid)["parts"]
    with pytest.raises(RetryConflictError, match="no key"):
        t.append("sales.events", events([1, 2, 3]), key="L")
    with pytest.raises(RetryConflictError):
        t.compensate("L")
    assert wh.transaction_info(t.tid)["parts"] == before
    assert t.state == "active"
    t.commit()
    assert ids(wh.read("sales.events")) == [1, 2]


def test_keys_that_did_not_consume_the_output_are_left_alone(wh: Warehouse) -> None:
    """A retry invalidates only keys that rewrote its output: an append beside it, or a delete that
    matched only committed rows, keeps its work."""
    _seed(wh, [7])
    t = wh.begin()
    t.append("sales.events", events([1, 2]), key="L")
    t.append("sales.events", events([5]), key="X")
    t.delete("sales.events", pc.field("id") == 7, key="Y")
    t.append("sales.events", events([1, 2]), key="L")
    t.commit()
    assert ids(wh.read("sales.events")) == [1, 2, 5]


def test_a_key_that_read_the_retried_output_through_a_keyed_handle_must_run_again(
        wh: Warehouse, open_wh: Callable[[], Warehouse]) -> None:
    """Invariant 7, reads: R read L's staged rows (a keyed handle, as an Airflow task's) and appended a
    total derived from them; L's retry withdraws R's total. A read with no key records nothing."""
    _seed(wh, [])
    wh.create_table("sales.totals", events([]).schema, partition_by=["day"])
    t = wh.begin()
    t.append("sales.events", events([1, 2]), key="L")
    wh.attach(t.tid).read("sales.events")  # no key: a look, not a dependency
    reader = open_wh().attach(t.tid).use_key("R", attempt=1)
    total = len(reader.read("sales.events"))
    reader.append("sales.totals", events([total]))
    t.append("sales.events", events([1, 2, 3]), key="L")  # L again, with one more row
    assert t.read("sales.totals").num_rows == 0
    with pytest.raises(InvalidatedKeysError, match="'R'"):
        t.commit()
    rerun = open_wh().attach(t.tid).use_key("R", attempt=2)
    rerun.append("sales.totals", events([len(rerun.read("sales.events"))]))
    t.commit()
    assert ids(wh.read("sales.totals")) == [3]


def test_the_zombie_fence_holds_when_the_retry_stages_nothing(wh: Warehouse) -> None:
    """Issue 16, case 3: try 2 compensates (attempt 2) and writes nothing; try 1, still running,
    then stages [99]. Before the fix the fence looked only at staged parts and let [99] commit."""
    _seed(wh, [])
    t = wh.begin()
    zombie = wh.attach(t.tid).use_key("load", attempt=1)
    retry = wh.attach(t.tid).use_key("load", attempt=2)
    retry.compensate(attempt=2)
    with pytest.raises(StaleAttemptError, match="stale"):
        zombie.append("sales.events", events([99]))
    assert t.state == "active"
    t.commit()
    assert wh.read("sales.events").num_rows == 0


def test_a_newer_attempt_never_reads_what_older_attempts_of_its_key_staged(wh: Warehouse) -> None:
    """The commit must equal every key's latest attempt run from scratch: attempt 2 of R reading before its
    first write saw attempt 1's staged [1] (withdrawn only at that write) and built b=[11] on rows that never
    commit. A keyed read of a newer attempt sees the key's older attempts withdrawn, as its writes do."""
    _seed(wh, [])
    wh.create_table("sales.derived", EVENTS, partition_by=["day"])
    t = wh.begin()
    wh.attach(t.tid).use_key("R", attempt=1).append("sales.events", events([1]))
    retry = wh.attach(t.tid).use_key("R", attempt=2)
    seen = ids(retry.read("sales.events"))
    assert seen == []
    retry.append("sales.derived", events([i + 10 for i in seen] or [0]))
    t.commit()
    assert ids(wh.read("sales.events")) == [] and ids(wh.read("sales.derived")) == [0]
    # the same attempt still reads its own writes
    t = wh.begin()
    again = wh.attach(t.tid).use_key("S", attempt=1)
    again.append("sales.events", events([5]))
    assert ids(again.read("sales.events")) == [5]
    t.rollback()


def test_an_attempt_fences_older_ones_from_the_moment_it_starts(wh: Warehouse) -> None:
    """Issue 16, case 3: use_key(attempt=2) alone (before any write) fences attempt 1."""
    _seed(wh, [])
    t = wh.begin()
    zombie = wh.attach(t.tid).use_key("load", attempt=1)
    wh.attach(t.tid).use_key("load", attempt=2)
    with pytest.raises(StaleAttemptError):
        zombie.append("sales.events", events([99]))
    t.commit()
    assert wh.read("sales.events").num_rows == 0


def _key_rows(wh: Warehouse, tid: str) -> int:
    with wh.runtime.catalog.read() as conn:
        return sum(int(conn.execute(select(func.count()).select_from(table).where(table.c.tid == tid)).scalar_one())
                   for table in (schema.keys, schema.scans))


def test_vacuum_drops_the_key_rows_of_ended_transactions_only(wh: Warehouse) -> None:
    """What retries consult (txn_keys, txn_scans) is needed while a transaction runs, never after."""
    _seed(wh, [1])
    running = wh.begin().use_key("R", attempt=1)
    running.delete("sales.events", pc.field("id") == 1)
    done = wh.begin().use_key("D", attempt=1)
    done.append("sales.events", events([2]))
    done.commit()
    assert _key_rows(wh, running.tid) > 0 and _key_rows(wh, done.tid) > 0
    assert wh.vacuum()["rows_purged"]["keys"] == 2  # D's key row and its append's scan row
    assert _key_rows(wh, done.tid) == 0
    assert _key_rows(wh, running.tid) > 0
    running.commit()
    assert ids(wh.read("sales.events")) == [2]


# -- a model-based check: multi-key histories with retries against re-running the keys from scratch --------
# One transaction per example, on a fresh table of the same warehouse; every statement is keyed (explicit
# keys: a key's latest statement replaces all it staged before). Keys rewrite each other's output often
# (few ids, two days). Commit is retried after running again every key it names. The committed table must
# then equal the reference (tests/keyed_model.py): the snapshot's rows with every key's latest statement re-run
# from scratch, in the order those statements last ran. tests/conformance/test_histories.py runs such histories
# with keyed reads, each statement through an engine path of its own. Key D changes the table (add_column, issue
# 32): its retry replaces its earlier attempt's column and withdraws the writes built on it (they run again), and the
# committed schema holds the column of its latest attempt only.
OPS = st.builds(Op, st.sampled_from(["append", "append", "delete", "update", "overwrite", "merge"]),
                st.lists(st.integers(0, 3), min_size=1, max_size=3).map(tuple),
                st.sampled_from(DAYS), clause=st.sampled_from(sorted(MERGES)))
CHANGES = st.builds(Op, st.just("add_column"), st.tuples(st.integers(0, 2)))
HISTORY = st.lists(st.one_of(st.tuples(st.sampled_from("ABC"), OPS), st.tuples(st.just("D"), CHANGES)),
                   min_size=2, max_size=9)
SEED_ROWS = st.lists(st.lists(st.tuples(st.integers(0, 3), st.sampled_from(DAYS)), max_size=3), max_size=2)
EXAMPLES = itertools.count()


@settings(max_examples=int(os.environ.get("AIRFLOW_TXN_HYPOTHESIS_EXAMPLES", "25")), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(seed=SEED_ROWS, history=HISTORY)
def test_keyed_histories_match_rerunning_the_keys_from_scratch(wh: Warehouse, seed: list[list[tuple[int, str]]],
                                                               history: list[tuple[str, Op]]) -> None:
    """Issue 16, cases 1 and 2 as a model: whatever keys rewrote each other's output and were retried, the
    commit (after the keys it names ran again) equals the keys' latest statements re-run from scratch."""
    table = f"model.t{next(EXAMPLES)}"
    wh.create_table(table, EVENTS, partition_by=["day"])
    for part in seed:
        if part:
            with wh.begin() as t0:
                t0.append(table, rows_table([(i, day, 0.0) for i, day in part]))
    start = {table: sorted_rows(wh.read(table))}
    t = wh.begin()
    latest = Latest()
    for key, op in history:
        op.run(t, table, key)
        latest.ran(key, table, op)

    def run_again(key: str) -> None:
        op = latest.of[key].op
        op.run(t, table, key)
        latest.ran(key, table, op)

    commit_running_again(t, latest, run_again)
    assert t.state == "committed"
    assert sorted_rows(wh.read(table)) == latest.replay(start)[table]
    assert wh.schema(table).names == latest.columns(table)
