"""Spark reads of a table whose parts span versions of its schema (docs/DESIGN.md, D27): the data source reads each
part as its version and projects it by column id (a renamed column takes its new name, a widened one is cast, an
added one is null or its default), as the core's reads do; time travel reads the old schema."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa
import pytest

import airflow_txn.spark as txn_spark
from airflow_txn import Warehouse
from airflow_txn.errors import SchemaMismatchError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark
TABLE = "shop.orders"


def test_the_data_source_reads_old_parts_under_the_new_schema(spark: SparkSession, swh: Warehouse) -> None:
    swh.create_table(TABLE, pa.schema([("id", pa.int32()), ("item", pa.string()), ("day", pa.string())]), ["day"])
    with swh.begin() as t:
        t.append(TABLE, pa.table({"id": pa.array([1, 2], pa.int32()), "item": ["a", "b"], "day": ["d1", "d1"]}))
    before = swh.readable_csn()
    with swh.begin() as t:
        t.add_column(TABLE, pa.field("qty", pa.int64(), nullable=False), default=7)
        t.rename_column(TABLE, "item", "product")
        t.alter_column(TABLE, "id", pa.int64())
        t.append(TABLE, pa.table({"id": pa.array([3], pa.int64()), "product": ["c"], "day": ["d2"],
                                  "qty": pa.array([1], pa.int64())}))
    df = txn_spark.read(spark, swh, TABLE, via="datasource")
    assert sorted((r["id"], r["product"], r["qty"]) for r in df.collect()) == [(1, "a", 7), (2, "b", 7), (3, "c", 1)]
    old = txn_spark.read(spark, swh, TABLE, csn=before, via="datasource")
    assert sorted(old.columns) == ["day", "id", "item"]
    assert sorted((r["id"], r["item"]) for r in old.collect()) == [(1, "a"), (2, "b")]



def test_the_native_reader_refuses_parts_it_would_misread(spark: SparkSession, swh: Warehouse) -> None:
    """Spark's native Parquet reader matches columns by name: a table with a renamed column across its parts is
    refused (typed, before any read) rather than read with nulls; only added columns it reads as the core does."""
    swh.create_table(TABLE, pa.schema([("id", pa.int32()), ("item", pa.string()), ("day", pa.string())]), ["day"])
    with swh.begin() as t:
        t.append(TABLE, pa.table({"id": pa.array([1, 2], pa.int32()), "item": ["a", "b"], "day": ["d1", "d1"]}))
    with swh.begin() as t:
        t.add_column(TABLE, pa.field("qty", pa.int64()))
    df = txn_spark.read(spark, swh, TABLE, via="native")
    assert sorted((r["id"], r["item"], r["qty"]) for r in df.collect()) == [(1, "a", None), (2, "b", None)]
    with swh.begin() as t:
        t.rename_column(TABLE, "item", "product")
    with pytest.raises(SchemaMismatchError, match="via='datasource'"):
        txn_spark.read(spark, swh, TABLE, via="native")
    df = txn_spark.read(spark, swh, TABLE, via="datasource")
    assert sorted((r["id"], r["product"]) for r in df.collect()) == [(1, "a"), (2, "b")]
