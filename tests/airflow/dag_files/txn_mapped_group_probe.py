"""A transaction per day: a transaction_group inside a task group mapped over days (the DAG the Airflow tests run).

txn_mapped_group_probe  `day` (a @task_group expanded over three days) holding transaction_group("txn") with one
                        @task.txn that stages the day's rows, no tid passed: each map index begins, stages and
                        commits its own transaction. Param `fail_day`: the day whose task fails (no retries);
                        `skip_day`: the day a task before the group finds no data for and skips (its begin
                        skipped with it, its outcome still runs).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from airflow.sdk import DAG, Param, task, task_group

from airflow_txn.airflow import transaction_group
from airflow_txn.airflow.version_compat import AirflowSkipException

MAPPED_TABLE = "probe.mapped_days"
MAPPED_DAYS = ["2024-01-01", "2024-01-02", "2024-01-03"]


@task.txn
def stage_the_day(txn: Any, day: str, params: dict[str, Any]) -> dict[str, Any]:
    """Stage `rows` rows of `day` (fails on `fail_day`); returns the tid it staged in and the rows."""
    import pyarrow as pa

    if day == params["fail_day"]:
        raise RuntimeError(f"refusing {day} (param fail_day)")
    rows = int(params["rows"])
    txn.append(MAPPED_TABLE, pa.table({"id": list(range(rows)), "day": [day] * rows}))
    return {"tid": txn.tid, "rows": rows}


@task
def has_data(day: str, params: dict[str, Any]) -> None:
    if day == params["skip_day"]:
        raise AirflowSkipException(f"no data for {day} (param skip_day)")


@task_group(group_id="day")
def one_day(day: str) -> None:
    with transaction_group("txn") as txn:
        stage_the_day(day=day)
    has_data(day) >> txn


with DAG("txn_mapped_group_probe", schedule=None, start_date=dt.datetime(2024, 1, 1), catchup=False,
         params={"rows": Param(2, type="integer"), "fail_day": Param("", type="string"),
                 "skip_day": Param("", type="string")},
         default_args={"retries": 0}):
    one_day.expand(day=MAPPED_DAYS)
