"""A table change is metadata only (docs/DESIGN.md, D27): the catalog work of a transaction that adds a column to a
table, from begin to the end of its commit, does not grow with the parts the table holds (benchmarks B15 times it).
Nor does a rollback's, or an apply's table by table (an external log's, and a record an older committer left):
each stamps a transaction's own parts along the tid indexes. Counted deterministically, never timed: SQLite's
virtual-machine steps over every statement (a progress handler on each catalog connection), for a table of 4 parts
against one of 400."""

from __future__ import annotations

import pyarrow as pa
import pytest

from airflow_txn import Warehouse
from airflow_txn.core import apply, commit
from tests.harness.statements import sqlite_steps

pytestmark = pytest.mark.parametrize("catalog_url", ["sqlite"], indirect=True)  # SQLite's VM steps are counted


def _table(wh: Warehouse, name: str, parts: int) -> None:
    days = pa.array([i % parts for i in range(2 * parts)], pa.int32())
    wh.create_table(name, pa.schema([("day", pa.int32()), ("qty", pa.int64())]), ["day"])
    with wh.begin() as t:
        t.append(name, pa.table({"day": days, "qty": pa.array(range(2 * parts), pa.int64())}))


def _add_column_steps(wh: Warehouse, table: str, column: str) -> int:
    with sqlite_steps(wh) as counted, wh.begin() as t:
        t.add_column(table, pa.field(column, pa.float64()))
    return counted[0]


def test_adding_a_column_costs_the_catalog_the_same_on_a_table_of_400_parts_as_on_one_of_4(wh: Warehouse) -> None:
    _table(wh, "cost.small", 4)
    _table(wh, "cost.large", 400)
    _add_column_steps(wh, "cost.small", "warm")  # statements compiled, pages cached
    _add_column_steps(wh, "cost.large", "warm")
    small = _add_column_steps(wh, "cost.small", "discount")
    large = _add_column_steps(wh, "cost.large", "discount")
    assert small > 500 and large <= small * 1.2, (small, large)  # a walk over the parts adds ~400 x its steps


def _staged(wh: Warehouse, table: str) -> str:
    """A transaction that appended one part to `table`: its tid."""
    t = wh.begin()
    t.append(table, pa.table({"day": pa.array([0], pa.int32()), "qty": pa.array([1], pa.int64())}))
    return t.tid


def _rollback_steps(wh: Warehouse, table: str) -> int:
    tid = _staged(wh, table)
    with sqlite_steps(wh) as counted:
        wh.attach(tid).rollback()
    return counted[0]


def _apply_steps(wh: Warehouse, table: str) -> int:
    tid = _staged(wh, table)
    csn, _ = commit._record(wh.runtime, tid)  # a record not applied yet, as an older committer or ZooKeeper leaves it
    with sqlite_steps(wh) as counted:
        apply.apply_record(wh.runtime, csn, tid)
    return counted[0]


def test_a_rollback_and_an_apply_cost_the_catalog_the_same_on_a_table_of_400_parts_as_on_one_of_4(
        wh: Warehouse) -> None:
    _table(wh, "cost.small", 4)
    _table(wh, "cost.large", 400)
    for steps in (_rollback_steps, _apply_steps):
        steps(wh, "cost.small"), steps(wh, "cost.large")  # statements compiled, pages cached
        small, large = steps(wh, "cost.small"), steps(wh, "cost.large")
        assert small > 100 and large <= small * 1.2, (steps.__name__, small, large)
