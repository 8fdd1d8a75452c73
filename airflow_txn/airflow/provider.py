"""Provider metadata (entry point `apache_airflow_provider`): the `airflow_txn` connection type and
its form, and where the hooks, operators, sensors and triggers live. Imports nothing heavy."""

from __future__ import annotations

from typing import Any

INTEGRATION = "airflow_txn"


def get_provider_info() -> dict[str, Any]:
    return {
        "package-name": "airflow-txn",
        "name": "airflow_txn",
        "description": "Make a DAG of Spark tasks writing several tables behave as ONE database transaction.",
        "integrations": [{"integration-name": INTEGRATION, "tags": ["software"]}],
        "hooks": [{"integration-name": INTEGRATION, "python-modules": ["airflow_txn.airflow.hooks.txn"]}],
        "operators": [{"integration-name": INTEGRATION, "python-modules": [
            "airflow_txn.airflow.operators.transaction", "airflow_txn.airflow.operators.spark"]}],
        "sensors": [{"integration-name": INTEGRATION, "python-modules": ["airflow_txn.airflow.sensors.csn"]}],
        "triggers": [{"integration-name": INTEGRATION, "python-modules": ["airflow_txn.airflow.triggers.csn"]}],
        "connection-types": [{
            "connection-type": "airflow_txn",
            "hook-class-name": "airflow_txn.airflow.hooks.txn.TxnHook",
            "hook-name": "airflow_txn warehouse",
            "conn-fields": {
                "catalog": {"label": "Catalog URL", "description":
                            "SQLAlchemy URL of the catalog, e.g. postgresql+psycopg://user@host/db "
                            "(empty: AIRFLOW_TXN_CATALOG or the embedded SQLite file)",
                            "schema": {"type": ["string", "null"]}},
                "root": {"label": "Storage root", "description":
                         "Directory of the Parquet files (empty: AIRFLOW_TXN_ROOT or ~/.airflow_txn/warehouse)",
                         "schema": {"type": ["string", "null"]}},
                "oracle": {"label": "CSN oracle", "description":
                           "'sql' (default) or 'zookeeper://host:port[,host:port]/chroot'",
                           "schema": {"type": ["string", "null"], "default": "sql"}},
            },
            "ui-field-behaviour": {
                "hidden-fields": ["host", "schema", "login", "password", "port"],
                "relabeling": {},
                "placeholders": {"catalog": "sqlite:////var/lib/airflow_txn/catalog.db", "root": "/data/warehouse",
                                 "oracle": "sql"},
            },
        }],
    }
