"""Spark reads of a table whose parts span versions of its schema (docs/DESIGN.md, D27): the data source reads each
part as its version and projects it by column id, the native reader scans each version's parts as written and
projects them alike (a renamed column takes its new name, a widened one is cast, an added one is null or its
default), as the core's reads do; time travel reads the old schema. tests/conformance/test_table_changes.py runs
every case on every path."""

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


def test_the_native_reader_reads_each_versions_parts_as_written_and_projects_them(spark: SparkSession,
                                                                                 swh: Warehouse) -> None:
    """Spark's native Parquet reader scans the parts of each version by that version's names and projects them by
    column id (frames.plan_frame): a renamed column is read under its new name, not as nulls."""
    swh.create_table(TABLE, pa.schema([("id", pa.int32()), ("item", pa.string()), ("day", pa.string())]), ["day"])
    with swh.begin() as t:
        t.append(TABLE, pa.table({"id": pa.array([1, 2], pa.int32()), "item": ["a", "b"], "day": ["d1", "d1"]}))
    with swh.begin() as t:
        t.add_column(TABLE, pa.field("qty", pa.int64()))
    df = txn_spark.read(spark, swh, TABLE, via="native")
    assert sorted((r["id"], r["item"], r["qty"]) for r in df.collect()) == [(1, "a", None), (2, "b", None)]
    with swh.begin() as t:
        t.rename_column(TABLE, "item", "product")
    for via in ("native", "datasource"):
        df = txn_spark.read(spark, swh, TABLE, via=via)
        assert sorted((r["id"], r["product"]) for r in df.collect()) == [(1, "a"), (2, "b")], via


def test_files_without_field_ids_read_by_name_under_a_newer_version(spark: SparkSession, swh: Warehouse) -> None:
    """Files Spark wrote before column ids carry no Parquet field ids: read by their version's names, they read
    under a newer version (a renamed column, an added one with a default) as the core reads them."""
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("item", pa.string()), ("day", pa.string())])
    swh.create_table("s.t", schema, partition_by=["day"])
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


def test_merge_schema_refuses_a_column_of_a_type_no_table_may_hold_before_staging(spark: SparkSession,
                                                                                  swh: Warehouse) -> None:
    """A DataFrame column of a Spark type with no Arrow equivalent here (a day-time interval): merge_schema raises
    UnsupportedTypeError naming the column, as the core's merge_schema does for such a column, and stages nothing."""
    from airflow_txn.errors import UnsupportedTypeError

    swh.create_table(TABLE, pa.schema([("id", pa.int64()), ("day", pa.string())]), ["day"])
    frame = spark.sql("SELECT CAST(1 AS BIGINT) AS id, 'd1' AS day, INTERVAL '1' DAY AS wait")
    t = swh.begin()
    for via in ("native", "datasource"):
        with pytest.raises(UnsupportedTypeError, match="'wait'"):
            txn_spark.write(frame, t, TABLE, via=via, merge_schema=True)
    assert swh.transaction_info(t.tid)["parts"] == [] and t.read(TABLE).schema.names == ["id", "day"]
    t.rollback()
