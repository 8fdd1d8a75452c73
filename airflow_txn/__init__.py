"""airflow_txn: make a DAG of Spark tasks that writes several tables behave as ONE transaction.

The core (this package without `airflow_txn.spark` and `airflow_txn.airflow`) imports neither
Airflow nor Spark. What the Warehouse returns is shaped by the TypedDicts of `airflow_txn.model.results`
(`from airflow_txn import results`), the main ones re-exported here. The options picked by name (isolation,
via, mode, the compaction's and the checks' engine, manifests) are string enums, also exported here
(`airflow_txn.model.options`): pass a member or its string.

Importing the package is cheap: each name below is loaded on first use (PEP 562), so a command line that
only prints its help, or a DAG file that names an operator, pays for no catalog, pyarrow or SQLAlchemy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from airflow_txn import errors
from airflow_txn.errors import TxnError
from airflow_txn.model.csn import PREHISTORIC_CSN, ROLLBACK_CSN
from airflow_txn.model.version import VERSION

if TYPE_CHECKING:
    from airflow_txn.core.isolation import Isolation
    from airflow_txn.core.transaction import Transaction
    from airflow_txn.core.warehouse import Warehouse
    from airflow_txn.model import results
    from airflow_txn.model.options import CheckEngine, CompactionEngine, Manifests, Via, WriteMode
    from airflow_txn.model.results import (
        CommitLogEntry,
        CompactionReport,
        RecoveryReport,
        TransactionInfo,
        TransactionRecord,
        VacuumReport,
    )

__version__ = VERSION

__all__ = ["PREHISTORIC_CSN", "ROLLBACK_CSN", "CheckEngine", "CommitLogEntry", "CompactionEngine",
           "CompactionReport", "Isolation", "Manifests", "RecoveryReport", "Transaction", "TransactionInfo",
           "TransactionRecord", "TxnError", "VacuumReport", "Via", "Warehouse", "WriteMode", "errors", "results"]

OPTIONS = {
    "Isolation": "airflow_txn.core.isolation",
    **{name: "airflow_txn.model.options" for name in ("Via", "WriteMode", "CompactionEngine", "CheckEngine",
                                                      "Manifests")},
}
"""{name: module} of the option enums (model/options.py; the isolation level's rules are the core's)."""

_LAZY = {
    "Transaction": "airflow_txn.core.transaction",
    "Warehouse": "airflow_txn.core.warehouse",
    **{name: "airflow_txn.model.results" for name in ("CommitLogEntry", "CompactionReport", "RecoveryReport",
                                                      "TransactionInfo", "TransactionRecord", "VacuumReport")},
    **OPTIONS,
}


def __getattr__(name: str) -> Any:
    if name == "results":
        value: Any = importlib.import_module("airflow_txn.model.results")
    elif name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
    else:
        raise AttributeError(f"module 'airflow_txn' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
