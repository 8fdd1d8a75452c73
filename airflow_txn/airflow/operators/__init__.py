"""Operators of the airflow layer."""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_txn.airflow._lazy import lazy_exports

if TYPE_CHECKING:
    from airflow_txn.airflow.operators.maintenance import CompactOperator, VacuumOperator
    from airflow_txn.airflow.operators.spark import SparkTransactionOperator
    from airflow_txn.airflow.operators.transaction import (
        BeginTransactionOperator,
        CommitTransactionOperator,
        RollbackTransactionOperator,
        TransactionOutcomeOperator,
    )

__all__ = [
    "BeginTransactionOperator",
    "CommitTransactionOperator",
    "CompactOperator",
    "RollbackTransactionOperator",
    "SparkTransactionOperator",
    "TransactionOutcomeOperator",
    "VacuumOperator",
]
__getattr__ = lazy_exports(__name__, {
    **dict.fromkeys(["BeginTransactionOperator", "CommitTransactionOperator", "RollbackTransactionOperator",
                     "TransactionOutcomeOperator"], "airflow_txn.airflow.operators.transaction"),
    "SparkTransactionOperator": "airflow_txn.airflow.operators.spark",
    **dict.fromkeys(["CompactOperator", "VacuumOperator"], "airflow_txn.airflow.operators.maintenance"),
})
