"""A table change is metadata only (docs/DESIGN.md, D27): the catalog work of a transaction that adds a column to a
table, from begin to the end of its commit, does not grow with the parts the table holds (benchmarks B15 times it).
Counted deterministically, never timed: SQLite's virtual-machine steps over every statement of the transaction (a
progress handler on each catalog connection), for a table of 4 parts against one of 400."""

from __future__ import annotations

import pyarrow as pa
import pytest

from airflow_txn import Warehouse
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
