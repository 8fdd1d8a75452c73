"""A DAG the Airflow tests run with publishing on (the connection's `publish`): one transaction appends to two
tables without Spark and commits; each table's Asset event then carries its Iceberg snapshot id."""

from __future__ import annotations

import datetime as dt

from airflow.sdk import DAG, task

from airflow_txn.airflow import TxnHook
from airflow_txn.operators import BeginTransactionOperator, CommitTransactionOperator

TABLES = ("pub.orders", "pub.items")


@task
def append_both(tid: str) -> int:
    import pyarrow as pa

    with TxnHook().warehouse() as wh:
        txn = wh.attach(tid)
        for n, table in enumerate(TABLES):
            wh.create_table(table, pa.schema([("id", pa.int64())]), exist_ok=True)
            txn.append(table, pa.table({"id": list(range(n + 2))}))
    return len(TABLES)


with DAG("txn_publish_probe", schedule=None, start_date=dt.datetime(2024, 1, 1), catchup=False):
    begin = BeginTransactionOperator(task_id="begin")
    staged = append_both(begin.output)
    commit = CommitTransactionOperator(task_id="commit", tid=begin.output, tables=list(TABLES))
    staged >> commit
