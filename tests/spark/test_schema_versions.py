"""Spark's native reader across schema versions (docs/DESIGN.md, D27): files written before column ids existed
carry no Parquet field ids; each version's parts are scanned by that version's names, so they read under a newer
version (a renamed column, an added one) as the core reads them. tests/conformance/test_table_changes.py runs the
other cases on every path."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import airflow_txn.spark as txn_spark
from airflow_txn import Warehouse
from airflow_txn.model.evolution import column_id
from airflow_txn.spark.settings import temporary_setting

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("item", pa.string()), ("day", pa.string())])


def test_files_without_field_ids_read_by_name_under_a_newer_version(spark: SparkSession, swh: Warehouse) -> None:
    swh.create_table("s.t", SCHEMA, partition_by=["day"])
    frame = spark.createDataFrame([(1, "a", "d1"), (2, "b", "d2")], "id long, item string, day string")
    with temporary_setting(spark, "spark.sql.parquet.fieldId.write.enabled", "false"), swh.begin() as t:
        txn_spark.write(frame, t, "s.t", via="native")  # files as Spark wrote them before ids: none in them
    files = sorted(Path(swh.config.root).rglob("*.parquet"))
    assert files and all(column_id(f) is None for path in files for f in pq.read_schema(path))
    with swh.begin() as t:
        t.rename_column("s.t", "item", "product")
        t.add_column("s.t", pa.field("n", pa.int32()), default=7)
    got = txn_spark.read(spark, swh, "s.t", via="native").toArrow()
    assert got.schema.names == ["id", "product", "day", "n"]
    assert sorted(got.to_pylist(), key=lambda r: r["id"]) == sorted(swh.read("s.t").to_pylist(), key=lambda r: r["id"])
    assert sorted(got["product"].to_pylist()) == ["a", "b"] and got["n"].to_pylist() == [7, 7]
