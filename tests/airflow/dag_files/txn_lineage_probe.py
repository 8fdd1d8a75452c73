"""txn_lineage_probe: the DAG tests/airflow/test_lineage.py runs under the OpenLineage provider (pyarrow
writers, no Spark). In one transaction_group, `copy` reads lineage.source and appends it to lineage.target,
`audit` appends one row to lineage.audit (and fails, without retry, with param `fail`: the transaction rolls
back); after the group, CommitCSNSensor waits for the commit to be readable with lineage.target in it."""

from __future__ import annotations

import datetime as dt
from typing import Any

from airflow.sdk import DAG, Param, task

from airflow_txn.airflow import transaction_group
from airflow_txn.sensors import CommitCSNSensor

SOURCE, TARGET, AUDIT = "lineage.source", "lineage.target", "lineage.audit"


@task.txn(retries=0)
def copy(txn: Any) -> int:
    rows = txn.read(SOURCE)
    return int(txn.append(TARGET, rows))


@task.txn(retries=0)
def audit(txn: Any, params: dict[str, Any]) -> int:
    import pyarrow as pa

    if params["fail"]:
        raise RuntimeError("audit failed on purpose (param fail)")
    return int(txn.append(AUDIT, pa.table({"id": [1]})))


with DAG("txn_lineage_probe", schedule=None, start_date=dt.datetime(2024, 1, 1, tzinfo=dt.UTC), catchup=False,
         params={"fail": Param(False, type="boolean")}):
    with transaction_group("load") as load:
        copy()
        audit()
    CommitCSNSensor(task_id="wait", csn=load.csn, tables=[TARGET], poke_interval=0.1, timeout=60)
