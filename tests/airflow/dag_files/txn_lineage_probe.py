"""txn_lineage_probe: the DAG tests/airflow/test_lineage.py runs under the OpenLineage provider (pyarrow
writers and readers, no Spark). In one transaction_group whose commit declares its tables (their Assets are
its outlets), `copy` reads lineage.source and appends it to lineage.target, then `audit` appends one row to
lineage.audit; with param `fail` it fails instead (no retry: the group rolls back), with param `abort` it
rolls the transaction back itself (the commit then fails). After the group, CommitCSNSensor waits for the
commit to be readable with lineage.target in it, and `report` (`@task.txn_read`, pyarrow) reads
lineage.target and lineage.source at the commit's CSN."""

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
    if params["abort"]:
        txn.rollback("audit rolled the transaction back on purpose (param abort)")
        return 0
    row = {"id": [1], "note": ["probe"], "at": [dt.datetime(2024, 1, 1, tzinfo=dt.UTC)]}
    return int(txn.append(AUDIT, pa.table(row, schema=txn.warehouse.schema(AUDIT))))


@task.txn_read(tables=[TARGET, SOURCE], frames="arrow", retries=0)
def report(target: Any, source: Any, csn: int) -> dict[str, int]:
    return {"csn": csn, "target": target.num_rows, "source": source.num_rows}


with DAG("txn_lineage_probe", schedule=None, start_date=dt.datetime(2024, 1, 1, tzinfo=dt.UTC), catchup=False,
         params={"fail": Param(False, type="boolean"), "abort": Param(False, type="boolean")}):
    with transaction_group("load", tables=[TARGET, AUDIT]) as load:
        copy() >> audit()  # in this order: with `abort`, the commit is what meets the rolled-back transaction
    CommitCSNSensor(task_id="wait", csn=load.csn, tables=[TARGET], poke_interval=0.1, timeout=60) >> report(
        csn=load.csn)
