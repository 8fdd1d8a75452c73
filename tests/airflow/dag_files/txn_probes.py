"""Small DAGs the Airflow tests run (copied into the tests' DAG folder next to dags/*.py).

txn_sensor_probe  CommitCSNSensor in poke mode, in reschedule mode, then deferred
                  (params: csn_poke, csn_reschedule, csn_deferred, tables)
txn_crash_probe   a Spark task that stages rows, writes a marker file and hangs until it is killed
txn_hold_probe    begin and stage, no commit: the run ends with its transaction still active
txn_skip_probe    a group whose body stages rows in one task while another finds "no new data" and skips
                  (on_skip="commit"); txn_skip_rollback_probe the same with on_skip="rollback";
                  txn_skip_group_probe a branch that skips the whole group (param `go`: run it or not)
txn_ended_probe   a Spark task given the tid of a transaction that already ended (what clearing one task
                  of a finished run does), with a retry it must not use
txn_taskflow_probe  @task.txn mapped over days inside a group (no tid passed; map_index_template shows the
                  day), then @task.txn_spark, then @task.txn_check before the commit
txn_read_probe    @task.txn_read: two tables as Spark DataFrames at the CSN the call passes (param `csn`), and
                  one as a pyarrow Table at the readable watermark
txn_spark_check_probe  a group whose checks run with check_engine="spark"; the task stages a duplicate key
"""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, Param, task

from airflow_txn.airflow import TxnHook, transaction_group
from airflow_txn.airflow.version_compat import AirflowSkipException
from airflow_txn.checks import RowCountCheck, UniqueCheck
from airflow_txn.operators import BeginTransactionOperator, SparkTransactionOperator
from airflow_txn.sensors import CommitCSNSensor

PROBE_TABLE = "probe.events"
START = dt.datetime(2024, 1, 1)


def stage_rows(spark: Any, txn: Any, params: dict[str, Any]) -> int:
    import airflow_txn.spark as txn_spark

    return txn_spark.write(spark.range(int(params.get("rows", 5))), txn, PROBE_TABLE)


def stage_then_hang(spark: Any, txn: Any, params: dict[str, Any]) -> None:
    rows = stage_rows(spark, txn, params)
    Path(params["marker"]).write_text(f"{txn.tid} {rows}")
    time.sleep(600)  # the test kills this process meanwhile


with DAG("txn_sensor_probe", schedule=None, start_date=START, catchup=False,
         params={"csn_poke": Param(1, type="integer"), "csn_reschedule": Param(1, type="integer"),
                 "csn_deferred": Param(1, type="integer"), "tables": Param([], type="array")}):
    poke = CommitCSNSensor(task_id="poke", csn="{{ params.csn_poke }}", poke_interval=0.2, timeout=120)
    rescheduled = CommitCSNSensor(task_id="rescheduled", csn="{{ params.csn_reschedule }}", mode="reschedule",
                                  poke_interval=1, timeout=120)
    deferred = CommitCSNSensor(task_id="deferred", csn="{{ params.csn_deferred }}", tables="{{ params.tables }}",
                               deferrable=True, poke_interval=0.2, timeout=120)
    poke >> rescheduled >> deferred

with (DAG("txn_crash_probe", schedule=None, start_date=START, catchup=False,
          params={"marker": Param("", type="string"), "rows": Param(5, type="integer")}),
      transaction_group("txn", lease_seconds=8) as txn):
    SparkTransactionOperator(task_id="stage_then_hang", tid=txn.tid, python_callable=stage_then_hang)

with DAG("txn_hold_probe", schedule=None, start_date=START, catchup=False, params={"rows": Param(5, type="integer")}):
    begin = BeginTransactionOperator(task_id="begin")
    SparkTransactionOperator(task_id="stage", tid=begin.output, python_callable=stage_rows)


@task
def append_probe_rows(tid: str, params: dict[str, Any]) -> int:
    """Stage `rows` rows in PROBE_TABLE without Spark (the table is made if missing)."""
    import pyarrow as pa

    rows = int(params.get("rows", 5))
    with TxnHook().warehouse() as wh:
        wh.create_table(PROBE_TABLE, pa.schema([("id", pa.int64())]), exist_ok=True)
        wh.attach(tid).append(PROBE_TABLE, pa.table({"id": list(range(rows))}))
    return rows


@task
def no_new_data() -> None:
    raise AirflowSkipException("no new data for this interval")


@task
def after_the_skip() -> None:  # skipped with its upstream
    raise AssertionError("never runs")


for dag_id, on_skip in (("txn_skip_probe", "commit"), ("txn_skip_rollback_probe", "rollback")):
    with (DAG(dag_id, schedule=None, start_date=START, catchup=False, params={"rows": Param(5, type="integer")}),
          transaction_group("txn", on_skip=on_skip) as txn):
        append_probe_rows(txn.tid)
        no_new_data() >> after_the_skip()


@task.branch
def choose(params: dict[str, Any]) -> str:
    return "txn.begin" if params["go"] else "elsewhere"


@task
def elsewhere() -> None:
    pass


with DAG("txn_skip_group_probe", schedule=None, start_date=START, catchup=False,
         params={"rows": Param(5, type="integer"), "go": Param(False, type="boolean")}):
    with transaction_group("txn") as skipped_group:
        append_probe_rows(skipped_group.tid)
    chosen = choose()
    chosen >> [skipped_group, elsewhere()]


with DAG("txn_ended_probe", schedule=None, start_date=START, catchup=False,
         params={"tid": Param("", type="string"), "rows": Param(5, type="integer")}):
    SparkTransactionOperator(task_id="stage", tid="{{ params.tid }}", python_callable=stage_rows, retries=1)


DAYS_TABLE = "probe.days"


@task.txn(map_index_template="{{ task.op_kwargs['day'] }}")
def stage_day(txn: Any, day: str, params: dict[str, Any]) -> int:
    import pyarrow as pa

    rows = int(params["rows"])
    txn.append(DAYS_TABLE, pa.table({"id": list(range(rows)), "day": [day] * rows}))
    return rows


@task.txn_spark
def stage_with_spark(spark: Any, txn: Any, params: dict[str, Any]) -> int:
    return stage_rows(spark, txn, params)


@task.txn_check
def audit(days: int, params: dict[str, Any]) -> list[Any]:
    """The checks, built when the task runs from its arguments (the rows each day staged)."""
    rows = int(params["rows"])
    return [RowCountCheck(DAYS_TABLE, min=rows * days, max=rows * days), UniqueCheck(DAYS_TABLE, ["id", "day"])]


with (DAG("txn_taskflow_probe", schedule=None, start_date=START, catchup=False,
          params={"rows": Param(2, type="integer"), "days": Param(["2024-01-01", "2024-01-02"], type="array")}),
      transaction_group("txn") as taskflow_group):
    stage_day.expand(day=["2024-01-01", "2024-01-02", "2024-01-03"]) >> stage_with_spark() >> audit(days=3)


@task.txn_read(tables=["probe.orders", "probe.items"])
def count_both(orders: Any, items: Any, csn: int, spark: Any) -> dict[str, Any]:
    return {"csn": csn, "orders": orders.count(), "items": items.count(), "spark": spark is not None}


@task.txn_read(tables={"rows": "probe.orders"}, frames="arrow")
def count_orders(rows: Any, csn: int, spark: Any, params: dict[str, Any]) -> dict[str, Any]:
    return {"csn": csn, "orders": rows.num_rows, "spark": spark is not None, "type": type(rows).__name__}


with DAG("txn_read_probe", schedule=None, start_date=START, catchup=False,
         params={"csn": Param(None, type=["null", "integer"])}):
    count_both(csn="{{ params.csn }}")
    count_orders()


@task.txn
def stage_duplicate(txn: Any) -> None:
    import pyarrow as pa

    txn.append(DAYS_TABLE, pa.table({"id": [1, 1, 2], "day": ["2024-01-01"] * 3}))


SPARK_CHECKS = [RowCountCheck(DAYS_TABLE, min=1), UniqueCheck(DAYS_TABLE, ["id", "day"])]
with (DAG("txn_spark_check_probe", schedule=None, start_date=START, catchup=False),
      transaction_group("audited", check_engine="spark", checks=SPARK_CHECKS)):
    stage_duplicate()
