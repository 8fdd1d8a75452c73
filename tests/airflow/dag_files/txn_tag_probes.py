"""Small DAGs the tag tests run (copied into the tests' DAG folder next to dags/*.py).

txn_race_tag_probe  begin, a Python task appending two rows to probe.events (no Spark), and a commit that tags
                    its snapshot `race-tag` (tests/airflow/test_tags.py takes that name while the commit runs)
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from airflow.sdk import DAG

from airflow_txn.operators import BeginTransactionOperator, CommitTransactionOperator, TransactionPythonOperator

RACE_TABLE = "probe.events"
RACE_TAG = "race-tag"


def append_two_rows(txn: Any) -> None:
    import pyarrow as pa

    txn.append(RACE_TABLE, pa.table({"id": [1, 2]}))


with DAG("txn_race_tag_probe", schedule=None, start_date=dt.datetime(2024, 1, 1), catchup=False):
    begin = BeginTransactionOperator(task_id="begin")
    load = TransactionPythonOperator(task_id="load", tid=begin.output, python_callable=append_two_rows)
    commit = CommitTransactionOperator(task_id="commit", tid=begin.output, tag=RACE_TAG)
    begin >> load >> commit
