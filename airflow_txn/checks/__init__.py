"""Write-audit-publish across tables: checks run against a transaction's own view before its commit.

    from airflow_txn.checks import NullCheck, ReferenceCheck, RowCountCheck, run_checks

    report = run_checks(txn, [RowCountCheck("shop.orders", min=1),
                              ReferenceCheck("shop.orders", "customer_id", "shop.customers")])

The checks (definitions.py) are plain dataclasses validated when built; run_checks (runner.py) evaluates
them with DuckDB over the transaction's manifest (duckdb_engine.py) or with Spark
(airflow_txn.spark.checks.SparkEngine). In Airflow: TransactionCheckOperator, `@task.txn_check`, and
`transaction_group(..., checks=[...])` (docs/OPERATORS.md). Importing this package loads no DuckDB.
"""

from __future__ import annotations

from airflow_txn.checks.definitions import (
    CHECK_TYPES,
    Check,
    NullCheck,
    PredicateCheck,
    ReferenceCheck,
    RowCountCheck,
    UniqueCheck,
    check_list,
)
from airflow_txn.checks.runner import (
    CheckReport,
    CheckResult,
    Engine,
    failure_reason,
    format_report,
    record,
    run_checks,
)

__all__ = ["CHECK_TYPES", "Check", "CheckReport", "CheckResult", "Engine", "NullCheck", "PredicateCheck",
           "ReferenceCheck", "RowCountCheck", "UniqueCheck", "check_list", "failure_reason", "format_report",
           "record", "run_checks"]
