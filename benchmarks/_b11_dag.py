"""The DAGs B11 runs (benchmarks/b11_airflow_dag.py links this file into a throw-away DAG folder): one backfill
shape, a mapped load per day, written two ways.

    b11_txn     plan_days ─► backfill[ begin ─► load[day] x N ─► commit ─► rollback ─► outcome ]
                each load a SparkTransactionOperator: airflow_txn.spark.write(frame, txn, "b11.events",
                mode="overwrite", partitions=[{"day": day}]) in the run's transaction
    b11_plain   plan_days ─► load_plain[day] x N
                each load a plain @task: frame.write.mode("overwrite").parquet(<out>/day=<day>), no airflow_txn

Params: `tasks` (how many days, so mapped loads), `rows` (rows per load), `remote` (a Spark Connect URL:
both DAGs attach to it instead of the process's local SparkSession; "" for local), `out` (b11_plain's
directory). The table b11.events (id long, day string, value double; partitioned by day) must exist.
"""

from __future__ import annotations

import datetime as dt
import os
from typing import Any

from airflow.sdk import DAG, Param, task  # noqa: TID253 (a DAG file: Airflow parses it)

from airflow_txn.airflow import transaction_group
from airflow_txn.operators import SparkTransactionOperator

CONN_ID = "airflow_txn_default"
TABLE = "b11.events"
PARAMS = {
    "tasks": Param(30, type="integer", minimum=1),
    "rows": Param(10_000, type="integer", minimum=1),
    "remote": Param("", type="string"),
    "out": Param("", type="string"),
}


def frame(spark: Any, day: str, rows: int) -> Any:
    """`rows` rows of one day: id, day, value."""
    from pyspark.sql import functions as F

    base = (dt.date.fromisoformat(day) - dt.date(2024, 1, 1)).days * 1_000_000
    return spark.range(rows).select((F.col("id") + base).alias("id"), F.lit(day).alias("day"),
                                    (F.col("id") * 0.5).alias("value"))


@task
def plan_days(params: dict[str, Any]) -> list[dict[str, str]]:
    start = dt.date(2024, 1, 1)
    return [{"day": (start + dt.timedelta(days=i)).isoformat()} for i in range(int(params["tasks"]))]


def load(spark: Any, txn: Any, day: str, params: dict[str, Any]) -> int:
    import airflow_txn.spark as txn_spark

    return int(txn_spark.write(frame(spark, day, int(params["rows"])), txn, TABLE, mode="overwrite",
                               partitions=[{"day": day}]))


@task
def load_plain(day: str, params: dict[str, Any]) -> int:
    """The same rows with plain PySpark: the process's SparkSession, or a Spark Connect session opened and
    stopped by the task, as SparkTransactionOperator does with `remote`."""
    remote = str(params["remote"])
    if remote:
        from pyspark.sql.connect.session import SparkSession as ConnectSession

        os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"  # pyspark.sql.functions then build Connect columns
        spark: Any = ConnectSession.builder.remote(remote).getOrCreate()
    else:
        from pyspark.sql import SparkSession

        spark = SparkSession.builder.getOrCreate()
    try:
        frame(spark, day, int(params["rows"])).write.mode("overwrite").parquet(f"{params['out']}/day={day}")
    finally:
        if remote:
            spark.stop()
    return int(params["rows"])


with DAG(dag_id="b11_txn", schedule=None, start_date=dt.datetime(2024, 1, 1), catchup=False, params=PARAMS,
         max_active_runs=1, doc_md=__doc__) as txn_dag:
    days = plan_days()
    with transaction_group("backfill", conn_id=CONN_ID) as txn:
        SparkTransactionOperator.partial(task_id="load", tid=txn.tid, python_callable=load, conn_id=CONN_ID,
                                         remote="{{ params.remote }}").expand(op_kwargs=days)
    days >> txn

with DAG(dag_id="b11_plain", schedule=None, start_date=dt.datetime(2024, 1, 1), catchup=False, params=PARAMS,
         max_active_runs=1, doc_md=__doc__) as plain_dag:
    load_plain.expand_kwargs(plan_days())
