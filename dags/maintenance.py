"""warehouse_maintenance: every night, merge the demo tables' small parts, then vacuum.

    compact ─► vacuum

`compact` (CompactOperator) merges each partition's small visible parts of shop.customers, shop.orders
and shop.order_items into parts of up to `target_file_bytes`. Each merge is a transaction of its own
that no reader notices (every snapshot reads the same rows before and after) and that yields to any
user transaction touching its parts: a busy night only leaves work for the next one. `vacuum`
(VacuumOperator) then deletes what no snapshot inside the retention window can see, including the
merged-away parts once the window has passed. Both push their result dict to XCom.

Params: `engine` ("arrow": pyarrow in the worker, "spark": Spark writes the merged files),
`target_file_bytes`, `min_parts`, `retention_seconds` (how far back snapshots stay readable) and
`dry_run` (vacuum only reports). Tables that do not exist yet are skipped.
"""

from __future__ import annotations

import datetime as dt

from airflow.sdk import DAG, Param

from airflow_txn.core.adapter import DEFAULT_TARGET_FILE_BYTES
from airflow_txn.core.config import DEFAULT_RETENTION_SECONDS
from airflow_txn.operators import CompactOperator, VacuumOperator

CONN_ID = "airflow_txn_default"
TABLES = ["shop.customers", "shop.orders", "shop.order_items"]

with DAG(
    dag_id="warehouse_maintenance",
    description="Compact the demo tables' small parts, then vacuum",
    schedule="@daily",
    start_date=dt.datetime(2024, 1, 1),
    catchup=False,
    max_active_runs=1,
    tags=["airflow_txn", "example", "maintenance"],
    params={
        "engine": Param("arrow", type="string", enum=["arrow", "spark"]),
        "target_file_bytes": Param(DEFAULT_TARGET_FILE_BYTES, type="integer", minimum=1),
        "min_parts": Param(2, type="integer", minimum=2),
        "retention_seconds": Param(DEFAULT_RETENTION_SECONDS, type="number", minimum=0),
        "dry_run": Param(False, type="boolean"),
    },
    default_args={"retries": 1, "retry_delay": dt.timedelta(minutes=5)},
    doc_md=__doc__,
) as dag:
    compact = CompactOperator(task_id="compact", tables=TABLES, skip_missing=True, engine="{{ params.engine }}",
                              target_file_bytes="{{ params.target_file_bytes }}",
                              min_parts="{{ params.min_parts }}", conn_id=CONN_ID)
    vacuum = VacuumOperator(task_id="vacuum", retention_seconds="{{ params.retention_seconds }}",
                            dry_run="{{ params.dry_run }}", conn_id=CONN_ID)
    compact >> vacuum
