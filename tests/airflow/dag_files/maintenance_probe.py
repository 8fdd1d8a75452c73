"""txn_maintenance_probe: one CompactOperator whose every argument is a param (the tests pass good
and bad values), retried once so that a refused input shows as a failure without a retry."""

from __future__ import annotations

import datetime as dt

from airflow.sdk import DAG, Param

from airflow_txn.operators import CompactOperator

with DAG("txn_maintenance_probe", schedule=None, start_date=dt.datetime(2024, 1, 1), catchup=False,
         params={"tables": Param("sales.events", type="string"), "partitions": Param(None, type=["null", "array"]),
                 "engine": Param("arrow", type="string"), "target_file_bytes": Param("134217728", type="string"),
                 "min_parts": Param(2, type="integer")},
         default_args={"retries": 1, "retry_delay": dt.timedelta(seconds=0)}):
    CompactOperator(task_id="compact", tables="{{ params.tables }}", partitions="{{ params.partitions }}",
                    engine="{{ params.engine }}", target_file_bytes="{{ params.target_file_bytes }}",
                    min_parts="{{ params.min_parts }}")
