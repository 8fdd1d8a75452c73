"""multi_table_backfill and multi_table_reader end to end: real Airflow dag.test(), real Spark, and the
catalog on SQLite and on PostgreSQL (the `catalog_url` parametrisation)."""

from __future__ import annotations

import datetime as dt
import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import pyarrow as pa
import pytest

from airflow_txn import ROLLBACK_CSN, Warehouse
from airflow_txn.catalog.txn_records import COMMITTED, ROLLED_BACK
from tests.airflow.helpers import (
    BACKFILL_TABLES,
    asset_events,
    clear_and_run_again,
    counts,
    rendered_map_indexes,
    run_dag,
    task_states,
    transactions_of,
    xcom,
)

pytestmark = pytest.mark.airflow

REPO = Path(__file__).resolve().parents[2]
DAG_ID = "multi_table_backfill"
PER_DAY = {"shop.customers": 5, "shop.orders": 10, "shop.order_items": 20}


def backfill_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("multi_table_backfill_example", REPO / "dags/multi_table_backfill.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def expected(days: int) -> dict[str, int]:
    return {t: n * days for t, n in PER_DAY.items()}


def reader_queued() -> bool:
    from airflow.models.asset import AssetDagRunQueue
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        return session.scalars(select(AssetDagRunQueue.target_dag_id)
                               .where(AssetDagRunQueue.target_dag_id == "multi_table_reader")).first() is not None


def test_backfill_commits_all_tables_at_one_csn_then_the_reader_checks_them(
        dagbag: Any, spark: Any, txn_conn: Warehouse) -> None:
    wh = txn_conn
    run = run_dag(dagbag, DAG_ID, {"start": "2024-03-01", "days": 2})
    states = task_states(run)
    assert str(run.state) == "success", states
    assert states["backfill.rollback"][0] == "skipped"
    assert rendered_map_indexes(run, "backfill.load_orders") == ["2024-03-01", "2024-03-02"]  # days, not 0, 1
    csn = xcom(run, "backfill.commit")
    assert isinstance(csn, int) and xcom(run, "backfill.outcome") == csn
    assert wh.readable_csn() == csn
    assert counts(wh, csn) == expected(2)
    assert counts(wh, csn - 1) == dict.fromkeys(BACKFILL_TABLES, 0)  # all three appeared at once
    [txn] = transactions_of(wh, DAG_ID)
    assert txn["state"] == COMMITTED and txn["commit_csn"] == csn and txn["label"] == f"{DAG_ID}/{run.run_id}"

    # one Asset event per table, only after the commit, each carrying the CSN and the tid
    from airflow_txn.airflow import table_asset

    events = asset_events(run)
    assert [uri for uri, _ in events] == sorted(table_asset(t).uri for t in BACKFILL_TABLES)
    assert all(extra == {"table": uri.rsplit("/", 1)[1], "csn": csn, "tid": txn["tid"], "metadata": txn["metadata"],
                         "warehouse_id": wh.warehouse_id} for uri, extra in events)
    assert txn["metadata"]["airflow"]["task_id"] == "backfill.commit"  # the run that committed it
    report = xcom(run, "backfill.check")  # the integrity checks passed on the transaction's own view
    assert report["passed"] and report["engine"] == "duckdb" and report["snapshot_csn"] < csn
    assert [(c["name"], c["value"]) for c in report["checks"]] == [
        ("every order has its customer", 0), ("every item has its order", 0), ("unique(shop.orders: order_id)", 0)]
    assert txn["metadata"]["checks"] == {"backfill.check": report}  # recorded on the transaction
    assert reader_queued()  # the reader DAG is scheduled on those Assets

    reader = run_dag(dagbag, "multi_table_reader", {"csn": csn})
    assert str(reader.state) == "success", task_states(reader)
    assert xcom(reader, "wait_for_commit") == csn
    assert xcom(reader, "check_integrity") == {"csn": csn, "customers": 10, "orders": 20, "order_items": 40,
                                               "orphan_orders": 0, "orphan_items": 0}


@pytest.mark.parametrize("catalog_url", ["sqlite"], indirect=True)  # the check reads files: one catalog will do
def test_a_failed_integrity_check_rolls_back_every_table(dagbag: Any, spark: Any, txn_conn: Warehouse) -> None:
    """Write-audit-publish: an item whose order does not exist fails the check before the commit; the
    whole transaction rolls back and no table changes, though every load succeeded."""
    wh = txn_conn
    module = backfill_module()
    for name, schema in module.TABLES.items():
        wh.create_table(name, schema, partition_by=["day"], exist_ok=True)
    with wh.begin(label="baseline") as t:  # a committed day the failing backfill overwrites
        t.append("shop.customers", pa.table({"customer_id": [1], "name": ["old"], "day": [dt.date(2024, 6, 2)]},
                                            schema=module.CUSTOMERS))
    before_csn, before = wh.readable_csn(), {t: wh.read(t) for t in BACKFILL_TABLES}

    run = run_dag(dagbag, DAG_ID, {"start": "2024-06-02", "days": 1, "bad_row": "item_without_order"})
    states = task_states(run)
    assert str(run.state) == "failed", states
    assert states["backfill.load_order_items[0]"] == ("success", 1)  # the bad row was staged...
    assert states["backfill.check"] == ("failed", 1)  # ...and caught, without a retry
    assert states["backfill.commit"][0] == "upstream_failed" and states["backfill.outcome"][0] == "failed"
    assert wh.readable_csn() == before_csn
    assert {t: wh.read(t) for t in BACKFILL_TABLES} == before  # all three tables exactly as they were
    txn = transactions_of(wh, DAG_ID)[0]
    assert txn["label"] == f"{DAG_ID}/{run.run_id}" and txn["state"] == ROLLED_BACK
    assert txn["failed_reason"].startswith("checks of backfill.check failed: every item has its order = 1 (bounds ..0)")
    report = txn["metadata"]["checks"]["backfill.check"]
    assert not report["passed"]
    assert [(c["name"], c["value"], c["passed"]) for c in report["checks"]] == [
        ("every order has its customer", 0, True), ("every item has its order", 1, False),
        ("unique(shop.orders: order_id)", 0, True)]


def test_a_failed_try_is_retried_without_duplicates(dagbag: Any, spark: Any, txn_conn: Warehouse) -> None:
    wh = txn_conn
    run = run_dag(dagbag, DAG_ID, {"start": "2024-04-01", "days": 2, "fail_task": "load_orders", "fail_tries": 1})
    states = task_states(run)
    assert str(run.state) == "success", states
    assert states["backfill.load_orders[0]"] == ("success", 2)  # failed once after staging, then retried
    assert states["backfill.load_orders[1]"] == ("success", 1)
    csn = xcom(run, "backfill.commit")
    assert counts(wh, csn) == expected(2)  # no duplicate of what the failed try staged
    orders = wh.read("shop.orders", csn=csn).column("order_id").to_pylist()
    assert len(orders) == len(set(orders))
    [txn] = transactions_of(wh, DAG_ID)
    parts = [p for p in wh.transaction_info(txn["tid"])["parts"] if p["key"] == f"{DAG_ID}/backfill.load_orders/0"]
    assert sorted(p["creation_csn"] for p in parts) == [csn, ROLLBACK_CSN]  # try 1 compensated, try 2 committed


def test_retries_exhausted_roll_back_every_table_and_fail_the_run(dagbag: Any, spark: Any,
                                                                  txn_conn: Warehouse) -> None:
    wh = txn_conn
    module = backfill_module()
    for name, schema in module.TABLES.items():
        wh.create_table(name, schema, partition_by=["day"], exist_ok=True)
    with wh.begin(label="baseline") as t:  # a committed day the failing backfill overwrites
        t.append("shop.customers", pa.table({"customer_id": [1], "name": ["old"], "day": ["2024-05-01"]},
                                            schema=pa.schema([(f.name, pa.string() if f.name == "day" else f.type)
                                                              for f in module.CUSTOMERS])).cast(module.CUSTOMERS))
    before_csn = wh.readable_csn()
    before = {t: wh.read(t) for t in BACKFILL_TABLES}

    run = run_dag(dagbag, DAG_ID, {"start": "2024-05-01", "days": 2, "fail_task": "load_order_items"})
    states = task_states(run)
    assert str(run.state) == "failed", states
    assert states["backfill.load_order_items[0]"] == ("failed", 2)  # the retry failed too
    assert states["backfill.commit"][0] == "upstream_failed"
    assert states["backfill.rollback"][0] == "success"
    assert states["backfill.outcome"][0] == "failed"  # a successful rollback does not turn the run green

    assert wh.readable_csn() == before_csn
    assert {t: wh.read(t) for t in BACKFILL_TABLES} == before  # every table exactly as it was
    [txn] = transactions_of(wh, DAG_ID)
    assert txn["state"] == ROLLED_BACK
    assert "no retries left" in txn["failed_reason"]  # the listener rolled it back when the task failed for good
    assert all(p["creation_csn"] == ROLLBACK_CSN for p in wh.transaction_info(txn["tid"])["parts"]
               if p["role"] == "created")
    with wh.begin() as t:  # the removal locks the rolled-back overwrite took are released
        t.overwrite("shop.customers", before["shop.customers"], partitions=[{"day": "2024-05-01"}])


@pytest.mark.parametrize("catalog_url", ["sqlite"], indirect=True)  # Airflow's part; the catalogs: the tests above
def test_clearing_the_group_of_a_committed_run_commits_a_new_transaction_whose_overwrites_replace_the_old(
        dagbag: Any, spark: Any, txn_conn: Warehouse) -> None:
    """issue 20, item 4: a user clears `backfill.begin` with its downstream tasks in a committed backfill run.
    The SAME Airflow run runs the group again: begin starts a NEW transaction, the loads overwrite their days
    in it, and its commit replaces what the first transaction committed (no day twice)."""
    wh = txn_conn
    run = run_dag(dagbag, DAG_ID, {"start": "2024-06-01", "days": 1})
    assert str(run.state) == "success", task_states(run)
    first_csn, first_tid = xcom(run, "backfill.commit"), xcom(run, "backfill.begin")

    again = clear_and_run_again(dagbag.get_dag(DAG_ID), run, "backfill.begin")
    states = task_states(again)
    assert again.run_id == run.run_id and str(again.state) == "success", states
    assert states["backfill.begin"] == ("success", 2) and states["backfill.commit"] == ("success", 2)
    assert states["create_tables"] == ("success", 1)  # upstream of the group: not cleared, not run again
    second_csn, second_tid = xcom(again, "backfill.commit"), xcom(again, "backfill.begin")
    assert second_tid != first_tid and second_csn > first_csn
    assert [t["state"] for t in transactions_of(wh, DAG_ID)] == [COMMITTED, COMMITTED]
    assert counts(wh) == expected(1) == counts(wh, first_csn)  # replaced, not added again
    old = wh.transaction_info(first_tid)
    assert {p["removal_csn"] for p in old["parts"]} == {second_csn}  # every part the first one committed
    removed = {p["path"] for p in wh.transaction_info(second_tid)["parts"] if p["role"] == "removed"}
    assert removed == {p["path"] for p in old["parts"]}  # the overwrites removed exactly those
