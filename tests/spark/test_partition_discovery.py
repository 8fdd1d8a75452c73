"""The native read gets partition columns from Spark's own partition discovery when every value of the parts read
comes back exactly from its directory name (a filter on a partition column then prunes files), and joins them
on from the catalog otherwise; either way the rows are what the core reads."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pytest

import airflow_txn.spark as txn_spark
from airflow_txn import Warehouse
from airflow_txn.core.adapter import plan_read
from airflow_txn.spark.frames import parts_frame
from airflow_txn.spark.types import PART_ID
from tests.helpers import EVENTS, make_tables
from tests.spark.helpers import frame, rows_of

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

pytestmark = pytest.mark.spark

UTC = dt.UTC
IST = dt.timezone(dt.timedelta(hours=5, minutes=30))
TYPED = pa.schema([("s", pa.string()), ("k", pa.int8()), ("n", pa.int32()), ("l", pa.int64()), ("d", pa.date32()),
                   ("b", pa.bool_()), ("ts", pa.timestamp("us", tz="UTC")), ("ist", pa.timestamp("us", tz="+05:30")),
                   ("local", pa.timestamp("us")), ("v", pa.int64())])
PARTITION_BY = TYPED.names[:-1]
STAMP = dt.datetime(2024, 3, 1, 10, 0, 0, 500000, tzinfo=UTC)
GOOD = [  # every value ASCII, none null, empty or long: its directory name reads back as this value
    ("x y", -128, -2147483648, -(2**63), dt.date(2024, 2, 29), True, STAMP, STAMP, dt.datetime(2024, 10, 27, 2, 30), 0),
    ("100%", 127, 2147483647, 2**63 - 1, dt.date(1, 1, 1), False, STAMP.replace(microsecond=0),
     dt.datetime(2024, 1, 1, tzinfo=IST), dt.datetime(1970, 1, 1), 1),
    ("a=b/c", 0, 0, 0, dt.date(9999, 12, 31), True, dt.datetime(1970, 1, 1, tzinfo=UTC), STAMP,
     dt.datetime(2024, 2, 29, 23, 59, 59, 999999), 2),
    ("+:*?{}[]^\"#'\\ %41 ..", 1, -1, 7, dt.date(2024, 2, 29), False, STAMP, STAMP, dt.datetime(2024, 1, 1), 3),
    ("__null__", 2, 2, 2, dt.date(2024, 1, 2), True, STAMP, STAMP, dt.datetime(2024, 1, 1), 4),
    ("q" * 32, 3, 3, 3, dt.date(2024, 1, 2), True, STAMP, STAMP, dt.datetime(2024, 1, 1), 5),
]
BAD = {  # one value each that Spark's discovery would not give back: the read joins them on instead
    "non-ASCII": ("é 日本", 0, 0, 0, dt.date(2024, 1, 2), True, STAMP, STAMP, dt.datetime(2024, 1, 1), 10),
    "null string": (None, 0, 0, 0, dt.date(2024, 1, 2), True, STAMP, STAMP, dt.datetime(2024, 1, 1), 11),
    "empty string": ("", 0, 0, 0, dt.date(2024, 1, 2), True, STAMP, STAMP, dt.datetime(2024, 1, 1), 12),
    "hashed long string": ("q" * 150, 0, 0, 0, dt.date(2024, 1, 2), True, STAMP, STAMP, dt.datetime(2024, 1, 1), 13),
    "Spark's null name": ("__HIVE_DEFAULT_PARTITION__", 0, 0, 0, dt.date(2024, 1, 2), True, STAMP, STAMP,
                          dt.datetime(2024, 1, 1), 14),
    "null integer": ("x", 0, None, 0, dt.date(2024, 1, 2), True, STAMP, STAMP, dt.datetime(2024, 1, 1), 15),
    "null date": ("x", 0, 0, 0, None, True, STAMP, STAMP, dt.datetime(2024, 1, 1), 16),
    "null boolean": ("x", 0, 0, 0, dt.date(2024, 1, 2), None, STAMP, STAMP, dt.datetime(2024, 1, 1), 17),
    "null timestamp": ("x", 0, 0, 0, dt.date(2024, 1, 2), True, STAMP, None, dt.datetime(2024, 1, 1), 18),
}


def _partition(row: tuple[Any, ...]) -> dict[str, Any]:
    return dict(zip(PARTITION_BY, row[:-1], strict=True))


def _naive_utc(value: Any) -> Any:
    """A value as collect() gives it: an aware timestamp as naive UTC (the tests' session time zone)."""
    return value.astimezone(UTC).replace(tzinfo=None) if isinstance(value, dt.datetime) and value.tzinfo else value


def _core_rows(wh: Warehouse, table: str, keep: set[int]) -> list[tuple[Any, ...]]:
    """What the core reads of `table`, the rows whose last column is in `keep`, as collect() gives them."""
    rows = [tuple(_naive_utc(v) for v in r.values()) for r in wh.read(table).to_pylist()]
    return sorted((r for r in rows if r[-1] in keep), key=repr)


def _plan(df: DataFrame) -> str:
    return str(df._jdf.queryExecution().executedPlan().toString())


def _joins(df: DataFrame) -> bool:
    """Whether the partition values (or part ids) are joined on by file, rather than given by Spark's discovery."""
    plan = _plan(df)
    return "BroadcastHashJoin" in plan or "_metadata" in plan


def _files_read(df: DataFrame) -> tuple[list[tuple[Any, ...]], int]:
    """The rows of `df` and how many files its scan read (Spark's `numFiles` metric, after partition pruning)."""
    rows = rows_of(df)  # collect() runs the DataFrame's own executed plan, whose metrics are read below
    scans = [n for n in _nodes(df._jdf.queryExecution().executedPlan()) if n.metrics().contains("numFiles")]
    return rows, sum(int(s.metrics().get("numFiles").get().value()) for s in scans)


def _nodes(plan: Any) -> list[Any]:
    """Every node of a physical plan, into adaptive plans (a join's) and their query stages."""
    found = [plan]
    name = plan.nodeName()
    if name == "AdaptiveSparkPlan":
        return found + _nodes(plan.executedPlan())
    if name.endswith("QueryStage"):
        return found + _nodes(plan.plan())
    children = plan.children()
    for i in range(children.size()):
        found += _nodes(children.apply(i))
    return found


def test_every_partition_type_reads_back_as_the_core_reads_it_by_discovery_or_by_the_join(
        spark: SparkSession, swh: Warehouse) -> None:
    swh.create_table("ns.typed", TYPED, partition_by=PARTITION_BY)
    rows = [*GOOD, *BAD.values()]
    with swh.begin() as t:
        t.append("ns.typed", pa.Table.from_pylist([dict(zip(TYPED.names, r, strict=True)) for r in rows], TYPED))
    good = {r[-1] for r in GOOD}
    discovered = txn_spark.read(spark, swh, "ns.typed", partitions=[_partition(r) for r in GOOD], via="native")
    assert not _joins(discovered)
    assert rows_of(discovered) == _core_rows(swh, "ns.typed", good)
    leap_day = discovered.where("d = DATE'2024-02-29' AND b")
    assert "PartitionFilters: [isnotnull(d" in _plan(leap_day)
    assert _files_read(leap_day) == (_core_rows(swh, "ns.typed", {0}), 1)  # one part of the six: one file read
    for why, bad in BAD.items():  # a value that would not come back exactly: its part is joined, the others pruned
        df = txn_spark.read(spark, swh, "ns.typed", partitions=[_partition(r) for r in [*GOOD, bad]], via="native")
        assert _joins(df), why
        assert "PartitionFilters: [isnotnull(d" in _plan(df.where("d = DATE'2024-02-29' AND b")), why
    everything = txn_spark.read(spark, swh, "ns.typed", via="native")
    assert _joins(everything)
    assert rows_of(everything) == _core_rows(swh, "ns.typed", {r[-1] for r in rows})


def test_a_value_discovery_cannot_give_back_costs_only_its_own_part_its_pruning(spark: SparkSession,
                                                                                swh: Warehouse) -> None:
    """Issue 31, item 5: one such value (`café`, a null, a long value, a Spark write's timestamp) sent the WHOLE read
    to the join, which reads every file (a filtered count over 201 partitions: 3.4 s -> 6.5 s). The parts whose
    values discovery gives back are now one scan that partition filters prune; the others a joined scan of their
    own files."""
    swh.create_table("ns.typed", TYPED, partition_by=PARTITION_BY)
    rows = [*GOOD, BAD["non-ASCII"], BAD["null string"]]
    with swh.begin() as t:
        t.append("ns.typed", pa.Table.from_pylist([dict(zip(TYPED.names, r, strict=True)) for r in rows], TYPED))
    df = txn_spark.read(spark, swh, "ns.typed", via="native")
    assert rows_of(df) == _core_rows(swh, "ns.typed", {r[-1] for r in rows})
    leap_day = df.where("d = DATE'2024-02-29' AND b")
    assert "PartitionFilters: [isnotnull(d" in _plan(leap_day)
    # one file of the six discovered parts (pruned), and the two joined parts' files (read, then filtered)
    assert _files_read(leap_day) == (_core_rows(swh, "ns.typed", {0}), 1 + 2)
    with_ids = parts_frame(spark, plan_read(swh, "ns.typed").table, plan_read(swh, "ns.typed").parts, with_part_id=True)
    assert sorted(r[PART_ID] for r in with_ids.select(PART_ID).collect()) == sorted(
        p.id for p in plan_read(swh, "ns.typed").parts)


def test_spark_and_core_parts_in_several_write_dirs_are_read_by_discovery_and_pruned(
        spark: SparkSession, swh: Warehouse) -> None:
    make_tables(swh)
    days = ["2024-01-01", "2024-01-02", "a b%=", "日本"]  # Spark writes non-ASCII raw in its own directories
    for batch in range(2):  # two Spark writes: two write dirs, each with its own partition directories
        with swh.begin() as t:
            txn_spark.write(frame(spark, EVENTS, [(10 * batch + i, day, float(i)) for i, day in enumerate(days)]), t,
                            "sales.events", via="native")
    with swh.begin() as t:
        t.append("sales.events", pa.table({"id": [100, 101], "day": ["2024-01-02", "a b%="], "value": [1.0, 2.0]},
                                          schema=EVENTS))
    df = txn_spark.read(spark, swh, "sales.events", via="native")
    assert not _joins(df)
    expected = sorted((tuple(r.values()) for r in swh.read("sales.events").to_pylist()), key=repr)
    assert rows_of(df) == expected
    for day in ["2024-01-02", "a b%=", "日本"]:
        one_day = df.where(df.day == day)
        assert "PartitionFilters: [isnotnull(day" in _plan(one_day)
        files = sum(len(p.files) for p in plan_read(swh, "sales.events").parts if p.partition["day"] == day)
        assert _files_read(one_day) == ([r for r in expected if r[1] == day], files)
    # copy-on-write's read: each row with its part's id, joined on by file; partition filters still prune
    plan = plan_read(swh, "sales.events")
    with_ids = parts_frame(spark, plan.table, plan.parts, with_part_id=True)
    counts = {r[PART_ID]: r["count"] for r in with_ids.groupBy(PART_ID).count().collect()}
    assert counts == {p.id: p.row_count for p in plan.parts}
    assert "PartitionFilters: [isnotnull(day" in _plan(with_ids.where("day = '2024-01-02'"))
