"""@task.txn and @task.txn_spark (issue 20, item 1): registered through provider info, mapped per day inside a
transaction_group with no tid passed, keyed per map index, committed at one CSN; @task.txn_read hands a reader
its tables at ONE snapshot; real dag.test() runs."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from airflow_txn import Warehouse
from airflow_txn.catalog.txn_records import COMMITTED
from airflow_txn.errors import InvalidArgumentError, InvalidOptionError
from tests.airflow.helpers import (
    PROBE_SCHEMA,
    asset_events_with_partitions,
    dag_test,
    parse_dag,
    rendered_map_indexes,
    run_dag,
    task_states,
    transactions_of,
    xcom,
)

pytestmark = pytest.mark.airflow
REPO = Path(__file__).resolve().parents[2]
DAYS = pa.schema([("id", pa.int64()), ("day", pa.string())])


def test_taskflow_tasks_stage_in_the_group_transaction_keyed_per_map_index(
        dagbag: Any, spark: Any, txn_conn: Warehouse) -> None:
    wh = txn_conn
    wh.create_table("probe.days", DAYS, partition_by=["day"])
    wh.create_table("probe.events", PROBE_SCHEMA)
    run = run_dag(dagbag, "txn_taskflow_probe", {"rows": 2})
    states = task_states(run)
    assert str(run.state) == "success", states
    assert [k for k in states if k.startswith("txn.stage_day[")] == [f"txn.stage_day[{i}]" for i in range(3)]
    [txn] = transactions_of(wh, "txn_taskflow_probe")
    assert txn["state"] == COMMITTED
    info = wh.transaction_info(txn["tid"])
    keys = sorted({str(p["key"]) for p in info["parts"]})
    assert keys == ["txn_taskflow_probe/txn.stage_day/0", "txn_taskflow_probe/txn.stage_day/1",
                    "txn_taskflow_probe/txn.stage_day/2", "txn_taskflow_probe/txn.stage_with_spark/-1"]
    days = wh.read("probe.days")
    assert sorted(set(days.column("day").to_pylist())) == ["2024-01-01", "2024-01-02", "2024-01-03"]
    assert days.num_rows == 6 and wh.read("probe.events").num_rows == 2
    assert rendered_map_indexes(run, "txn.stage_day") == ["2024-01-01", "2024-01-02", "2024-01-03"]  # days
    report = xcom(run, "txn.audit")  # @task.txn_check: checks built when it ran, on the transaction's own view
    assert [(c["name"], c["value"], c["passed"]) for c in report["checks"]] == [
        ("row_count(probe.days)", 6, True), ("unique(probe.days: id, day)", 0, True)]
    assert info["metadata"]["checks"] == {"txn.audit": report}


def test_the_decorators_are_registered_and_check_the_function_when_the_dag_is_parsed() -> None:
    from airflow.sdk import DAG, task

    from airflow_txn.airflow.operators.python import TransactionPythonOperator

    with DAG("taskflow_probe", schedule=None, start_date=dt.datetime(2024, 1, 1)):
        with pytest.raises(TypeError, match=r"@task.txn_spark functions take \(spark, txn, \.\.\.\) first"):
            @task.txn_spark
            def no_spark(txn: Any, day: str) -> None: ...

        @task.txn(tid="1-1-0123456789abcdef")
        def load(txn: Any, day: str) -> None: ...

        op = load(day="2024-01-01").operator
        with pytest.raises(TypeError, match="missing a required argument: 'day'"):
            load()
    assert isinstance(op, TransactionPythonOperator) and op.tid == "1-1-0123456789abcdef"
    assert op.op_kwargs == {"day": "2024-01-01"}


@pytest.mark.parametrize("catalog_url", ["sqlite"], indirect=True)  # the engine is what is tested
def test_checks_run_by_spark_roll_back_a_duplicate(dagbag: Any, spark: Any, txn_conn: Warehouse) -> None:
    wh = txn_conn
    wh.create_table("probe.days", DAYS, partition_by=["day"])
    run = run_dag(dagbag, "txn_spark_check_probe")
    states = task_states(run)
    assert str(run.state) == "failed" and states["audited.check"] == ("failed", 1), states
    [txn] = transactions_of(wh, "txn_spark_check_probe")
    report = txn["metadata"]["checks"]["audited.check"]
    assert report["engine"] == "spark" and [(c["value"], c["passed"]) for c in report["checks"]] == [
        (3, True), (1, False)]
    assert txn["state"] == "rolled_back" and wh.read("probe.days").num_rows == 0


def test_bad_checks_fail_when_the_dag_is_parsed() -> None:
    """Write-audit-publish: a check that is no check, a bad engine or no checks at all is refused before
    anything runs, naming the task or group and the check."""
    from airflow.sdk import DAG

    from airflow_txn.airflow import TransactionCheckOperator, transaction_group
    from airflow_txn.checks import NullCheck

    good = [NullCheck("shop.orders", "customer_id")]
    with DAG("check_probe", schedule=None, start_date=dt.datetime(2024, 1, 1)):
        with pytest.raises(InvalidArgumentError, match=r"audit: checks\[1\] is 'amount > 0', not a check"):
            TransactionCheckOperator(task_id="audit", tid="1-1-0123456789abcdef", checks=[*good, "amount > 0"])
        with pytest.raises(InvalidOptionError, match=r"^audit: engine must be one of 'duckdb', 'spark', got 'trino'$"):
            TransactionCheckOperator(task_id="audit", tid="1-1-0123456789abcdef", checks=good, engine="trino")
        with pytest.raises(InvalidOptionError, match=r"^check_engine must be one of 'duckdb', 'spark', got 'trino'$"):
            transaction_group("bad_engine", checks=good, check_engine="trino")  # type: ignore[arg-type]
        with pytest.raises(InvalidArgumentError, match="give either checks"):
            TransactionCheckOperator(task_id="audit", tid="1-1-0123456789abcdef")
        with pytest.raises(InvalidArgumentError, match="two checks are named"):
            transaction_group("bad_group", checks=good * 2)
        with transaction_group("checked", checks=good) as group:
            pass
    assert group.check is not None and group.check.checks == good and group.check.engine == "duckdb"
    assert group.commit is not None and group.commit.upstream_task_ids == {"checked.begin", "checked.check"}


def test_the_daily_incremental_example_loads_its_interval_day_and_a_rerun_replaces_it(
        dagbag: Any, spark: Any, txn_conn: Warehouse) -> None:
    """The canonical example: @daily on data_interval_start, both tables at one CSN, each table's Asset event
    (concrete: the group names its tables) carrying the day written as its partition key; a second run of the
    same day (a new transaction) overwrites the day instead of adding it again."""
    from airflow_txn.airflow import table_asset
    from airflow_txn.airflow.version_compat import OUTLET_PARTITION_KEYS

    wh = txn_conn
    dag = parse_dag(REPO / "dags/daily_incremental.py", "daily_incremental")
    day = dt.datetime(2024, 3, 5, tzinfo=dt.UTC)
    first = dag_test(dag, logical_date=day)
    assert str(first.state) == "success", task_states(first)
    [txn] = transactions_of(wh, "daily_incremental")
    csn = txn["commit_csn"]
    # the day as each event's partition key where Airflow lets a task set one (3.3; on 3.2 an event carries its
    # DAG run's partition key, none for this run, on 3.1 none: version_compat.OUTLET_PARTITION_KEYS)
    key = "2024-03-05" if OUTLET_PARTITION_KEYS else None
    assert asset_events_with_partitions(first) == [
        (table_asset(t).uri, key, {"table": t, "csn": csn, "tid": txn["tid"], "metadata": txn["metadata"],
                                            "warehouse_id": wh.warehouse_id})
        for t in ("daily.order_items", "daily.orders")]
    assert {t: wh.read(t, csn=csn).num_rows for t in ("daily.orders", "daily.order_items")} == {
        "daily.orders": 20, "daily.order_items": 40}
    assert {t: wh.read(t, csn=csn - 1).num_rows for t in ("daily.orders", "daily.order_items")} == {
        "daily.orders": 0, "daily.order_items": 0}  # both tables appeared at one CSN
    assert set(wh.read("daily.orders").column("day").to_pylist()) == {dt.date(2024, 3, 5)}
    again = dag_test(dag, logical_date=day)  # the same day again, in a new transaction
    assert str(again.state) == "success", task_states(again)
    assert len(transactions_of(wh, "daily_incremental")) == 2
    assert wh.read("daily.orders").num_rows == 20 and wh.read("daily.order_items").num_rows == 40


def test_snapshot_of_takes_the_newest_commit_of_the_reader_tables_from_real_asset_events() -> None:
    from airflow.sdk.execution_time.comms import AssetEventDagRunReferenceResult
    from airflow.sdk.execution_time.context import TriggeringAssetEventsAccessor

    from airflow_txn.airflow import snapshot_of, table_asset

    def event(table: str, csn: int, alias: str | None = None, trigger: bool = False) -> AssetEventDagRunReferenceResult:
        asset = table_asset(table, warehouse_id="0123456789abcdef" * 2)
        extra = {"table": table, "csn": csn, "tid": "1-1-0123456789abcdef"}
        return AssetEventDagRunReferenceResult.model_validate({
            "asset": {"name": asset.name, "uri": asset.uri, "extra": {}},
            # a commit_watcher event: Airflow wraps the trigger's payload
            "extra": {"from_trigger": True, "payload": extra} if trigger else extra,
            "source_task_id": "load.commit", "source_dag_id": "load", "source_run_id": "r", "source_map_index": -1,
            "source_aliases": [{"name": alias}] if alias else [], "timestamp": dt.datetime.now(dt.UTC)})

    events = TriggeringAssetEventsAccessor.build([
        event("shop.orders", 7, alias="airflow-txn-commits:airflow_txn_default"), event("shop.orders", 9, trigger=True),
        event("shop.order_items", 8), event("shop.other", 12)])
    assert snapshot_of(events, ["shop.orders", "shop.order_items"]) == 9
    assert snapshot_of(events, ["shop.order_items"]) == 8
    assert snapshot_of(events) == 12
    assert snapshot_of(events, ["shop.nope"]) is None and snapshot_of(None) is None


def test_txn_read_hands_the_tables_at_one_snapshot_as_dataframes_or_arrow(
        dagbag: Any, spark: Any, txn_conn: Warehouse) -> None:
    """Two commits; the Spark reader reads both tables at the first CSN (given by the call), the pyarrow reader
    its table at the watermark (the second); each table of a reader at the same CSN."""
    wh = txn_conn
    wh.create_table("probe.orders", PROBE_SCHEMA)
    wh.create_table("probe.items", PROBE_SCHEMA)
    csns = []
    for orders, items in ((2, 3), (1, 1)):
        t = wh.begin()
        t.append("probe.orders", pa.table({"id": list(range(orders))}))
        t.append("probe.items", pa.table({"id": list(range(items))}))
        csns.append(t.commit())
    run = run_dag(dagbag, "txn_read_probe", {"csn": csns[0]})
    assert str(run.state) == "success", task_states(run)
    assert xcom(run, "count_both") == {"csn": csns[0], "orders": 2, "items": 3, "spark": True}
    assert xcom(run, "count_orders") == {"csn": csns[1], "orders": 3, "spark": False, "type": "Table"}


def test_txn_read_takes_the_snapshot_from_the_asset_events_of_its_tables_and_checks_the_function(
        txn_conn: Warehouse) -> None:
    from airflow.sdk import DAG, task
    from airflow.sdk.execution_time.comms import AssetEventDagRunReferenceResult
    from airflow.sdk.execution_time.context import TriggeringAssetEventsAccessor

    from airflow_txn.airflow import table_asset
    from airflow_txn.airflow.operators.read import choose_snapshot
    from airflow_txn.errors import InvalidNameError

    def event(table: str, csn: int) -> AssetEventDagRunReferenceResult:
        asset = table_asset(table)
        return AssetEventDagRunReferenceResult.model_validate({
            "asset": {"name": asset.name, "uri": asset.uri, "extra": {}}, "extra": {"table": table, "csn": csn},
            "source_task_id": "load.commit", "source_dag_id": "load", "source_run_id": "r", "source_map_index": -1,
            "source_aliases": [], "timestamp": dt.datetime.now(dt.UTC)})

    events = TriggeringAssetEventsAccessor.build([event("shop.orders", 5), event("shop.items", 6),
                                                  event("shop.other", 9)])
    tables = ["shop.orders", "shop.items"]
    assert choose_snapshot(txn_conn, None, {"triggering_asset_events": events}, tables) == (
        6, "triggering_asset_events")
    assert choose_snapshot(txn_conn, "4", {"triggering_asset_events": events}, tables) == (4, "the csn argument")
    assert choose_snapshot(txn_conn, None, {}, tables) == (txn_conn.readable_csn(), "the readable watermark")
    with DAG("txn_read_parse_probe", schedule=None, start_date=dt.datetime(2024, 1, 1)):
        with pytest.raises(TypeError, match=r"takes no parameter \['items'\] for its tables"):
            @task.txn_read(tables=tables)
            def no_items(orders: Any) -> None: ...
        with pytest.raises(InvalidNameError, match="two tables would reach parameter 'orders'"):
            @task.txn_read(tables=["a.orders", "b.orders"])
            def twice(orders: Any) -> None: ...
