"""multi_table_reader: read the three backfilled tables at exactly one committed snapshot.

Scheduled on the Assets of shop.customers, shop.orders and shop.order_items (multi_table_backfill's
commit emits them with the CSN in the event extra). The CSN to read comes from the param `csn`, else
from the triggering Asset events, else it is the latest commit of the three tables. CommitCSNSensor
(deferred: no worker slot while it waits) holds the run until that CSN is readable; the check then
reads all three tables with Spark at that snapshot and fails on any broken reference.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from airflow.sdk import DAG, Param, task

from airflow_txn import PREHISTORIC_CSN
from airflow_txn.airflow import TxnHook, snapshot_of, table_asset
from airflow_txn.sensors import CommitCSNSensor

CONN_ID = "airflow_txn_default"
TABLES = ["shop.customers", "shop.orders", "shop.order_items"]


@task
def pick_csn(params: dict[str, Any], triggering_asset_events: Any = None) -> int:
    """The `csn` param, else the latest CSN in the triggering Asset events, else 1 (any commit:
    the sensor then waits for a commit of each table and reads the latest)."""
    if params.get("csn"):
        return int(params["csn"])
    csn = snapshot_of(triggering_asset_events, TABLES)  # the newest commit among the events: all of them
    return PREHISTORIC_CSN if csn is None else csn


@task
def check_integrity(snapshot: int) -> dict[str, int]:
    """Every order's customer and every item's order exist at `snapshot`; returns the row counts."""
    import airflow_txn.spark as txn_spark
    from airflow_txn.airflow import spark_session

    hook = TxnHook(conn_id=CONN_ID)
    spark = spark_session(hook.spark_conf(), app_name="multi_table_reader")
    with hook.warehouse() as wh:
        customers, orders, items = (txn_spark.read(spark, wh, t, csn=snapshot) for t in TABLES)
        orphan_orders = orders.join(customers, "customer_id", "left_anti").count()
        orphan_items = items.join(orders.select("order_id"), "order_id", "left_anti").count()
        counts = {"csn": snapshot, "customers": customers.count(), "orders": orders.count(),
                  "order_items": items.count(), "orphan_orders": orphan_orders, "orphan_items": orphan_items}
    print(f"snapshot {snapshot}: {counts}")
    if orphan_orders or orphan_items:
        raise ValueError(f"referential integrity broken at CSN {snapshot}: {counts}")
    return counts


with DAG(
    dag_id="multi_table_reader",
    description="Read customers, orders and order_items at one committed CSN and check their references",
    schedule=table_asset(TABLES[0], CONN_ID) & table_asset(TABLES[1], CONN_ID) & table_asset(TABLES[2], CONN_ID),
    start_date=dt.datetime(2024, 1, 1),
    catchup=False,
    tags=["airflow_txn", "example"],
    params={"csn": Param(None, type=["null", "integer"], minimum=1)},
    doc_md=__doc__,
) as dag:
    wait = CommitCSNSensor(task_id="wait_for_commit", csn=pick_csn(), tables=TABLES, conn_id=CONN_ID,
                           deferrable=True, poke_interval=2, timeout=600)
    check_integrity(wait.output)
