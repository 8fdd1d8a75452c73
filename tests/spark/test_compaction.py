"""Spark-executed compaction (issue 9): Spark writes the merged parts, every snapshot in history reads the
same rows (through the core and the Spark reader), a user transaction taking a source wins, bad input
changes nothing."""

from __future__ import annotations

import datetime as dt
import decimal
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pytest

import airflow_txn.spark as txn_spark
from airflow_txn import Warehouse
from airflow_txn.catalog import part_records, table_registry
from airflow_txn.catalog.part_records import PartRow
from airflow_txn.core.adapter import MergePlan, open_compaction
from airflow_txn.errors import SchemaMismatchError, SnapshotTooOldError, TableNotFoundError, TxnError
from airflow_txn.model.parts import WrittenPart
from airflow_txn.spark.compaction import output_files, spark_writer
from airflow_txn.storage.root import SIDECAR
from tests.helpers import EVENTS, ids, storage_files
from tests.spark.helpers import frame, rows_of

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

pytestmark = pytest.mark.spark

EVENTS_T = "sales.events"
DAYS = ("2024-01-01", "2024-01-02", "2024-01-03")


def _days_df(spark: SparkSession, n: int) -> DataFrame:
    """Append number `n`: ids 1000*d + 10*n + {0, 1} on each of the three days."""
    return frame(spark, EVENTS, [(1000 * d + 10 * n + k, day, float(n)) for d, day in enumerate(DAYS) for k in (0, 1)])


def _spark_backfill(spark: SparkSession, wh: Warehouse, appends: int = 4) -> None:
    """`appends` commits, each a Spark write of two rows per day: one part per day and commit."""
    wh.create_table(EVENTS_T, EVENTS, partition_by=["day"])
    for n in range(appends):
        with wh.begin() as t:
            txn_spark.write(_days_df(spark, n), t, EVENTS_T)


def _sorted(table: pa.Table) -> pa.Table:
    return table.sort_by([(name, "ascending") for name in table.column_names])


def _live(wh: Warehouse, table: str, partition: dict[str, str] | None = None) -> list[PartRow]:
    with wh.runtime.catalog.read() as conn:
        info = table_registry.get(conn, table)
        parts = part_records.visible_parts(conn, info.id, None, wh.readable_csn())
    return [p for p in parts if partition is None or p.partition == partition]


def _table_dir(wh: Warehouse, table: str) -> Path:
    with wh.runtime.catalog.read() as conn:
        return wh.runtime.storage.table_dir(table_registry.get(conn, table).directory)


def _history(spark: SparkSession, wh: Warehouse, table: str) -> dict[int, tuple[pa.Table, list[Any]]]:
    """The table at every readable CSN, through the core's reader and through Spark's."""
    out = {}
    for csn in range(1, wh.readable_csn() + 1):
        try:
            out[csn] = (_sorted(wh.read(table, csn=csn)), rows_of(txn_spark.read(spark, wh, table, csn=csn)))
        except SnapshotTooOldError:
            continue
    return out


def _assert_same_history(spark: SparkSession, wh: Warehouse, table: str,
                         before: dict[int, tuple[pa.Table, list[Any]]]) -> None:
    assert set(_history(spark, wh, table)) >= set(before)
    for csn, (core_rows, spark_rows) in before.items():
        assert _sorted(wh.read(table, csn=csn)) == core_rows, f"{table} at CSN {csn} changed (core reader)"
        assert rows_of(txn_spark.read(spark, wh, table, csn=csn)) == spark_rows, f"{table} at CSN {csn} changed (Spark)"


# -- merges and history ---------------------------------------------------------------------------------
def test_spark_merges_many_small_spark_parts_and_every_snapshot_reads_the_same(
        spark: SparkSession, wh: Warehouse, root: Path) -> None:
    _spark_backfill(spark, wh, appends=4)
    with wh.begin() as t:  # history with a removal: a rewritten part
        assert txn_spark.delete(spark, t, EVENTS_T, "id = 1") == 1
    before = _history(spark, wh, EVENTS_T)
    assert len(before) >= 5
    watermark, log_before = wh.readable_csn(), wh.commit_log(limit=1000)
    sources = {p.id for p in _live(wh, EVENTS_T)}

    result = txn_spark.compact(spark, wh, EVENTS_T)
    assert result["table"] == EVENTS_T
    assert (result["groups"], result["merged"], result["yielded"]) == (3, 3, 0)
    assert (result["parts_before"], result["parts_after"]) == (12, 3)
    assert result["bytes_after"] == sum(p.size_bytes for p in _live(wh, EVENTS_T))
    assert sorted(m["rows"] for m in result["merges"]) == [7, 8, 8]
    assert all(m["status"] == "merged" and m["sources"] == 4 for m in result["merges"])
    assert len(result["tids"]) == 3
    for day in DAYS:  # one Spark-written part per day, laid out like the core's write dirs
        (part,) = _live(wh, EVENTS_T, {"day": day})
        assert part.id not in sources and part.path.startswith(f"day={day}/p-")
        assert len(part.files) == 1 and part.files[0].startswith("part-") and part.files[0].endswith(".parquet")
        sidecar = json.loads((_table_dir(wh, EVENTS_T) / part.path / SIDECAR).read_text())
        assert sidecar["writer"] == "compaction" and sidecar["engine"] == "spark"
        assert sidecar["tid"] in result["tids"]

    assert wh.readable_csn() == watermark and wh.commit_log(limit=1000) == log_before, "merges allocate no CSN"
    _assert_same_history(spark, wh, EVENTS_T, before)
    wh.vacuum(retention_seconds=3600)  # inside the retention window: the sources stay readable
    _assert_same_history(spark, wh, EVENTS_T, before)
    wh.vacuum(retention_seconds=0)
    assert _sorted(wh.read(EVENTS_T)) == before[watermark][0]
    assert rows_of(txn_spark.read(spark, wh, EVENTS_T)) == before[watermark][1]
    parquet = [f for f in storage_files(root) if f.endswith(".parquet")]
    assert len(parquet) == 3, "after vacuum only the three merged files are left"
    recovered = wh.recover()
    assert recovered["missing_files"] == [] and recovered["orphan_dirs"] == 0


TYPED = pa.schema([
    ("id", pa.int64()), ("day", pa.date32()), ("small", pa.int8()), ("f32", pa.float32()), ("flag", pa.bool_()),
    ("name", pa.string()), ("blob", pa.binary()), ("at", pa.timestamp("us", tz="UTC")), ("local", pa.timestamp("us")),
    ("amount", pa.decimal128(12, 2)), ("tags", pa.list_(pa.string())),
    ("attrs", pa.struct([("a", pa.int32()), ("b", pa.string())])), ("props", pa.map_(pa.string(), pa.int64())),
    ("born", pa.date32()),
])


def _typed_rows(start: int, day: dt.date) -> pa.Table:
    n = 3
    return pa.table({
        "id": [start + i for i in range(n)], "day": [day] * n, "small": [-5, None, 7], "f32": [1.5, None, -0.25],
        "flag": [True, False, None], "name": ["é", None, "x" * 50], "blob": [b"\x00\xff", None, b""],
        "at": [dt.datetime(2024, 3, 1, 12, 0, 0, 123456, tzinfo=dt.UTC), dt.datetime(1500, 3, 1, 1, tzinfo=dt.UTC),
               dt.datetime(2500, 1, 1, tzinfo=dt.UTC)],  # outside INT96's nanosecond range, before 1582
        "local": [dt.datetime(1900, 1, 1, 0, 0, 1), dt.datetime(2024, 6, 1, 23, 59, 59, 999999), None],
        "amount": [decimal.Decimal("12.34"), None, decimal.Decimal("-9999999999.99")],
        "tags": [["a", "b"], [], None], "attrs": [{"a": 1, "b": "x"}, None, {"a": None, "b": None}],
        "props": [[("k", 1)], None, []], "born": [dt.date(1, 1, 1), dt.date(1500, 2, 28), None],
    }, schema=TYPED)


def test_core_written_parts_of_every_type_survive_a_spark_merge(spark: SparkSession, swh: Warehouse) -> None:
    swh.create_table("sales.typed", TYPED, partition_by=["day"])
    days = (dt.date(2024, 1, 1), dt.date(2024, 1, 2))
    for n in range(3):
        with swh.begin() as t:
            for d, day in enumerate(days):
                t.append("sales.typed", _typed_rows(100 * d + 10 * n, day))
    before = swh.read("sales.typed").sort_by("id")
    spark_before = rows_of(txn_spark.read(spark, swh, "sales.typed"))
    result = txn_spark.compact(spark, swh, "sales.typed")
    assert (result["merged"], result["parts_before"], result["parts_after"]) == (2, 6, 2)
    after = swh.read("sales.typed").sort_by("id")
    assert after.schema == TYPED and after == before
    assert rows_of(txn_spark.read(spark, swh, "sales.typed")) == spark_before


def test_only_the_listed_partitions_and_progress(spark: SparkSession, swh: Warehouse) -> None:
    _spark_backfill(spark, swh, appends=3)
    seen: list[tuple[str, int, int]] = []
    result = txn_spark.compact(spark, swh, EVENTS_T, partitions=[{"day": DAYS[1]}],
                               progress=lambda stage, done, total: seen.append((stage, done, total)))
    assert (result["merged"], result["parts_before"], result["parts_after"]) == (1, 3, 1)
    assert [len(_live(swh, EVENTS_T, {"day": d})) for d in DAYS] == [3, 1, 3]
    assert seen == [("merge", 0, 1), ("merge", 1, 1)]
    assert txn_spark.compact(spark, swh, EVENTS_T, min_parts=4)["groups"] == 0
    assert len(swh.read(EVENTS_T)) == 18


def test_output_files_follow_the_target_size() -> None:
    assert output_files(10, 128) == 1
    assert output_files(128, 128) == 1
    assert output_files(129, 128) == 2
    assert output_files(0, 128) == 1


# -- yielding ---------------------------------------------------------------------------------------------
def test_a_user_transaction_taking_a_source_while_spark_writes_wins(spark: SparkSession, swh: Warehouse) -> None:
    """The merge of day 0 has its files written by Spark when the user's Spark delete locks one of its
    sources: the swap finds the source taken, the merge yields and deletes its files."""
    _spark_backfill(spark, swh, appends=4)
    user = swh.begin(label="user")
    inner = spark_writer(spark)

    def writer(task: MergePlan) -> WrittenPart:
        written = inner(task)
        assert swh.runtime.storage.missing_files(task.table.directory, written.path, written.files) == []
        if task.partition == {"day": DAYS[0]}:
            assert txn_spark.delete(spark, user, EVENTS_T, "id = 10") == 1
        return written

    result = open_compaction(swh, EVENTS_T).run(writer)
    assert (result["merged"], result["yielded"]) == (2, 1)
    (yielded,) = [m for m in result["merges"] if m["status"] == "yielded"]
    assert yielded["partition"] == {"day": DAYS[0]} and "locked" in yielded["reason"]
    assert swh.transaction_info(yielded["tid"])["state"] == "rolled_back"
    assert swh.recover()["orphan_dirs"] == 0, "the yielding merge deleted the files Spark wrote"

    csn = user.commit()  # the user never noticed
    assert 10 not in ids(swh.read(EVENTS_T, csn=csn)) and len(swh.read(EVENTS_T)) == 23
    assert len(_live(swh, EVENTS_T, {"day": DAYS[0]})) == 4  # 3 untouched sources + the user's rewrite
    again = txn_spark.compact(spark, swh, EVENTS_T)
    assert again["merged"] == 1 and len(_live(swh, EVENTS_T, {"day": DAYS[0]})) == 1
    assert len(swh.read(EVENTS_T)) == 23


def test_a_source_locked_before_the_merge_writes_yields_without_a_spark_job(spark: SparkSession,
                                                                          swh: Warehouse) -> None:
    _spark_backfill(spark, swh, appends=2)
    user = swh.begin(label="user")
    assert txn_spark.delete(spark, user, EVENTS_T, "id = 1") == 1  # locks a day-0 source
    calls: list[str] = []
    inner = spark_writer(spark)

    def writer(task: MergePlan) -> WrittenPart:
        calls.append(task.partition_key)
        return inner(task)

    # the planner skips the locked part: day 0 has one free part left, not a group
    result = open_compaction(swh, EVENTS_T).run(writer)
    assert (result["groups"], result["merged"]) == (2, 2) and len(calls) == 2
    user.rollback()
    assert len(swh.read(EVENTS_T)) == 12


# -- bad input ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("kwargs", "error", "message"), [
    ({"table": "sales.nope"}, TableNotFoundError, "does not exist"),
    ({"target_file_bytes": 0}, TxnError, "target_file_bytes"),
    ({"min_parts": 1}, TxnError, "min_parts"),
    ({"partitions": [{"day": "2099-12-31"}]}, TxnError, "no visible parts"),
    ({"table": "sales.nanos"}, SchemaMismatchError, "'at' of sales.nanos is timestamp[ns]"),
    ({"table": "sales.unsigned"}, SchemaMismatchError, "wh.compact"),
])
def test_bad_input_is_refused_and_changes_nothing(spark: SparkSession, swh: Warehouse, tmp_path: Path,
                                                  kwargs: dict[str, Any], error: type[Exception],
                                                  message: str) -> None:
    _spark_backfill(spark, swh, appends=2)
    for name, column in (("sales.nanos", pa.timestamp("ns")), ("sales.unsigned", pa.uint32())):
        swh.create_table(name, pa.schema([("id", pa.int64()), ("at", column)]))
        for _ in range(2):
            with swh.begin() as t:
                t.append(name, pa.table({"id": [1], "at": pa.array([0], column)}))
    parts, files = {p.id for p in _live(swh, EVENTS_T)}, storage_files(tmp_path / "warehouse")
    watermark = swh.readable_csn()
    transactions = len(swh.transactions(limit=1000))
    with pytest.raises(error, match=message.replace("[", r"\[").replace("]", r"\]")):
        txn_spark.compact(spark, swh, **{"table": EVENTS_T, **kwargs})
    assert {p.id for p in _live(swh, EVENTS_T)} == parts and storage_files(tmp_path / "warehouse") == files
    assert swh.readable_csn() == watermark and len(swh.transactions(limit=1000)) == transactions
