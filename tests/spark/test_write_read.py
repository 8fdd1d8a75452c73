"""Spark writes and reads through a transaction: multi-table commit, rollback, retries, overwrites,
conflicts, schema checks, and snapshot reads (time travel, the transaction's own view)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pytest

import airflow_txn.spark as txn_spark
from airflow_txn import Warehouse
from airflow_txn.errors import (
    SchemaMismatchError,
    SerializationError,
    SnapshotTooOldError,
    StorageError,
    TableNotInTagError,
    TagNotFoundError,
    TransactionClosedError,
    TxnError,
)
from tests.helpers import ACCOUNTS, accounts, events, ids, make_tables, storage_files
from tests.spark.helpers import events_df, frame, rows_of

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark


def test_two_tables_commit_at_one_csn_and_read_back(spark: SparkSession, wh: Warehouse) -> None:
    make_tables(wh)
    before = wh.readable_csn()
    with wh.begin(label="spark") as t:
        assert txn_spark.write(events_df(spark, [1, 2]).union(events_df(spark, [3], day="2024-01-02")), t,
                               "sales.events") == 3
        assert txn_spark.write(frame(spark, ACCOUNTS, [(1, 10), (2, 20)]), t, "sales.accounts") == 2
        assert txn_spark.read(spark, wh, "sales.events").count() == 0  # not committed yet
    csn = wh.readable_csn()
    assert csn == before + 1 == wh.last_commit_csn("sales.events") == wh.last_commit_csn("sales.accounts")
    assert rows_of(txn_spark.read(spark, wh, "sales.events")) == [
        (1, "2024-01-01", 1.0), (2, "2024-01-01", 1.0), (3, "2024-01-02", 1.0)]
    assert rows_of(txn_spark.read(spark, wh, "sales.accounts", csn=csn)) == [(1, 10), (2, 20)]
    assert txn_spark.read(spark, wh, "sales.accounts", csn=before).count() == 0
    # the core reads what Spark wrote: one part per partition, partition columns restored
    assert ids(wh.read("sales.events")) == [1, 2, 3]
    parts = wh.transaction_info(t.tid)["parts"]
    assert sorted(p["partition"]["day"] for p in parts if p["table"] == "sales.events") == ["2024-01-01",
                                                                                             "2024-01-02"]


def test_rollback_leaves_nothing_visible_and_vacuum_removes_the_files(spark: SparkSession, swh: Warehouse,
                                                                        tmp_path: Path) -> None:
    make_tables(swh)
    t = swh.begin()
    txn_spark.write(events_df(spark, [1, 2]), t, "sales.events")
    txn_spark.write(frame(spark, ACCOUNTS, [(1, 10)]), t, "sales.accounts")
    assert any(f.endswith(".parquet") for f in storage_files(tmp_path / "warehouse"))
    t.rollback()
    assert swh.read("sales.events").num_rows == 0
    assert txn_spark.read(spark, swh, "sales.accounts").count() == 0
    report = swh.vacuum(retention_seconds=0)
    assert report["parts_removed"] == 2
    assert storage_files(tmp_path / "warehouse") == set()


def test_a_retry_under_the_same_key_replaces_the_failed_try(spark: SparkSession, swh: Warehouse) -> None:
    make_tables(swh)
    with swh.begin() as t:
        txn_spark.write(events_df(spark, [1, 2]), t, "sales.events", key="dag/load/0")
        txn_spark.write(events_df(spark, [1, 2]), t, "sales.events", key="dag/load/0")  # the retry
        t.use_key("dag/other/0", attempt=1)  # the default key (Airflow's) is used when none is passed
        txn_spark.write(events_df(spark, [7]), t, "sales.events")
        t.use_key("dag/other/0", attempt=2)
        txn_spark.write(events_df(spark, [8]), t, "sales.events")
    assert ids(swh.read("sales.events")) == [1, 2, 8]


def test_overwrite_of_listed_partitions_replaces_only_them(spark: SparkSession, swh: Warehouse) -> None:
    make_tables(swh)
    with swh.begin() as t:
        t.append("sales.events", events([1, 2], day="2024-01-01"))
        t.append("sales.events", events([3], day="2024-01-02"))
    with swh.begin() as t:
        assert txn_spark.write(events_df(spark, [10], day="2024-01-02"), t, "sales.events", mode="overwrite",
                               partitions=[{"day": "2024-01-02"}]) == 1
    assert ids(swh.read("sales.events")) == [1, 2, 10]
    with swh.begin() as t:
        txn_spark.write(events_df(spark, [5], day="2024-01-03"), t, "sales.events", mode="overwrite")
    assert ids(swh.read("sales.events")) == [5]


def test_overwrite_with_rows_outside_the_listed_partitions_is_rejected(spark: SparkSession, swh: Warehouse,
                                                                        tmp_path: Path) -> None:
    make_tables(swh)
    t = swh.begin()
    with pytest.raises(SchemaMismatchError, match="also holds rows"):
        txn_spark.write(events_df(spark, [1], day="2024-01-09"), t, "sales.events", mode="overwrite",
                        partitions=[{"day": "2024-01-02"}])
    assert storage_files(tmp_path / "warehouse") == set()
    assert t.state == "active" and swh.transaction_info(t.tid)["parts"] == []


def test_concurrent_overwrite_of_one_partition_fails_the_second_writer(spark: SparkSession, swh: Warehouse,
                                                                       tmp_path: Path) -> None:
    make_tables(swh)
    with swh.begin() as t:
        t.append("sales.events", events([1], day="2024-01-01"))
    first, second = swh.begin(), swh.begin()
    day = [{"day": "2024-01-01"}]
    txn_spark.write(events_df(spark, [2]), first, "sales.events", mode="overwrite", partitions=day)
    with pytest.raises(SerializationError):
        txn_spark.write(events_df(spark, [3]), second, "sales.events", mode="overwrite", partitions=day)
    with pytest.raises(TransactionClosedError):  # the loser can only roll back
        second.commit()
    second.rollback()
    first.commit()
    assert ids(swh.read("sales.events")) == [2]
    swh.vacuum(retention_seconds=0)
    assert len([f for f in storage_files(tmp_path / "warehouse") if f.endswith(".parquet")]) == 1


def test_schema_mismatch_is_refused_before_anything_is_written(spark: SparkSession, swh: Warehouse,
                                                               tmp_path: Path) -> None:
    make_tables(swh)
    t = swh.begin()
    wrong = spark.createDataFrame([(1, "2024-01-01", "x")], "id long, day string, value string")
    with pytest.raises(SchemaMismatchError, match=r"column 'value' is string, the table has double"):
        txn_spark.write(wrong, t, "sales.events")
    with pytest.raises(SchemaMismatchError, match=r"missing column\(s\) \['value'\].*unknown column\(s\) \['v'\]"):
        txn_spark.write(spark.createDataFrame([(1, "d", 1.0)], "id long, day string, v double"), t, "sales.events")
    assert storage_files(tmp_path / "warehouse") == set()
    # columns are matched by name, so another order is fine; the transaction is still usable
    txn_spark.write(spark.createDataFrame([(1.5, 4, "2024-01-01")], "value double, id long, day string"), t,
                    "sales.events")
    t.commit()
    assert swh.read("sales.events").to_pylist() == [{"id": 4, "day": "2024-01-01", "value": 1.5}]


def test_rows_the_table_refuses_fail_the_job_and_leave_nothing(spark: SparkSession, swh: Warehouse,
                                                                tmp_path: Path) -> None:
    strict = pa.schema([pa.field("id", pa.int64(), nullable=False), ("day", pa.string())])
    swh.create_table("ns.strict", strict, partition_by=["day"])
    t = swh.begin()
    nulls = spark.createDataFrame([(1, "a"), (None, "a")], "id long, day string")
    with pytest.raises(SchemaMismatchError, match=r"'id' of ns\.strict is not nullable"):
        txn_spark.write(nulls, t, "ns.strict")
    empty_day = spark.createDataFrame([(1, "")], "id long, day string")
    with pytest.raises(SchemaMismatchError, match="empty string"):
        txn_spark.write(empty_day, t, "ns.strict")
    # Spark names null's directory so: the value came back as null (the core and the data source keep it)
    null_name = spark.createDataFrame([(1, "__HIVE_DEFAULT_PARTITION__")], "id long, day string")
    with pytest.raises(SchemaMismatchError, match="__HIVE_DEFAULT_PARTITION__"):
        txn_spark.write(null_name, t, "ns.strict")
    assert storage_files(tmp_path / "warehouse") == set()
    assert t.state == "active"
    txn_spark.write(spark.createDataFrame([(1, None)], "id long, day string"), t, "ns.strict")  # null partition
    t.commit()
    assert swh.read("ns.strict").to_pylist() == [{"id": 1, "day": None}]


def test_time_travel_and_the_transaction_s_own_view(spark: SparkSession, swh: Warehouse) -> None:
    make_tables(swh)
    with swh.begin() as t:
        txn_spark.write(events_df(spark, [1]), t, "sales.events")
    first = swh.readable_csn()
    with swh.begin() as t:
        txn_spark.write(events_df(spark, [2], day="2024-01-02"), t, "sales.events", mode="overwrite")
    t = swh.begin()
    txn_spark.write(events_df(spark, [3]), t, "sales.events")
    assert rows_of(txn_spark.read(spark, swh, "sales.events", csn=first).select("id")) == [(1,)]
    assert rows_of(txn_spark.read(spark, swh, "sales.events").select("id")) == [(2,)]
    assert rows_of(txn_spark.read(spark, swh, "sales.events", txn=t).select("id")) == [(2,), (3,)]
    only = txn_spark.read(spark, swh, "sales.events", txn=t, partitions=[{"day": "2024-01-01"}])
    assert rows_of(only.select("id")) == [(3,)]
    t.rollback()


def test_time_travel_checks_the_read_table_s_own_retention_horizon(spark: SparkSession, swh: Warehouse) -> None:
    """sales.events keeps its last 3 versions (set_retention); sales.accounts follows vacuum's rules."""
    make_tables(swh)
    csns = []
    for n in range(3):
        with swh.begin() as t:
            t.overwrite("sales.events", events([n]))
            t.overwrite("sales.accounts", accounts({n: 10 * n}))
        csns.append(swh.readable_csn())
    swh.set_retention("sales.events", versions=3)
    swh.vacuum(retention_seconds=0)
    assert rows_of(txn_spark.read(spark, swh, "sales.events", csn=csns[0]).select("id")) == [(0,)]
    with pytest.raises(SnapshotTooOldError, match=r"sales\.accounts") as too_old:
        txn_spark.read(spark, swh, "sales.accounts", csn=csns[0])
    assert f"horizon {csns[-1]}" in str(too_old.value)
    assert rows_of(txn_spark.read(spark, swh, "sales.accounts", csn=csns[-1])) == [(2, 20)]


def test_a_tag_reads_back_natively_and_through_the_data_source_after_vacuum(spark: SparkSession,
                                                                            swh: Warehouse) -> None:
    make_tables(swh)
    with swh.begin() as t:
        t.append("sales.events", events([1, 2]))
    swh.tag("month-end", tables=["sales.events"])
    with swh.begin() as t:
        t.overwrite("sales.events", events([3]))
    swh.vacuum(retention_seconds=0)  # the tag keeps its files
    tagged = txn_spark.read(spark, swh, "sales.events", tag="month-end", via="native")
    assert rows_of(tagged.select("id")) == [(1,), (2,)]
    txn_spark.register(spark)  # the data source's option, as via="datasource" passes it
    options = txn_spark.warehouse_options(swh)
    by_option = spark.read.format("airflow_txn").options(**options).option("tag", "month-end").load("sales.events")
    assert rows_of(by_option.select("id")) == [(1,), (2,)]
    with pytest.raises(TableNotInTagError):
        txn_spark.read(spark, swh, "sales.accounts", tag="month-end", via="native")
    with pytest.raises(TagNotFoundError):
        txn_spark.read(spark, swh, "sales.events", tag="nope", via="datasource")
    with pytest.raises(TxnError, match="not several"):
        txn_spark.read(spark, swh, "sales.events", csn=1, tag="month-end")


def test_filters_on_data_columns_reach_the_parquet_reader(spark: SparkSession, swh: Warehouse) -> None:
    make_tables(swh)
    with swh.begin() as t:
        txn_spark.write(events_df(spark, [1, 2, 3]), t, "sales.events")
    df = txn_spark.read(spark, swh, "sales.events").where("id > 1 AND day = '2024-01-01'")
    plan = df._jdf.queryExecution().executedPlan().toString()
    assert "PushedFilters: [IsNotNull(id), GreaterThan(id,1)]" in plan
    assert rows_of(df.select("id")) == [(2,), (3,)]


def test_a_read_of_many_parts_lists_its_files_without_a_spark_job(spark: SparkSession, swh: Warehouse) -> None:
    """Past 32 paths Spark lists files with a distributed job (1.4 s for 200 parts in B12): the parts' files are
    known and local, so building the DataFrame runs no job, and the session's setting is put back."""
    make_tables(swh)
    with swh.begin() as t:
        for day in range(1, 41):  # 40 parts: over Spark's threshold of 32 paths
            t.append("sales.events", events([day], day=f"2024-02-{day % 28 + 1:02d}"))
    threshold = "spark.sql.sources.parallelPartitionDiscovery.threshold"
    before = spark.conf.get(threshold)
    tracker = spark.sparkContext.statusTracker()
    spark.sparkContext.setJobGroup("build-the-frame", "building the frame only")
    try:
        df = txn_spark.read(spark, swh, "sales.events", via="native")
        assert tracker.getJobIdsForGroup("build-the-frame") == []
    finally:
        spark.sparkContext.setJobGroup("", "")
    assert spark.conf.get(threshold) == before
    assert df.count() == 40


def test_an_empty_dataframe_stages_nothing_but_overwrite_still_replaces(spark: SparkSession, swh: Warehouse,
                                                                        tmp_path: Path) -> None:
    make_tables(swh)
    with swh.begin() as t:
        t.append("sales.accounts", pa.table({"id": [1], "balance": [5]}, schema=ACCOUNTS))
    empty = frame(spark, ACCOUNTS, [])
    with swh.begin() as t:
        assert txn_spark.write(empty, t, "sales.accounts") == 0
        assert swh.transaction_info(t.tid)["parts"] == []
        assert txn_spark.write(empty, t, "sales.accounts", mode="overwrite") == 0
    assert swh.read("sales.accounts").num_rows == 0
    swh.vacuum(retention_seconds=0)
    assert storage_files(tmp_path / "warehouse") == set()


def _slowly(i: int) -> int:
    time.sleep(0.5)
    return i


def test_the_lease_is_renewed_while_the_spark_job_runs(spark: SparkSession, swh: Warehouse) -> None:
    from pyspark.sql import functions as F

    make_tables(swh)
    slow = spark.range(0, 8, numPartitions=1).select(F.udf(_slowly, "long", useArrow=False)(F.col("id")).alias("id"),
                                                      F.col("id").alias("balance"))
    t = swh.begin(lease_seconds=2)
    assert txn_spark.write(slow, t, "sales.accounts") == 8  # about 4 s: twice the lease
    t.commit()
    assert ids(swh.read("sales.accounts")) == list(range(8))


def test_spark_timestamps_outside_the_nanosecond_range_read_back_in_the_core(spark: SparkSession,
                                                                            swh: Warehouse) -> None:
    """Spark writes timestamps as INT96; the core must read them as microseconds, not nanoseconds
    (which overflow outside 1677-2262 and made wh.read fail)."""
    import datetime as dt

    swh.create_table("t.times", pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us", tz="UTC"))]))
    far = [dt.datetime(2500, 1, 1, 12, 0, tzinfo=dt.UTC), dt.datetime(1500, 6, 1, tzinfo=dt.UTC),
           dt.datetime(2024, 3, 1, 0, 0, 0, 123456, tzinfo=dt.UTC)]
    df = spark.createDataFrame([(i, ts) for i, ts in enumerate(far)], "id long, ts timestamp")
    with swh.begin() as t:
        assert txn_spark.write(df, t, "t.times") == 3
    got = swh.read("t.times").sort_by("id").column("ts").to_pylist()
    assert got == far


@pytest.mark.s3
def test_the_native_path_on_an_object_store_root_is_refused_naming_the_data_source(
        spark: SparkSession, s3_root: str, tmp_path: Path) -> None:
    """Spark's Hadoop filesystem here cannot reach an s3:// root (no hadoop-aws): asked for the native path,
    airflow_txn.spark refuses before anything is staged, the error naming the data source (what via="auto"
    takes there, tests/spark/test_datasource.py); the transaction stays usable."""
    with Warehouse.open(catalog=f"sqlite:///{tmp_path / 'c.db'}", root=s3_root) as wh:
        make_tables(wh)
        t = wh.begin()
        for call in (lambda: txn_spark.write(events_df(spark, [1]), t, "sales.events", via="native"),
                     lambda: txn_spark.read(spark, wh, "sales.events", via="native")):
            with pytest.raises(StorageError, match=r'object store.*via="datasource"'):
                call()
        assert wh.transaction_info(t.tid)["parts"] == []
        assert storage_files(s3_root) == set()
        t.append("sales.events", events([1]))
        t.commit()
        assert ids(wh.read("sales.events")) == [1]
