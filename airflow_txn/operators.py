"""The transaction operators (CONTRACT.md): `from airflow_txn.operators import ...`. Imports Airflow."""

from airflow_txn.airflow.operators import (
    BeginTransactionOperator,
    CommitTransactionOperator,
    RollbackTransactionOperator,
    SparkTransactionOperator,
    TransactionOutcomeOperator,
)

__all__ = [
    "BeginTransactionOperator",
    "CommitTransactionOperator",
    "RollbackTransactionOperator",
    "SparkTransactionOperator",
    "TransactionOutcomeOperator",
]
