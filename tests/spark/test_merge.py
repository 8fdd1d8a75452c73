"""airflow_txn.spark.merge (issue 32, item 4): a DataFrame merged into a table by Spark, on a local session and
through Spark Connect (`any_spark`), through both write paths: the source never collected to the driver, only the
parts holding a matched key rewritten. tests/conformance/test_merge.py checks every clause on every path."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import airflow_txn.spark as txn_spark
from airflow_txn import Warehouse
from airflow_txn.errors import InvalidArgumentError, SchemaMismatchError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark
DIM = pa.schema([pa.field("id", pa.int64(), nullable=False), ("day", pa.string()), ("qty", pa.uint32())])


def test_a_dataframe_is_merged_and_bad_sources_are_refused_before_anything_is_staged(any_spark: SparkSession,
                                                                                      swh: Warehouse) -> None:
    swh.create_table("s.dim", DIM, partition_by=["day"])
    with swh.begin() as t:
        t.append("s.dim", pa.Table.from_pylist([{"id": 1, "day": "a", "qty": 1}, {"id": 2, "day": "b", "qty": 2}],
                                               DIM))
    source = any_spark.createDataFrame([(2, "b", 20), (3, "c", 2**32 - 1)], "id long, day string, qty long")
    t = swh.begin()
    assert txn_spark.merge(source, t, "s.dim", on=["id", "day"]) == {"updated": 1, "inserted": 1, "deleted": 0}
    too_big = any_spark.createDataFrame([(4, "d", 2**32)], "id long, day string, qty long")  # uint32 holds less
    with pytest.raises(SchemaMismatchError, match="does not fit"):
        txn_spark.merge(too_big, t, "s.dim", on=["id", "day"])
    wrong = any_spark.createDataFrame([(4, "d", "x")], "id long, day string, qty string")
    with pytest.raises(SchemaMismatchError, match="'qty' is string"):
        txn_spark.merge(wrong, t, "s.dim", on=["id", "day"])
    gone = any_spark.createDataFrame([(1, "a")], "id long, day string")  # keys only: a delete
    assert txn_spark.merge(gone, t, "s.dim", on=["id", "day"], when_matched="delete",
                           when_not_matched="ignore")["deleted"] == 1
    t.commit()
    got = sorted((r["id"], r["day"], r["qty"]) for r in swh.read("s.dim").to_pylist())
    assert got == [(2, "b", 20), (3, "c", 2**32 - 1)]


FACT = pa.schema([pa.field("id", pa.int64(), nullable=False), ("day", pa.string()), ("qty", pa.int64())])
DAYS = ("d0", "d1", "d2", "d3")
PER_PART = 50


def _driver_rows(monkeypatch: pytest.MonkeyPatch, cls: type) -> list[tuple[str, int]]:
    """Every collect/toArrow/toPandas/take of a DataFrame of class `cls` from now on: (method, rows it brought to
    the driver)."""
    seen: list[tuple[str, int]] = []

    def counting(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            result = original(self, *args, **kwargs)
            seen.append((name, len(result)))
            return result
        return method

    for name in ("collect", "toArrow", "toPandas", "take", "tail"):
        monkeypatch.setattr(cls, name, counting(name, getattr(cls, name)))
    return seen


@pytest.mark.parametrize("via", ["native", "datasource"])
def test_the_source_stays_in_spark_and_only_the_parts_holding_a_matched_key_are_rewritten(
        spark: SparkSession, swh: Warehouse, monkeypatch: pytest.MonkeyPatch, via: str) -> None:
    """fact: 4 days x 3 parts of PER_PART rows. The source (1,000 rows, built by Spark, never on the driver)
    updates 5 rows of ONE part of d0 and inserts 995 rows into d1: the driver sees a few rows (the source's 2
    distinct days, one count per candidate part, the checks' summary); the statement removes exactly that part
    (the other parts of d0 and d1 are read, not rewritten; d2 and d3 are not even candidates)."""
    swh.create_table("s.fact", FACT, partition_by=["day"])
    for n in range(3):
        with swh.begin() as t:
            t.append("s.fact", pa.Table.from_pylist([{"id": 1000 * n + 100 * d + i, "day": day, "qty": 0}
                                                     for d, day in enumerate(DAYS) for i in range(PER_PART)], FACT))
    from pyspark.sql import functions as F

    ids = spark.range(1000)
    source = ids.select(
        F.when(F.col("id") < 5, F.col("id") + 1000).otherwise(F.col("id") + 100_000).alias("id"),  # 5 of part 2
        F.when(F.col("id") < 5, F.lit("d0")).otherwise(F.lit("d1")).alias("day"),
        F.lit(7).cast("long").alias("qty"))
    t = swh.begin()
    seen = _driver_rows(monkeypatch, type(source))
    counts = txn_spark.merge(source, t, "s.fact", on=["id", "day"], via=via)
    assert counts == {"updated": 5, "inserted": 995, "deleted": 0}
    assert sum(rows for _, rows in seen) <= 2 * len(DAYS) * 3 + 4, seen  # never the source's 1,000 rows
    assert all(name != "toPandas" for name, _ in seen)
    removed = [p for p in swh.transaction_info(t.tid)["parts"] if p["role"] == "removed"]
    assert [(p["partition"], p["rows"]) for p in removed] == [({"day": "d0"}, PER_PART)]
    t.commit()
    got = swh.read("s.fact")
    assert got.num_rows == 3 * len(DAYS) * PER_PART + 995
    assert sorted(got.filter(pc.equal(got["qty"], 7))["id"].to_pylist())[:5] == [1000, 1001, 1002, 1003, 1004]


def test_spark_columns_and_sql_set_matched_rows_and_arrow_expressions_still_merge(spark: SparkSession,
                                                                                  swh: Warehouse) -> None:
    """when_matched's values as Spark Columns (F.expr for SQL) over the target's columns and `source.x`; a bad one
    refused before anything runs; the core's pyarrow Expressions still merge (the source collected, the core's
    MERGE: the one form Spark cannot run); mixing the two forms is refused."""
    from pyspark.sql import functions as F

    swh.create_table("s.dim", DIM, partition_by=["day"])
    with swh.begin() as t:
        t.append("s.dim", pa.Table.from_pylist([{"id": 1, "day": "a", "qty": 1}, {"id": 2, "day": "b", "qty": 2}],
                                               DIM))
    source = spark.createDataFrame([(1, "a", 10), (2, "b", 20)], "id long, day string, qty long")
    t = swh.begin()
    with pytest.raises(SchemaMismatchError, match="cannot be evaluated"):
        txn_spark.merge(source, t, "s.dim", on=["id", "day"], when_matched={"qty": F.col("source.nope")})
    with pytest.raises(InvalidArgumentError, match="mixes"):
        txn_spark.merge(source, t, "s.dim", on=["id", "day"],
                        when_matched={"qty": pc.field("qty"), "day": F.col("day")})
    assert txn_spark.merge(source.where("id = 1"), t, "s.dim", on=["id", "day"],
                           when_matched={"qty": F.expr("qty + source.qty")})["updated"] == 1
    assert txn_spark.merge(source.where("id = 2"), t, "s.dim", on=["id", "day"],
                           when_matched={"qty": pc.field("qty") * 3})["updated"] == 1
    assert t.state == "active"
    t.commit()
    assert sorted((r["id"], r["qty"]) for r in swh.read("s.dim").to_pylist()) == [(1, 11), (2, 6)]


def test_a_compaction_of_a_chosen_part_mid_merge_makes_it_run_again(spark: SparkSession, swh: Warehouse,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The merge chooses its parts (day 1's part holding id 3, day 2's part) and runs its jobs; a compaction then
    merges day 1's two parts before it registers: it runs again on the merged part (MergedAwayError inside), and
    the transaction commits what it would have without the compaction."""
    from airflow_txn.core import staging
    from tests.helpers import events, make_tables
    from tests.spark.helpers import events_df

    make_tables(swh)
    with swh.begin() as t:
        t.append("sales.events", events([1, 2]))
        t.append("sales.events", events([3]))
        t.append("sales.events", events([4, 5], day="2024-01-02", value=2.0))
    original = staging.register_written
    chosen: list[list[int]] = []
    compactions: list[dict[str, Any]] = []

    def interleaved(*args: Any, **kwargs: Any) -> None:
        chosen.append(sorted(args[4]))
        if not compactions:
            compactions.append(swh.compact("sales.events"))
        original(*args, **kwargs)

    monkeypatch.setattr(staging, "register_written", interleaved)
    source = events_df(spark, [3], value=9.0).unionByName(events_df(spark, [4], day="2024-01-02", value=9.0))
    with swh.begin() as t:
        assert txn_spark.merge(source, t, "sales.events", on=["id", "day"], when_not_matched="ignore",
                               via="native") == {"updated": 2, "inserted": 0, "deleted": 0}
    assert compactions[0]["merged"] == 1 and len(chosen) == 2
    assert compactions[0]["merges"][0]["part"] in chosen[1]
    got = sorted((r["id"], r["value"]) for r in swh.read("sales.events").to_pylist())
    assert got == [(1, 1.0), (2, 1.0), (3, 9.0), (4, 9.0), (5, 2.0)]
    assert swh.recover()["orphan_dirs"] == 0  # the first run's write dir was deleted
