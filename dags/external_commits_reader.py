"""external_commits_reader: run after every commit of shop.orders, including commits made OUTSIDE Airflow.

A plain Python job (a notebook, a service, another scheduler) that commits to shop.orders emits no Airflow
Asset event. `commit_watcher("shop.orders")` is the table's commit-log Asset: its AssetWatcher has Airflow's
triggerer run a CommitLogTrigger that reads the warehouse's commit log and fires an Asset event for each new
commit of the table, whoever made it (Airflow tasks included; compaction never fires). The task reads the
table at the CSN the event carries: exactly the state that commit made visible.

    import pyarrow as pa
    from airflow_txn import Warehouse
    with Warehouse.open() as wh, wh.begin() as txn:     # outside Airflow
        txn.append("shop.orders", pa.table({...}))       # the commit schedules this DAG
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from airflow.sdk import DAG, task

from airflow_txn.airflow import TxnHook, commit_watcher, snapshot_of

CONN_ID = "airflow_txn_default"
TABLE = "shop.orders"


@task
def count_orders(triggering_asset_events: Any = None) -> dict[str, int]:
    """The rows of shop.orders at the commit that triggered the run (the watermark in a manual run)."""
    with TxnHook(conn_id=CONN_ID).warehouse() as wh:
        csn = snapshot_of(triggering_asset_events, [TABLE]) or wh.readable_csn()
        rows = wh.read(TABLE, csn=csn).num_rows if TABLE in wh.tables() else 0
    print(f"{TABLE} at CSN {csn}: {rows} rows")
    return {"csn": csn, "rows": rows}


with DAG(
    dag_id="external_commits_reader",
    description="Run after every commit of shop.orders, made in Airflow or outside it (commit_watcher)",
    schedule=[commit_watcher(TABLE, CONN_ID, poll_interval=5.0)],
    start_date=dt.datetime(2024, 1, 1),
    catchup=False,
    tags=["airflow_txn", "example"],
    doc_md=__doc__,
):
    count_orders()
