"""The Spark layer: stage DataFrames in a transaction and read exact snapshots as DataFrames.

    import airflow_txn.spark as txn_spark
    txn_spark.write(df, t, "shop.orders", mode="append")           # Spark writes the part files itself
    txn_spark.read(spark, wh, "shop.orders", csn=42)                # the table at CSN 42 (or tag="month-end")
    txn_spark.delete(spark, t, "shop.orders", "amount < 0")         # copy-on-write, affected parts only
    txn_spark.compact(spark, wh, "shop.orders")                     # wh.compact with Spark writing the merges
    txn_spark.register(spark)      # df.write.format("airflow_txn") / spark.read.format("airflow_txn")
    txn_spark.register_tables(spark, wh, csn=42)   # spark.table("shop.orders"), spark.sql(...): one snapshot

`mode` and `via` take a string ("overwrite", "datasource") or a member of `txn_spark.WriteMode` / `txn_spark.Via`
(airflow_txn.model.options); anything else raises InvalidOptionError before Spark runs anything.

Importing this package is cheap and loads no PySpark; the first use of a function below does, and
without PySpark it raises an ImportError that says what to install.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_txn.model.options import Via, WriteMode
    from airflow_txn.spark.compaction import compact
    from airflow_txn.spark.cow import delete, update
    from airflow_txn.spark.datasource import register, warehouse_options
    from airflow_txn.spark.merging import merge
    from airflow_txn.spark.reader import read
    from airflow_txn.spark.tables import register_tables
    from airflow_txn.spark.types import to_arrow_schema, to_spark_schema
    from airflow_txn.spark.writer import write

_EXPORTS = {
    "compact": "airflow_txn.spark.compaction",
    "write": "airflow_txn.spark.writer",
    "read": "airflow_txn.spark.reader",
    "register": "airflow_txn.spark.datasource",
    "register_tables": "airflow_txn.spark.tables",
    "warehouse_options": "airflow_txn.spark.datasource",
    "merge": "airflow_txn.spark.merging",
    "delete": "airflow_txn.spark.cow",
    "update": "airflow_txn.spark.cow",
    "to_arrow_schema": "airflow_txn.spark.types",
    "to_spark_schema": "airflow_txn.spark.types",
    "Via": "airflow_txn.model.options",
    "WriteMode": "airflow_txn.model.options",
}

__all__ = ["Via", "WriteMode", "compact", "delete", "merge", "read", "register", "register_tables", "to_arrow_schema",
           "to_spark_schema", "update", "warehouse_options", "write"]


def require_pyspark() -> None:
    """Raise an ImportError naming the extra to install when PySpark is missing."""
    try:
        importlib.import_module("pyspark.sql")
    except ImportError as exc:
        raise ImportError(
            "airflow_txn.spark needs PySpark (4.1 or later): pip install 'airflow-txn[spark]'"
        ) from exc


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'airflow_txn.spark' has no attribute {name!r}")
    if not module.startswith("airflow_txn.model."):  # the option enums need no PySpark
        require_pyspark()
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
