"""AirflowTxnPlugin (entry point `airflow.plugins`): registers the rollback listener."""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from airflow_txn.airflow import listener


class AirflowTxnPlugin(AirflowPlugin):
    """Rolls back the transaction of a DAG run that fails and of a task that fails for good."""

    name = "airflow_txn"
    listeners = [listener]
