"""A transaction per day: a transaction_group inside a task group mapped over days (the DAG the Airflow tests run).

txn_mapped_group_probe  `day` (a @task_group expanded over two days) holding transaction_group("txn") with one
                        @task.txn that stages the day's rows, no tid passed: each map index begins, stages and
                        commits its own transaction. Param `fail_day`: the day whose task fails (no retries).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from airflow.sdk import DAG, Param, task, task_group

from airflow_txn.airflow import transaction_group

MAPPED_TABLE = "probe.mapped_days"
MAPPED_DAYS = ["2024-01-01", "2024-01-02"]


@task.txn
def stage_the_day(txn: Any, day: str, params: dict[str, Any]) -> dict[str, Any]:
    """Stage `rows` rows of `day` (fails on `fail_day`); returns the tid it staged in and the rows."""
    import pyarrow as pa

    if day == params["fail_day"]:
        raise RuntimeError(f"refusing {day} (param fail_day)")
    rows = int(params["rows"])
    txn.append(MAPPED_TABLE, pa.table({"id": list(range(rows)), "day": [day] * rows}))
    return {"tid": txn.tid, "rows": rows}


@task_group(group_id="day")
def one_day(day: str) -> None:
    with transaction_group("txn"):
        stage_the_day(day=day)


with DAG("txn_mapped_group_probe", schedule=None, start_date=dt.datetime(2024, 1, 1), catchup=False,
         params={"rows": Param(2, type="integer"), "fail_day": Param("", type="string")},
         default_args={"retries": 0}):
    one_day.expand(day=MAPPED_DAYS)
