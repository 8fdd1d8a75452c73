"""The Spark engine of the write-audit-publish checks (airflow_txn.checks): each table the checks read is
a temporary view of `airflow_txn.spark.read(..., txn=txn)` (the transaction's own view: its snapshot
plus its staged parts), and each check's query runs as Spark SQL. For tables too large for one
process; the checks' SQL is the same as DuckDB's, identifiers quoted with backticks.

    report = airflow_txn.checks.run_checks(txn, checks, SparkEngine(spark))
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

from pyspark.sql import SparkSession

from airflow_txn.core.transaction import Transaction
from airflow_txn.model.options import CheckEngine
from airflow_txn.spark.reader import read


class SparkEngine:
    """Checks evaluated by Spark SQL over temporary views of the transaction's view of each table."""

    name: str = CheckEngine.SPARK.value

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark

    def quote(self, identifier: str) -> str:
        return "`" + identifier.replace("`", "``") + "`"

    @contextmanager
    def views(self, txn: Transaction, views: Mapping[str, str]) -> Iterator[Callable[[str], object]]:
        for table, view in views.items():
            read(self.spark, txn.warehouse, table, txn=txn).createOrReplaceTempView(view)
        try:
            yield lambda sql: self.spark.sql(sql).collect()[0][0]
        finally:
            for view in views.values():
                self.spark.catalog.dropTempView(view)
