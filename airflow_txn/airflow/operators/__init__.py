"""Operators of the airflow layer (listed in public.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_txn.airflow import public as _public

if TYPE_CHECKING:  # what type checkers see; at run time the names below are imported on first use
    from airflow_txn.airflow.operators.check import TransactionCheckOperator as TransactionCheckOperator
    from airflow_txn.airflow.operators.maintenance import CompactOperator as CompactOperator
    from airflow_txn.airflow.operators.maintenance import VacuumOperator as VacuumOperator
    from airflow_txn.airflow.operators.python import TransactionPythonOperator as TransactionPythonOperator
    from airflow_txn.airflow.operators.read import SnapshotReadOperator as SnapshotReadOperator
    from airflow_txn.airflow.operators.spark import SparkTransactionOperator as SparkTransactionOperator
    from airflow_txn.airflow.operators.transaction import BeginTransactionOperator as BeginTransactionOperator
    from airflow_txn.airflow.operators.transaction import CommitTransactionOperator as CommitTransactionOperator
    from airflow_txn.airflow.operators.transaction import RollbackTransactionOperator as RollbackTransactionOperator
    from airflow_txn.airflow.operators.transaction import TransactionOutcomeOperator as TransactionOutcomeOperator
else:
    __all__ = _public.names(__name__)
    __getattr__ = _public.lazy_getattr(__name__)
