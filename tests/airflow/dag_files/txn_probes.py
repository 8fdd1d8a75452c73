"""Small DAGs the Airflow tests run (copied into the tests' DAG folder next to dags/*.py).

txn_sensor_probe  CommitCSNSensor in poke mode, in reschedule mode, then deferred
                  (params: csn_poke, csn_reschedule, csn_deferred, tables)
txn_crash_probe   a Spark task that stages rows, writes a marker file and hangs until it is killed
txn_hold_probe    begin and stage, no commit: the run ends with its transaction still active
"""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, Param

from airflow_txn.airflow import transaction_group
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
