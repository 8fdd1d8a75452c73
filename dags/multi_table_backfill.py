"""multi_table_backfill: backfill three related tables over a date range as ONE transaction.

    create_tables ─► plan_days ─► backfill[ begin ─► load_customers[day] ─┐
                                                ─► load_orders[day]    ─┼─► check ─► commit ─► rollback ─► outcome ]
                                                ─► load_order_items[day]┘

Each day of `shop.customers`, `shop.orders` and `shop.order_items` is generated deterministically
with Spark and overwrites that day's partition (so a backfill can run again without duplicating).
Every mapped load stages its parts in the run's transaction; the commit makes all of them visible
under one CSN and emits one Asset event per table (multi_table_reader is scheduled on them). Any
load that fails for good rolls every table back and the run ends `failed`.

Write-audit-publish: before the commit, the group's `check` task runs CHECKS against the transaction's
own view of the three tables (what the loads staged plus the snapshot, which no reader sees yet): no
order without its customer, no item without its order, order ids unique. A failed check rolls the
whole transaction back, so all three tables stay exactly as they were.

Params: `start` (first day), `days` (how many), `fail_task` (e.g. "load_orders": its first day's
instance raises after writing, to demonstrate retry and rollback) and `fail_tries` (how many tries
of it fail: 1 shows a retry that does not duplicate, 99 exhausts the retries and rolls back), and
`bad_row` ("order_without_customer" or "item_without_order": the first day's load adds one such row, so
the integrity check fails and every table is left unchanged).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow as pa
from airflow.sdk import DAG, Param, task

from airflow_txn.airflow import TxnHook, transaction_group
from airflow_txn.checks import ReferenceCheck, UniqueCheck
from airflow_txn.operators import SparkTransactionOperator

CONN_ID = "airflow_txn_default"
CUSTOMERS_PER_DAY = 5
CUSTOMERS = pa.schema([("customer_id", pa.int64()), ("name", pa.string()), ("day", pa.date32())])
ORDERS = pa.schema([("order_id", pa.int64()), ("customer_id", pa.int64()), ("amount", pa.float64()),
                    ("day", pa.date32())])
ITEMS = pa.schema([("order_id", pa.int64()), ("line", pa.int32()), ("sku", pa.string()), ("qty", pa.int32()),
                   ("day", pa.date32())])
TABLES = {"shop.customers": CUSTOMERS, "shop.orders": ORDERS, "shop.order_items": ITEMS}
CHECKS = [
    ReferenceCheck("shop.orders", "customer_id", "shop.customers", name="every order has its customer"),
    ReferenceCheck("shop.order_items", "order_id", "shop.orders", name="every item has its order"),
    UniqueCheck("shop.orders", "order_id"),
]
BAD_ROWS = {"order_without_customer": "shop.orders", "item_without_order": "shop.order_items"}
"""The `bad_row` param: which table's first day gets a row breaking a reference."""


class InjectedFailure(RuntimeError):
    """Raised on purpose by the `fail_task` param."""


def _base(day: str) -> int:
    return (dt.date.fromisoformat(day) - dt.date(2024, 1, 1)).days * 1000


def customers_frame(spark: Any, day: str) -> Any:
    from pyspark.sql import functions as F

    return spark.range(CUSTOMERS_PER_DAY).select(
        (F.col("id") + _base(day)).alias("customer_id"),
        F.concat(F.lit("customer-"), (F.col("id") + _base(day)).cast("string")).alias("name"),
        F.lit(day).cast("date").alias("day"))


def orders_frame(spark: Any, day: str) -> Any:
    """Two orders per customer: order_id = customer_id * 10 + k."""
    from pyspark.sql import functions as F

    return customers_frame(spark, day).crossJoin(spark.range(2).withColumnRenamed("id", "k")).select(
        (F.col("customer_id") * 10 + F.col("k")).alias("order_id"), "customer_id",
        ((F.col("customer_id") % 7) * 10.0 + F.col("k")).alias("amount"), "day")


def items_frame(spark: Any, day: str) -> Any:
    """Two lines per order."""
    from pyspark.sql import functions as F

    return orders_frame(spark, day).crossJoin(spark.range(2).withColumnRenamed("id", "line")).select(
        "order_id", F.col("line").cast("int").alias("line"),
        F.concat(F.lit("sku-"), (F.col("order_id") % 13).cast("string")).alias("sku"),
        (F.col("order_id") % 3 + 1).cast("int").alias("qty"), "day")


def bad_row(frame: Any, table: str) -> Any:
    """`frame` plus one row referencing nothing: order -1 of customer -1, or an item of order -1."""
    from pyspark.sql import functions as F

    keys = ["order_id", "customer_id"] if table == "shop.orders" else ["order_id"]
    return frame.unionByName(frame.limit(1).withColumns({k: F.lit(-1).cast("long") for k in keys}))


def _load(table: str, frame: Any) -> Any:
    def load(spark: Any, txn: Any, day: str, ti: Any, params: dict[str, Any]) -> int:
        import airflow_txn.spark as txn_spark

        rows_of_day = frame(spark, day)
        if BAD_ROWS.get(params.get("bad_row") or "") == table and ti.map_index == 0:
            rows_of_day = bad_row(rows_of_day, table)
        rows = txn_spark.write(rows_of_day, txn, table, mode="overwrite", partitions=[{"day": day}])
        short = ti.task_id.rsplit(".", 1)[-1]
        if params.get("fail_task") == short and ti.map_index == 0 and ti.try_number <= int(params["fail_tries"]):
            raise InjectedFailure(f"injected failure of {short}[{day}], try {ti.try_number}, after staging {rows} rows")
        return int(rows)

    load.__name__ = f"load_{table.split('.')[1]}"
    return load


LOADERS = {"customers": _load("shop.customers", customers_frame), "orders": _load("shop.orders", orders_frame),
           "order_items": _load("shop.order_items", items_frame)}


@task
def create_tables() -> list[str]:
    with TxnHook(conn_id=CONN_ID).warehouse() as wh:
        for name, schema in TABLES.items():
            wh.create_table(name, schema, partition_by=["day"], exist_ok=True)
        return wh.tables()


@task
def plan_days(params: dict[str, Any]) -> list[dict[str, str]]:
    """One mapped load per day and table: [{"day": "2024-01-01"}, ...]."""
    start = dt.date.fromisoformat(str(params["start"]))
    return [{"day": (start + dt.timedelta(days=i)).isoformat()} for i in range(int(params["days"]))]


with DAG(
    dag_id="multi_table_backfill",
    description="Backfill customers, orders and order_items over a date range as ONE transaction",
    schedule=None,
    start_date=dt.datetime(2024, 1, 1),
    catchup=False,
    max_active_runs=1,
    tags=["airflow_txn", "example"],
    params={
        "start": Param("2024-01-01", type="string", format="date"),
        "days": Param(3, type="integer", minimum=1, maximum=366),
        "fail_task": Param("", type="string", enum=["", *(f"load_{t}" for t in LOADERS)]),
        "fail_tries": Param(99, type="integer", minimum=1),
        "bad_row": Param("", type="string", enum=["", *BAD_ROWS]),
    },
    default_args={"retries": 1, "retry_delay": dt.timedelta(seconds=2)},
    doc_md=__doc__,
) as dag:
    days = plan_days()
    with transaction_group("backfill", conn_id=CONN_ID, checks=CHECKS) as txn:
        for name, loader in LOADERS.items():
            SparkTransactionOperator.partial(task_id=f"load_{name}", python_callable=loader,
                                             conn_id=CONN_ID, map_index_template="{{ task.op_kwargs['day'] }}",
                                             ).expand(op_kwargs=days)
    create_tables() >> days >> txn
