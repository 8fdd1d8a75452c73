"""month_end_close: post a month's ledger in ONE transaction, tag the commit `month-end-<month>`, and report
from that named snapshot.

    create_table ─► begin ─► post_ledger ─► commit(tag="month-end-{{ params.month }}") ─► wait_for_tag ─► report

`post_ledger` (Spark) overwrites the month's partition of `finance.ledger`; the commit names its snapshot
`month-end-<month>` (CommitTransactionOperator(tag=...)): the tag holds the tables the commit wrote, its
Asset events carry the tag, and vacuum keeps every file it sees whatever the retention, so the month-end
figures stay readable exactly as closed after later corrections and vacuums. `wait_for_tag`
(CommitCSNSensor(tag=...)) waits for the tag to exist (a report DAG elsewhere would do the same); `report`
reads the ledger at the tag with Spark. Running the same month again fails at the commit, before anything is
committed: a tag never moves (`airflow-txn untag month-end-<month>` first to close the month again).

Params: `month` (YYYY-MM), `entries` (ledger lines to post).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow as pa
from airflow.sdk import DAG, Param, task

from airflow_txn.airflow import TxnHook
from airflow_txn.operators import BeginTransactionOperator, CommitTransactionOperator, SparkTransactionOperator
from airflow_txn.sensors import CommitCSNSensor

CONN_ID = "airflow_txn_default"
LEDGER = "finance.ledger"
LEDGER_SCHEMA = pa.schema([("entry_id", pa.int64()), ("account", pa.string()), ("amount", pa.float64()),
                           ("month", pa.string())])
TAG = "month-end-{{ params.month }}"


@task
def create_table() -> None:
    with TxnHook(conn_id=CONN_ID).warehouse() as wh:
        wh.create_table(LEDGER, LEDGER_SCHEMA, partition_by=["month"], exist_ok=True)


def post_ledger(spark: Any, txn: Any, params: dict[str, Any]) -> int:
    """The month's ledger lines, replacing the month's partition (a re-run posts the same lines)."""
    from pyspark.sql import functions as F

    import airflow_txn.spark as txn_spark

    month = str(params["month"])
    lines = spark.range(int(params["entries"])).select(
        F.col("id").alias("entry_id"), F.concat(F.lit("acct-"), (F.col("id") % 4).cast("string")).alias("account"),
        ((F.col("id") % 10) * 12.5).alias("amount"), F.lit(month).alias("month"))
    return int(txn_spark.write(lines, txn, LEDGER, mode="overwrite", partitions=[{"month": month}]))


@task
def report(tag_csn: int, params: dict[str, Any]) -> dict[str, Any]:
    """The month's totals per account, read at the month-end tag (not at the latest snapshot)."""
    import airflow_txn.spark as txn_spark
    from airflow_txn.airflow import spark_session

    hook = TxnHook(conn_id=CONN_ID)
    spark = spark_session(hook.spark_conf(), app_name="month_end_close")
    tag = f"month-end-{params['month']}"
    with hook.warehouse() as wh:
        ledger = txn_spark.read(spark, wh, LEDGER, tag=tag)
        totals = {r["account"]: r["total"] for r in ledger.groupBy("account").agg({"amount": "sum"})
                  .withColumnRenamed("sum(amount)", "total").collect()}
    print(f"{tag} (CSN {tag_csn}): {totals}")
    return {"tag": tag, "csn": tag_csn, "totals": totals}


with DAG(
    dag_id="month_end_close",
    description="Post a month's ledger as one transaction, tag the commit month-end-<month>, report from the tag",
    schedule=None,
    start_date=dt.datetime(2024, 1, 1),
    catchup=False,
    max_active_runs=1,
    tags=["airflow_txn", "example"],
    params={"month": Param("2024-01", type="string", pattern=r"^\d{4}-\d{2}$"),
            "entries": Param(8, type="integer", minimum=1)},
    doc_md=__doc__,
) as dag:
    begin = BeginTransactionOperator(task_id="begin", conn_id=CONN_ID)
    post = SparkTransactionOperator(task_id="post_ledger", tid=begin.output, python_callable=post_ledger,
                                    conn_id=CONN_ID)
    commit = CommitTransactionOperator(task_id="commit", tid=begin.output, tag=TAG, conn_id=CONN_ID)
    wait = CommitCSNSensor(task_id="wait_for_tag", tag=TAG, tables=[LEDGER], conn_id=CONN_ID, poke_interval=1,
                           timeout=600)
    create_table() >> begin >> post >> commit >> wait
    report(wait.output)
