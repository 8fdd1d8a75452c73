"""The transaction and maintenance operators: `from airflow_txn.operators import ...`. Imports Airflow."""

from airflow_txn.airflow.operators import (
    BeginTransactionOperator,
    CommitTransactionOperator,
    CompactOperator,
    RollbackTransactionOperator,
    SparkTransactionOperator,
    TransactionOutcomeOperator,
    VacuumOperator,
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
