"""DDL in an Airflow run (issue 32, point 3): a task of a transaction group changes two tables' schemas and the
mapped loads after it write the new column; the DDL and the data commit at one CSN, or not at all. A keyed retry
replaces the failed try's DDL as it replaces its data. Real dag.test() runs of tests/airflow/dag_files/txn_ddl_probe.py
(the DAG docs/AIRFLOW.md shows)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from airflow_txn import Warehouse
from airflow_txn.catalog import table_registry, table_versions
from airflow_txn.catalog.txn_records import COMMITTED, ROLLED_BACK
from airflow_txn.model.csn import ROLLBACK_CSN
from tests.airflow.helpers import run_dag, task_states, transactions_of

pytestmark = pytest.mark.airflow
DAG_ID = "txn_ddl_probe"
ORDERS, ITEMS = "probe.orders", "probe.order_items"
ORDERS_SCHEMA = pa.schema([("order_id", pa.int64()), ("day", pa.string()), ("amount", pa.float64())])
ITEMS_SCHEMA = pa.schema([("order_id", pa.int64()), ("item", pa.int64()), ("day", pa.string())])


def _tables(wh: Warehouse) -> int:
    """Both tables partitioned by day, with day 2024-01-01 (kept) and 2024-01-02 (reloaded) committed."""
    wh.create_table(ORDERS, ORDERS_SCHEMA, ["day"])
    wh.create_table(ITEMS, ITEMS_SCHEMA, ["day"])
    with wh.begin() as t:
        for day in ("2024-01-01", "2024-01-02"):
            t.append(ORDERS, pa.table({"order_id": pa.array([7], pa.int64()), "day": [day], "amount": [1.0]}))
            t.append(ITEMS, pa.table({"order_id": pa.array([7], pa.int64()), "item": pa.array([1], pa.int64()),
                                      "day": [day]}))
    return wh.readable_csn()


def _discounts(wh: Warehouse, table: str, csn: int | None = None) -> list[tuple[str, int, float | None]]:
    rows = wh.read(table, csn=csn).to_pylist()
    return sorted((r["day"], r["order_id"], r.get("discount")) for r in rows)


def test_a_task_adds_a_column_to_two_tables_and_the_loads_fill_it_at_one_csn_a_retry_replaces_its_ddl(
        dagbag: Any, txn_conn: Warehouse) -> None:
    wh = txn_conn
    before = _tables(wh)
    run = run_dag(dagbag, DAG_ID, {"fail_tries": 1})
    states = task_states(run)
    assert str(run.state) == "success", states
    assert states["ddl.add_discount"] == ("success", 2)  # failed once after add_column x 2, then retried
    [txn] = transactions_of(wh, DAG_ID)
    assert txn["state"] == COMMITTED
    csn = txn["commit_csn"]
    for table in (ORDERS, ITEMS):
        names = wh.schema(table).names
        assert names[-1] == "discount" and names.count("discount") == 1, names
        assert "discount" not in wh.schema(table, csn=before).names  # time travel keeps the old schema
        with wh.runtime.catalog.read() as conn:  # try 1's version withdrawn, try 2's committed with the data
            versions = table_versions.of_table(conn, table_registry.get(conn, table).id)
        assert {v: (r.state.creation_csn, "discount" in r.schema.names) for v, r in versions.items()} == {
            1: (1, False), 2: (ROLLBACK_CSN, True), 3: (csn, True)}
    assert _discounts(wh, ORDERS) == [("2024-01-01", 7, None), ("2024-01-02", 1, 0.5), ("2024-01-02", 2, 1.0),
                                      ("2024-01-03", 1, 0.5), ("2024-01-03", 2, 1.0)]
    assert [r for r in _discounts(wh, ITEMS) if r[0] == "2024-01-01"] == [("2024-01-01", 7, None)]
    assert wh.read(ITEMS).num_rows == 1 + 3 * 2
    assert _discounts(wh, ORDERS, csn=csn - 1) == [("2024-01-01", 7, None), ("2024-01-02", 7, None)]


@pytest.mark.parametrize("catalog_url", ["sqlite"], indirect=True)  # the outcome, not the catalog, is tested
def test_a_ddl_task_failing_for_good_rolls_back_the_change_of_both_tables_with_the_loads(
        dagbag: Any, txn_conn: Warehouse) -> None:
    wh = txn_conn
    before = _tables(wh)
    run = run_dag(dagbag, DAG_ID, {"fail_tries": 2})
    states = task_states(run)
    assert str(run.state) == "failed" and states["ddl.add_discount"] == ("failed", 2), states
    [txn] = transactions_of(wh, DAG_ID)
    assert txn["state"] == ROLLED_BACK and wh.readable_csn() == before
    for table, schema in ((ORDERS, ORDERS_SCHEMA), (ITEMS, ITEMS_SCHEMA)):
        assert wh.schema(table).names == schema.names
    assert _discounts(wh, ORDERS) == [("2024-01-01", 7, None), ("2024-01-02", 7, None)]
