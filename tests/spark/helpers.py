"""Builders for the Spark tests: DataFrames of the shared test schemas, and sorted row lists."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa

from airflow_txn.spark.types import to_spark_schema

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def frame(spark: SparkSession, schema: pa.Schema, rows: list[tuple[Any, ...]]) -> DataFrame:
    return spark.createDataFrame(rows, to_spark_schema(schema))


def events_df(spark: SparkSession, ids: list[int], day: str = "2024-01-01", value: float = 1.0) -> DataFrame:
    from tests.helpers import EVENTS

    return frame(spark, EVENTS, [(i, day, value) for i in ids])


def rows_of(df: DataFrame) -> list[tuple[Any, ...]]:
    return sorted((tuple(r) for r in df.collect()), key=repr)


def arrow_rows(table: pa.Table) -> list[tuple[Any, ...]]:
    return sorted((tuple(r.values()) for r in table.to_pylist()), key=repr)

