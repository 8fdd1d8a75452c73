"""The Airflow layer: operators, CSN sensor and trigger, transaction_group, hook, listener, plugin.

    from airflow_txn.operators import BeginTransactionOperator, SparkTransactionOperator, ...
    from airflow_txn.sensors import CommitCSNSensor
    from airflow_txn.airflow import transaction_group, table_asset

Importing this package is cheap; the first use of a name below imports Airflow (3.0 or later).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from airflow_txn.airflow._lazy import lazy_exports as _lazy_exports

if TYPE_CHECKING:
    from airflow_txn.airflow.assets import commit_alias, table_asset
    from airflow_txn.airflow.hooks.txn import TxnHook
    from airflow_txn.airflow.operators.maintenance import CompactOperator, VacuumOperator
    from airflow_txn.airflow.operators.spark import SparkTransactionOperator, spark_session
    from airflow_txn.airflow.operators.transaction import (
        BeginTransactionOperator,
        CommitTransactionOperator,
        RollbackTransactionOperator,
        TransactionOutcomeOperator,
    )
    from airflow_txn.airflow.sensors.csn import CommitCSNSensor
    from airflow_txn.airflow.task_group import TransactionTaskGroup, transaction_group
    from airflow_txn.airflow.triggers.csn import CommitCSNTrigger

_EXPORTS = {
    "transaction_group": "airflow_txn.airflow.task_group",
    "TransactionTaskGroup": "airflow_txn.airflow.task_group",
    "TxnHook": "airflow_txn.airflow.hooks.txn",
    "BeginTransactionOperator": "airflow_txn.airflow.operators.transaction",
    "CommitTransactionOperator": "airflow_txn.airflow.operators.transaction",
    "RollbackTransactionOperator": "airflow_txn.airflow.operators.transaction",
    "TransactionOutcomeOperator": "airflow_txn.airflow.operators.transaction",
    "SparkTransactionOperator": "airflow_txn.airflow.operators.spark",
    "CompactOperator": "airflow_txn.airflow.operators.maintenance",
    "VacuumOperator": "airflow_txn.airflow.operators.maintenance",
    "spark_session": "airflow_txn.airflow.operators.spark",
    "CommitCSNSensor": "airflow_txn.airflow.sensors.csn",
    "CommitCSNTrigger": "airflow_txn.airflow.triggers.csn",
    "table_asset": "airflow_txn.airflow.assets",
    "commit_alias": "airflow_txn.airflow.assets",
}

__all__ = [
    "BeginTransactionOperator",
    "CommitCSNSensor",
    "CommitCSNTrigger",
    "CommitTransactionOperator",
    "CompactOperator",
    "RollbackTransactionOperator",
    "SparkTransactionOperator",
    "TransactionOutcomeOperator",
    "TransactionTaskGroup",
    "TxnHook",
    "VacuumOperator",
    "commit_alias",
    "spark_session",
    "table_asset",
    "transaction_group",
]


def require_airflow() -> None:
    """Raise an ImportError naming the extra to install when Airflow is missing."""
    try:
        importlib.import_module("airflow.sdk")
    except ImportError as exc:
        raise ImportError("airflow_txn.airflow needs Apache Airflow 3: pip install 'airflow-txn[airflow]'") from exc


__getattr__ = _lazy_exports(__name__, _EXPORTS, before=require_airflow)
