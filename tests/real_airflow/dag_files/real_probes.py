"""Small DAGs the real-Airflow tests run beside dags/multi_table_backfill.py (copied into the deployment's DAG folder).

real_sensor_probe  a deferred CommitCSNSensor waiting for the CSN of param `csn` (released by the triggerer)
real_hold_probe    a transaction group whose one task stages rows, then waits until the file of param `release`
                   exists (a run the test marks failed from the API while its transaction is active)
"""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, Param, task

from airflow_txn.airflow import transaction_group
from airflow_txn.sensors import CommitCSNSensor

HOLD_TABLE = "probe.held"
START = dt.datetime(2024, 1, 1)
HOLD_LIMIT_SECONDS = 600


with DAG("real_sensor_probe", schedule=None, start_date=START, catchup=False, params={"csn": Param(1, type="integer")}):
    CommitCSNSensor(task_id="wait", csn="{{ params.csn }}", deferrable=True, poke_interval=0.2, timeout=300)


@task.txn
def stage_and_hold(txn: Any, params: dict[str, Any]) -> int:
    """Stage three rows, then hold the transaction open until the `release` file exists (bounded)."""
    import pyarrow as pa

    txn.append(HOLD_TABLE, pa.table({"id": [1, 2, 3]}))
    release = Path(str(params["release"]))
    (release.parent / "staged").write_text("staged")
    deadline = time.monotonic() + HOLD_LIMIT_SECONDS
    while not release.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    return 3


with (DAG("real_hold_probe", schedule=None, start_date=START, catchup=False,
          params={"release": Param("", type="string")}, default_args={"retries": 0}),
      transaction_group("txn")):
    stage_and_hold()
