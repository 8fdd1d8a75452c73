"""Partition values survive Spark's directory names: escaped characters, nulls, dates, booleans and
timestamps decode to the same canonical partition as the core's own writes, through several levels."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pytest

import airflow_txn.spark as txn_spark
from airflow_txn import Warehouse
from airflow_txn.errors import SchemaMismatchError
from tests.helpers import storage_files
from tests.spark.helpers import arrow_rows, frame, rows_of

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark

UTC = dt.UTC
WIDE = pa.schema([("s", pa.string()), ("n", pa.int32()), ("d", pa.date32()), ("b", pa.bool_()),
                  ("ts", pa.timestamp("us", tz="UTC")), ("v", pa.float64())])
STRINGS = ["a/b=c", "é %25 +:*?{}[]^\"#'\\", "..", "x y", "}", "[", "100%", " ", "日本", "q" * 150, None]


def wide_rows() -> list[tuple[Any, ...]]:
    day, stamp = dt.date(2024, 2, 29), dt.datetime(2024, 3, 1, 10, 0, 0, 500000, tzinfo=UTC)
    rows = [(s, i - 3, day, i % 2 == 0, stamp + dt.timedelta(hours=i), float(i)) for i, s in enumerate(STRINGS)]
    return [*rows, ("nulls", None, None, None, None, 99.0)]


def test_spark_and_core_writes_of_the_same_values_share_partitions(spark: SparkSession, swh: Warehouse,
                                                                    tmp_path: Path) -> None:
    swh.create_table("ns.wide", WIDE, partition_by=["s", "n", "d", "b", "ts"])
    rows = wide_rows()
    with swh.begin() as t:
        txn_spark.write(frame(spark, WIDE, rows), t, "ns.wide")
        t.append("ns.wide", pa.Table.from_pylist([dict(zip(WIDE.names, r, strict=True)) for r in rows], WIDE))
    parts = swh.transaction_info(t.tid)["parts"]
    spark_parts = {str(p["partition"]) for p in parts if p["path"].startswith("w-")}
    core_parts = {str(p["partition"]) for p in parts if not p["path"].startswith("w-")}
    assert spark_parts == core_parts and len(spark_parts) == len(rows)
    expected = sorted(rows * 2, key=repr)
    assert arrow_rows(swh.read("ns.wide")) == expected
    naive = [(*r[:4], r[4] and r[4].replace(tzinfo=None), r[5]) for r in expected]  # collect() gives UTC, naive
    assert rows_of(txn_spark.read(spark, swh, "ns.wide")) == sorted(naive, key=repr)
    # the whole table replaced: vacuum leaves no directory of either layout behind
    with swh.begin() as t:
        txn_spark.write(frame(spark, WIDE, []), t, "ns.wide", mode="overwrite")
    swh.vacuum(retention_seconds=0)
    assert storage_files(tmp_path / "warehouse") == set()
    assert list((tmp_path / "warehouse" / "ns" / "wide").iterdir()) == []


def test_timestamp_partitions_follow_the_session_time_zone(spark: SparkSession, swh: Warehouse) -> None:
    schema = pa.schema([("ts", pa.timestamp("us", tz="UTC")), ("local", pa.timestamp("us")), ("v", pa.int64())])
    swh.create_table("ns.stamps", schema, partition_by=["ts", "local"])
    stamp = dt.datetime(2024, 10, 27, 0, 30, tzinfo=UTC)
    row = (stamp, dt.datetime(2024, 10, 27, 2, 30), 1)
    spark.conf.set("spark.sql.session.timeZone", "+02:00")
    try:
        with swh.begin() as t:
            txn_spark.write(frame(spark, schema, [row]), t, "ns.stamps")
        spark.conf.set("spark.sql.session.timeZone", "Europe/Paris")  # 02:30 happens twice that night
        t = swh.begin()
        with pytest.raises(SchemaMismatchError, match=r"spark\.sql\.session\.timeZone to UTC"):
            txn_spark.write(frame(spark, schema, [row]), t, "ns.stamps")
        t.rollback()
    finally:
        spark.conf.set("spark.sql.session.timeZone", "UTC")
    assert swh.read("ns.stamps").to_pylist() == [{"ts": stamp, "local": dt.datetime(2024, 10, 27, 2, 30), "v": 1}]
    assert [p["partition"] for p in swh.transaction_info(swh.transactions("committed")[0]["tid"])["parts"]] == [
        {"ts": "2024-10-27T00:30:00+00:00", "local": "2024-10-27T02:30:00"}]
    # Spark's directory says 02:30 (the writer's zone), not the instant: read in UTC, the values come from the catalog
    assert rows_of(txn_spark.read(spark, swh, "ns.stamps", via="native")) == [
        (stamp.replace(tzinfo=None), dt.datetime(2024, 10, 27, 2, 30), 1)]
