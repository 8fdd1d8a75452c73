"""The Spark engine of the checks (airflow_txn.spark.checks) finds exactly what DuckDB finds in a
transaction's own view: the same SQL over temporary views of airflow_txn.spark.read(..., txn=txn)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from airflow_txn import Warehouse
from airflow_txn.checks import run_checks
from airflow_txn.spark.checks import SparkEngine
from tests.checks.test_checks import CHECKS, EXPECTED, audited, results

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark


def test_spark_finds_what_duckdb_finds_in_the_transactions_view(spark: SparkSession, swh: Warehouse) -> None:
    txn = audited(swh)
    chosen = [1, 3, 5, 6]  # a staged delete, a GROUP BY, a partition column, NOT EXISTS (each check is a Spark job)
    report = run_checks(txn, [CHECKS[i] for i in chosen], SparkEngine(spark))
    assert report["engine"] == "spark"
    assert results(report) == [EXPECTED[i] for i in chosen]  # type: ignore[arg-type]
    assert not [v for v in spark.catalog.listTables() if v.name.startswith("sales__")]  # its views are dropped
