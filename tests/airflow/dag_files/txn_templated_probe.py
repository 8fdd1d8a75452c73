"""A DAG whose transaction arguments are all templates (copied into the tests' DAG folder).

txn_templated_probe  begin (conn_id, isolation and lease_seconds from params) -> a task appending rows
                     through the same connection -> commit (conn_id from params, its outlet an alias
                     the DAG names: a templated conn_id has no default alias)
                     params: conn, isolation, lease, rows
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from airflow.sdk import DAG, AssetAlias, Param, task

from airflow_txn.airflow import TxnHook
from airflow_txn.operators import BeginTransactionOperator, CommitTransactionOperator

TEMPLATED_TABLE = "probe.templated"
TEMPLATED_ALIAS = "airflow-txn-probe-commits"


@task
def append_through_the_connection(tid: str, params: dict[str, Any]) -> int:
    import pyarrow as pa

    rows = int(params["rows"])
    with TxnHook(conn_id=params["conn"]).warehouse() as wh:
        wh.create_table(TEMPLATED_TABLE, pa.schema([("id", pa.int64())]), exist_ok=True)
        wh.attach(tid).append(TEMPLATED_TABLE, pa.table({"id": list(range(rows))}))
    return rows


with DAG("txn_templated_probe", schedule=None, start_date=dt.datetime(2024, 1, 1), catchup=False,
         params={"conn": Param("airflow_txn_default", type="string"), "isolation": Param("snapshot", type="string"),
                 "lease": Param("", type="string"), "rows": Param(3, type="integer")}):
    begin = BeginTransactionOperator(task_id="begin", conn_id="{{ params.conn }}", isolation="{{ params.isolation }}",
                                     lease_seconds="{{ params.lease }}", retries=1)
    staged = append_through_the_connection(begin.output)
    commit = CommitTransactionOperator(task_id="commit", tid=begin.output, conn_id="{{ params.conn }}",
                                       outlets=[AssetAlias(TEMPLATED_ALIAS)])
    staged >> commit
