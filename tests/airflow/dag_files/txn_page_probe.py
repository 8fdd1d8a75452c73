"""A DAG for the plugin page's tests (copied into the tests' DAG folder next to dags/*.py).

txn_label_probe  begins a transaction with a label of its own (not `<dag_id>/<run_id>`): the page
                 still finds it by its DAG run, through the begin task's XCom. No Spark.
"""

from __future__ import annotations

import datetime as dt

from airflow.sdk import DAG

from airflow_txn.operators import BeginTransactionOperator

with DAG("txn_label_probe", schedule=None, start_date=dt.datetime(2024, 1, 1), catchup=False):
    BeginTransactionOperator(task_id="begin", label="nightly load with a label of its own")
