"""airflow_txn: make a DAG of Spark tasks that writes several tables behave as ONE transaction.

The core (this package without `airflow_txn.spark` and `airflow_txn.airflow`) imports neither
Airflow nor Spark. What the Warehouse returns is shaped by the TypedDicts of `airflow_txn.model.results`
(`from airflow_txn import results`), the main ones re-exported here.
"""

from airflow_txn import errors
from airflow_txn.core.transaction import Transaction
from airflow_txn.core.warehouse import Warehouse
from airflow_txn.errors import TxnError
from airflow_txn.model import results
from airflow_txn.model.csn import PREHISTORIC_CSN, ROLLBACK_CSN
from airflow_txn.model.results import (
    CommitLogEntry,
    CompactionReport,
    RecoveryReport,
    TransactionInfo,
    TransactionRecord,
    VacuumReport,
)

__version__ = "0.1.0"

__all__ = ["PREHISTORIC_CSN", "ROLLBACK_CSN", "CommitLogEntry", "CompactionReport", "RecoveryReport", "Transaction",
           "TransactionInfo", "TransactionRecord", "TxnError", "VacuumReport", "Warehouse", "errors", "results"]
