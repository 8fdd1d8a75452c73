"""daily_incremental: the canonical airflow_txn DAG (start here). Each day's orders and their items land in two
tables as ONE transaction: a reader sees both tables of a day, or neither.

    create_tables ─► load[ begin ─► orders ─┐
                                ─► items  ─┴─► commit ─► rollback ─► outcome ]

`@daily` on `data_interval_start`: each run loads the day its interval starts on. Both loads overwrite that
day's partition, so a run that is re-run (clear `load.begin` with its downstream: a new transaction) replaces
the day instead of adding it twice, and a retried task replaces its own failed try (keys per task). The
tables are named in the group (`tables=`), so the commit emits one Asset event per table on the table's own
Asset, with the CSN and the day written as the event's partition key (a partitioned reader maps it); a
reader schedules on them and reads both tables at that CSN (see multi_table_reader). The rows are generated
with Spark; load your own the same way.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow as pa
from airflow.sdk import DAG, task

from airflow_txn.airflow import TxnHook, transaction_group

CONN_ID = "airflow_txn_default"
ORDERS_PER_DAY = 20
ORDERS = pa.schema([("order_id", pa.int64()), ("amount", pa.float64()), ("day", pa.date32())])
ITEMS = pa.schema([("order_id", pa.int64()), ("line", pa.int32()), ("sku", pa.string()), ("day", pa.date32())])
TABLES = {"daily.orders": ORDERS, "daily.order_items": ITEMS}


def _day(data_interval_start: Any) -> str:
    return str(data_interval_start.date().isoformat())


@task
def create_tables() -> list[str]:
    with TxnHook(conn_id=CONN_ID).warehouse() as wh:
        for name, schema in TABLES.items():
            wh.create_table(name, schema, partition_by=["day"], exist_ok=True)
        return wh.tables()


@task.txn_spark(conn_id=CONN_ID, retries=1)
def orders(spark: Any, txn: Any, data_interval_start: Any) -> int:
    """The day's orders (generated), overwriting the day's partition of daily.orders."""
    from pyspark.sql import functions as F

    import airflow_txn.spark as txn_spark

    day = _day(data_interval_start)
    frame = spark.range(ORDERS_PER_DAY).select(
        (F.col("id") + F.lit(int(day.replace("-", "")) * 1000)).alias("order_id"),
        (F.col("id") * 1.5).alias("amount"), F.lit(day).cast("date").alias("day"))
    return txn_spark.write(frame, txn, "daily.orders", mode="overwrite", partitions=[{"day": day}])


@task.txn_spark(conn_id=CONN_ID, retries=1)
def items(spark: Any, txn: Any, data_interval_start: Any) -> int:
    """Two lines per order of the day, overwriting the day's partition of daily.order_items."""
    from pyspark.sql import functions as F

    import airflow_txn.spark as txn_spark

    day = _day(data_interval_start)
    frame = spark.range(ORDERS_PER_DAY * 2).select(
        (F.floor(F.col("id") / 2) + F.lit(int(day.replace("-", "")) * 1000)).cast("long").alias("order_id"),
        (F.col("id") % 2).cast("int").alias("line"), F.concat(F.lit("sku-"), F.col("id") % 7).alias("sku"),
        F.lit(day).cast("date").alias("day"))
    return txn_spark.write(frame, txn, "daily.order_items", mode="overwrite", partitions=[{"day": day}])


with DAG(
    dag_id="daily_incremental",
    description="Each day's orders and items as ONE transaction (the canonical airflow_txn DAG)",
    schedule="@daily",
    start_date=dt.datetime(2024, 1, 1),
    catchup=False,
    max_active_runs=1,
    tags=["airflow_txn", "example"],
    doc_md=__doc__,
):
    with transaction_group("load", conn_id=CONN_ID, tables=list(TABLES)) as load:
        orders()
        items()
    create_tables() >> load
