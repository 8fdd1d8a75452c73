"""Issue 32, item 5: MERGE gives the core's answer on every engine path x root (paths.py: `EnginePath.merge`, the
core's Transaction.merge or airflow_txn.spark.merge of a DataFrame): every clause, keyed retries (a retried merge
replaces its earlier attempt; a keyed reader of the merged table is withdrawn as for an update), a source holding
a key twice refused with the same typed error before anything is staged, and the per-part conflicts (two merges
rewriting one part: first committer wins; a merge that inserts against a commit into a partition it scanned:
SerializationError at commit, on every isolation level).

Each case is one history written once, its expected values literal: the core path checks them as every other
path does. A path listed in paths.py runs every case. airflow_txn.spark.merge is executed by Spark through the
path's write path (Spark's Parquet writer, the data source, the data source through Spark Connect); a
when_matched expression is written in the path's own language (SPARK_SETTERS: Spark Columns for the core's
pyarrow Expressions).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from airflow_txn import Warehouse
from airflow_txn.errors import InvalidArgumentError, InvalidatedKeysError, SchemaMismatchError, SerializationError
from tests.conformance.paths import EnginePath
from tests.helpers import events, ids

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DIM = pa.schema([pa.field("id", pa.int64(), nullable=False), ("day", pa.string()), ("qty", pa.int64()),
                 ("note", pa.string())])
TABLE = "m.dim"
START = [(1, "a", 1, "one"), (2, "a", 2, "two"), (3, "b", 3, "three"), (5, "c", 5, "five")]
Row = tuple[int, str, int | None, str | None]


def dim(items: Sequence[tuple[Any, ...]], names: Sequence[str] = ("id", "day", "qty", "note")) -> pa.Table:
    """Rows of m.dim (or of the named columns only: a source of keys and the columns it sets)."""
    schema = pa.schema([DIM.field(n) for n in names])
    return pa.Table.from_pylist([dict(zip(names, item, strict=True)) for item in items], schema)


def content(table: pa.Table) -> list[Row]:
    """The rows sorted, a null before any value."""
    return sorted(((r["id"], r["day"], r["qty"], r["note"]) for r in table.to_pylist()),
                  key=lambda r: tuple((v is not None, v) for v in r))


@pytest.fixture
def loaded(cwh: Warehouse) -> int:
    """m.dim partitioned by day, one part per day, loaded by the core; its CSN."""
    cwh.create_table(TABLE, DIM, partition_by=["day"])
    with cwh.begin() as t:
        t.append(TABLE, dim(START))
    return cwh.readable_csn()


GUARDED = {"qty": pc.if_else(pc.field("source", "qty") > pc.field("qty"), pc.field("source", "qty"), pc.field("qty")),
           "note": pc.if_else(pc.field("source", "qty") > pc.field("qty"), pc.field("source", "note"),
                              pc.field("note"))}
"""An expression-guarded update: take the source row only where its qty is greater."""
CASES: list[tuple[str, pa.Table, dict[str, Any], dict[str, int], list[Row]]] = [
    ("update all, insert", dim([(2, "a", 20, "TWO"), (4, "c", 40, "four")]), {},
     {"updated": 1, "inserted": 1, "deleted": 0},
     [(1, "a", 1, "one"), (2, "a", 20, "TWO"), (3, "b", 3, "three"), (4, "c", 40, "four"), (5, "c", 5, "five")]),
    ("update selected columns, ignore not matched", dim([(1, "a", 10), (9, "a", 90)], ("id", "day", "qty")),
     {"when_matched": {"qty": pc.field("source", "qty")}, "when_not_matched": "ignore"},
     {"updated": 1, "inserted": 0, "deleted": 0},
     [(1, "a", 10, "one"), (2, "a", 2, "two"), (3, "b", 3, "three"), (5, "c", 5, "five")]),
    ("expression-guarded update, insert", dim([(1, "a", 0, "x"), (3, "b", 30, "THREE"), (6, "b", 6, "six")]),
     {"when_matched": GUARDED}, {"updated": 2, "inserted": 1, "deleted": 0},
     [(1, "a", 1, "one"), (2, "a", 2, "two"), (3, "b", 30, "THREE"), (5, "c", 5, "five"), (6, "b", 6, "six")]),
    ("set a constant and an expression", dim([(5, "c", 1)], ("id", "day", "qty")),
     {"when_matched": {"qty": pc.field("qty") + pc.field("source", "qty"), "note": "bumped"},
      "when_not_matched": "ignore"},
     {"updated": 1, "inserted": 0, "deleted": 0},
     [(1, "a", 1, "one"), (2, "a", 2, "two"), (3, "b", 3, "three"), (5, "c", 6, "bumped")]),
    ("delete matched, ignore not matched", dim([(2, "a"), (3, "b"), (7, "b")], ("id", "day")),
     {"when_matched": "delete", "when_not_matched": "ignore"}, {"updated": 0, "inserted": 0, "deleted": 2},
     [(1, "a", 1, "one"), (5, "c", 5, "five")]),
    ("ignore matched, insert not matched", dim([(1, "a", 100, "x"), (8, "d", 8, "eight")]),
     {"when_matched": "ignore"}, {"updated": 0, "inserted": 1, "deleted": 0},
     [(1, "a", 1, "one"), (2, "a", 2, "two"), (3, "b", 3, "three"), (5, "c", 5, "five"), (8, "d", 8, "eight")]),
    ("delete not matched by source", dim([(1, "a", 11, "ONE"), (3, "b", 3, "three"), (4, "c", None, None)]),
     {"when_not_matched_by_source": "delete"}, {"updated": 2, "inserted": 1, "deleted": 2},
     [(1, "a", 11, "ONE"), (3, "b", 3, "three"), (4, "c", None, None)]),
    ("an empty source deletes every row by source", dim([]), {"when_not_matched_by_source": "delete"},
     {"updated": 0, "inserted": 0, "deleted": 4}, []),
    ("a null key never matches", dim([(1, None, 10, "null day")]), {}, {"updated": 0, "inserted": 1, "deleted": 0},
     [(1, None, 10, "null day"), (1, "a", 1, "one"), (2, "a", 2, "two"), (3, "b", 3, "three"), (5, "c", 5, "five")]),
]

SPARK_SETTERS: dict[str, Callable[[Any], dict[str, Any]]] = {
    "update selected columns, ignore not matched": lambda F: {"qty": F.col("source.qty")},
    "expression-guarded update, insert": lambda F: {
        "qty": F.when(F.col("source.qty") > F.col("qty"), F.col("source.qty")).otherwise(F.col("qty")),
        "note": F.expr("CASE WHEN source.qty > qty THEN source.note ELSE note END")},
    "set a constant and an expression": lambda F: {"qty": F.col("qty") + F.col("source.qty"), "note": "bumped"},
}
"""The cases' when_matched expressions as a Spark user writes them (F: pyspark.sql.functions, made in the path's
mode: Connect columns on a Connect path), a Column's target columns by name and the source row's as `source.x`."""


@pytest.mark.parametrize("case", range(len(CASES)), ids=[c[0].replace(" ", "-").replace(",", "") for c in CASES])
def test_every_merge_clause_gives_the_cores_answer(case: int, engine_path: EnginePath, cwh: Warehouse,
                                                   engine_session: SparkSession | None, loaded: int) -> None:
    """One merge per clause through the path: its counts, the transaction's own view, the committed table (read
    through the path and by the core), and the snapshot before it by CSN (time travel)."""
    name, source, clauses, counts, expected = CASES[case]
    if engine_session is not None and name in SPARK_SETTERS:
        from pyspark.sql import functions as F

        clauses = {**clauses, "when_matched": SPARK_SETTERS[name](F)}
    t = cwh.begin()
    assert engine_path.merge(engine_session, t, TABLE, source, ["id", "day"], **clauses) == counts
    assert content(t.read(TABLE)) == expected
    csn = t.commit()
    assert content(cwh.read(TABLE)) == expected
    assert content(engine_path.read(engine_session, cwh, TABLE)) == expected
    assert content(cwh.read(TABLE, csn=loaded)) == sorted(START)
    assert csn == loaded + 1


test_every_merge_clause_gives_the_cores_answer.roots = ("local",)  # type: ignore[attr-defined]
"""The clauses do not depend on the root; the histories below run on both."""


def test_a_retried_merge_replaces_its_attempt_and_withdraws_a_keyed_reader_of_it(
        engine_path: EnginePath, cwh: Warehouse, engine_session: SparkSession | None, loaded: int) -> None:
    """Key "upsert" merges (attempt 1); key "derive" reads m.dim through its keyed handle and appends events
    derived from it; "upsert" runs again with a smaller source (attempt 2). The commit is refused until "derive"
    runs again, then commits attempt 2's merge only and what "derive" read of it."""
    cwh.create_table("m.log", events([]).schema)
    t = cwh.begin()
    first = cwh.attach(t.tid).use_key("upsert", 1)
    assert engine_path.merge(engine_session, first, TABLE, dim([(2, "a", 20, "x"), (4, "c", 40, "y")]),
                             ["id", "day"]) == {"updated": 1, "inserted": 1, "deleted": 0}

    def derive(attempt: int) -> list[int]:
        handle = cwh.attach(t.tid).use_key("derive", attempt)
        seen = content(engine_path.read(engine_session, cwh, TABLE, txn=handle))
        engine_path.write(engine_session, handle, "m.log", events([r[0] * 10 for r in seen]))
        return [r[0] for r in seen]

    assert derive(1) == [1, 2, 3, 4, 5]
    again = cwh.attach(t.tid).use_key("upsert", 2)
    assert engine_path.merge(engine_session, again, TABLE, dim([(2, "a", 21, "z")]),
                             ["id", "day"]) == {"updated": 1, "inserted": 0, "deleted": 0}
    with pytest.raises(InvalidatedKeysError, match="derive"):
        t.commit()
    assert ids(t.read("m.log")) == []  # withdrawn until the reader runs again
    assert derive(2) == [1, 2, 3, 5]
    t.commit()
    assert content(cwh.read(TABLE)) == [(1, "a", 1, "one"), (2, "a", 21, "z"), (3, "b", 3, "three"),
                                        (5, "c", 5, "five")]
    assert ids(cwh.read("m.log")) == [10, 20, 30, 50]


def test_a_source_holding_a_key_twice_is_refused_before_anything_is_staged(
        engine_path: EnginePath, cwh: Warehouse, engine_session: SparkSession | None, loaded: int) -> None:
    """The same typed error at the merge on every path (as Delta refuses), as is a clause that is none; nothing
    staged, the transaction usable."""
    t = cwh.begin()
    with pytest.raises(SchemaMismatchError, match=r"more than once, e\.g\. \{'id': 2, 'day': 'a'\}"):
        engine_path.merge(engine_session, t, TABLE, dim([(2, "a", 20, "x"), (4, "c", 4, "y"), (2, "a", 21, "z")]),
                          ["id", "day"])
    with pytest.raises(InvalidArgumentError, match="when_not_matched must be 'insert' or 'ignore'"):
        engine_path.merge(engine_session, t, TABLE, dim([(2, "a", 20, "x")]), ["id", "day"],
                          when_not_matched="upsert")
    assert t.state == "active" and cwh.transaction_info(t.tid)["parts"] == []
    assert engine_path.merge(engine_session, t, TABLE, dim([(2, "a", 20, "x")]), ["id", "day"])["updated"] == 1
    t.commit()
    assert content(cwh.read(TABLE))[1] == (2, "a", 20, "x")


test_a_source_holding_a_key_twice_is_refused_before_anything_is_staged.roots = ("local",)  # type: ignore[attr-defined]
"""The refusals do not depend on the root."""


@pytest.mark.parametrize("isolation", ["snapshot", "serializable"])
def test_merges_conflict_per_part(isolation: str, engine_path: EnginePath, cwh: Warehouse,
                                  engine_session: SparkSession | None, loaded: int) -> None:
    """Two merges rewriting one part (day a): the second is refused at once, the first commits. A merge that
    inserts into day c, against a transaction that appends to day c and commits first: SerializationError at the
    merge's commit, whatever the isolation level; an append to a day the merge did not scan (b) does not disturb
    it."""
    first, second = cwh.begin(isolation=isolation), cwh.begin(isolation=isolation)
    engine_path.merge(engine_session, first, TABLE, dim([(1, "a", 10, "x")]), ["id", "day"])
    with pytest.raises(SerializationError):
        engine_path.merge(engine_session, second, TABLE, dim([(2, "a", 20, "y")]), ["id", "day"])
    second.rollback()
    first.commit()

    merging, other = cwh.begin(isolation=isolation), cwh.begin(isolation=isolation)
    assert engine_path.merge(engine_session, merging, TABLE, dim([(6, "c", 6, "six")]), ["id", "day"])["inserted"] == 1
    engine_path.write(engine_session, other, TABLE, dim([(7, "c", 7, "seven")]))
    other.commit()
    with pytest.raises(SerializationError, match=r"m\.dim"):
        merging.commit()

    merging, other = cwh.begin(isolation=isolation), cwh.begin(isolation=isolation)
    engine_path.merge(engine_session, merging, TABLE, dim([(6, "c", 6, "six")]), ["id", "day"])
    engine_path.write(engine_session, other, TABLE, dim([(8, "b", 8, "eight")]))
    other.commit()
    merging.commit()
    assert content(cwh.read(TABLE)) == [(1, "a", 10, "x"), (2, "a", 2, "two"), (3, "b", 3, "three"),
                                        (5, "c", 5, "five"), (6, "c", 6, "six"), (7, "c", 7, "seven"),
                                        (8, "b", 8, "eight")]
