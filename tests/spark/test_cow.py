"""Copy-on-write delete and update run by Spark: only the parts holding matching rows are rewritten,
concurrent rewrites of a part conflict, and bad conditions or values are refused up front; on both ways
(`via`): Spark's own Parquet scan and writer, and the "airflow_txn" data source (test_datasource.py runs it on
S3 and through Spark Connect too)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import airflow_txn.spark as txn_spark
from airflow_txn import Warehouse
from airflow_txn.catalog import commit_log, part_records
from airflow_txn.catalog.compaction_records import MergedAwayError
from airflow_txn.catalog.table_registry import TableInfo
from airflow_txn.core import compaction, staging
from airflow_txn.core.compaction import MergeGroup
from airflow_txn.core.runtime import Runtime
from airflow_txn.core.staging import Statement
from airflow_txn.core.transaction import Transaction
from airflow_txn.errors import SchemaMismatchError, SerializationError, TransactionClosedError
from airflow_txn.spark import cow
from airflow_txn.spark.cow import MERGE_RETRIES
from tests.helpers import events, ids, make_tables
from tests.spark.helpers import rows_of

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark


@pytest.fixture(params=["native", "datasource"])
def via(request: pytest.FixtureRequest) -> str:
    way: str = request.param
    return way


def _three_parts(wh: Warehouse) -> dict[int, str]:
    """Part id -> path of three committed parts: ids 1-2 and 3 on day 1 (two parts), 4-5 on day 2."""
    make_tables(wh)
    with wh.begin() as t:
        t.append("sales.events", events([1, 2]))
        t.append("sales.events", events([3]))
        t.append("sales.events", events([4, 5], day="2024-01-02", value=2.0))
    return {i: p["path"] for i, p in enumerate(wh.transaction_info(t.tid)["parts"])}


def _rewritten(wh: Warehouse, tid: str) -> tuple[list[str], list[str]]:
    parts = wh.transaction_info(tid)["parts"]
    return (sorted(p["path"] for p in parts if p["role"] == "removed"),
            sorted(str(p["partition"]["day"]) for p in parts if p["role"] == "created"))


def test_delete_rewrites_only_the_parts_holding_matches(spark: SparkSession, swh: Warehouse, via: str) -> None:
    from pyspark.sql import functions as F

    paths = _three_parts(swh)
    with swh.begin() as t:
        assert txn_spark.delete(spark, t, "sales.events", F.col("id").isin(2, 5), via=via) == 2
    removed, created = _rewritten(swh, t.tid)
    assert removed == sorted([paths[0], paths[2]]) and created == ["2024-01-01", "2024-01-02"]
    assert ids(swh.read("sales.events")) == [1, 3, 4]
    with swh.begin() as t:  # a whole part deleted: nothing is written in its place
        assert txn_spark.delete(spark, t, "sales.events", "day = '2024-01-02'", via=via) == 1
        assert txn_spark.delete(spark, t, "sales.events", "id > 100", via=via) == 0
    assert _rewritten(swh, t.tid)[1] == []
    assert ids(swh.read("sales.events")) == [1, 3]


def test_update_sets_values_and_moves_rows_between_partitions(spark: SparkSession, swh: Warehouse,
                                                             via: str) -> None:
    from pyspark.sql import functions as F

    paths = _three_parts(swh)
    with swh.begin() as t:
        assert txn_spark.update(spark, t, "sales.events", "id = 3",
                                {"value": F.col("value") * 10, "day": "2024-01-02"}, via=via) == 1
        assert rows_of(txn_spark.read(spark, swh, "sales.events", txn=t).where("id = 3")) == [(3, "2024-01-02", 10.0)]
    assert _rewritten(swh, t.tid) == ([paths[1]], ["2024-01-02"])
    assert rows_of(txn_spark.read(spark, swh, "sales.events")) == [
        (1, "2024-01-01", 1.0), (2, "2024-01-01", 1.0), (3, "2024-01-02", 10.0), (4, "2024-01-02", 2.0),
        (5, "2024-01-02", 2.0)]


def test_bad_conditions_and_values_are_refused_before_any_job(spark: SparkSession, swh: Warehouse, via: str) -> None:
    from pyspark.sql import functions as F

    strict = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])
    swh.create_table("ns.strict", strict)
    with swh.begin() as t:
        t.append("ns.strict", pa.table({"id": [1, 2], "v": ["a", "b"]}, schema=strict))
    t = swh.begin()
    with pytest.raises(SchemaMismatchError, match="cannot evaluate"):
        txn_spark.delete(spark, t, "ns.strict", "nope = 1", via=via)
    with pytest.raises(SchemaMismatchError, match="not boolean"):
        txn_spark.delete(spark, t, "ns.strict", "id + 1", via=via)
    with pytest.raises(SchemaMismatchError, match="unknown column"):
        txn_spark.update(spark, t, "ns.strict", "id = 1", {"nope": 1}, via=via)
    with pytest.raises(SchemaMismatchError, match="cannot be set to None"):
        txn_spark.update(spark, t, "ns.strict", "id = 1", {"id": None}, via=via)
    with pytest.raises(SchemaMismatchError, match="not nullable"):  # a null computed by the job itself
        txn_spark.update(spark, t, "ns.strict", "id = 1", {"id": F.expr("CAST(NULL AS BIGINT)")}, via=via)
    assert swh.transaction_info(t.tid)["parts"] == [] and t.state == "active"
    t.commit()
    assert swh.read("ns.strict").num_rows == 2


def test_concurrent_rewrites_of_one_part_conflict(spark: SparkSession, swh: Warehouse, via: str) -> None:
    _three_parts(swh)
    first, second = swh.begin(), swh.begin()
    txn_spark.delete(spark, first, "sales.events", "id = 1", via=via)
    txn_spark.delete(spark, second, "sales.events", "id = 4", via=via)  # another part: no conflict
    with pytest.raises(SerializationError):
        txn_spark.update(spark, second, "sales.events", "id = 2", {"value": 0.0}, via=via)
    with pytest.raises(TransactionClosedError):  # the loser can only roll back
        txn_spark.delete(spark, second, "sales.events", "id = 5", via=via)
    second.rollback()
    first.commit()
    assert ids(swh.read("sales.events")) == [2, 3, 4, 5]


def test_a_newer_attempt_rewrites_the_view_without_what_older_attempts_did(spark: SparkSession, swh: Warehouse,
                                                                          via: str) -> None:
    """The first write of a key's newer attempt replaces what its older attempts staged: a delete of attempt 2
    chooses among the parts attempt 1's delete had replaced, which are visible again to it. (Found by
    tests/conformance/test_histories.py: through the data source attempt 2 failed on every run with
    MergedAwayError "part 1 ... is not visible in this read": it re-planned the parts it had chosen in the
    transaction's current view, where attempt 1's removal still hid them.)"""
    _three_parts(swh)
    t = swh.begin()
    swh.attach(t.tid).use_key("C", 1).delete("sales.events", pc.field("id") == 1)  # part [1, 2] replaced by [2]
    again = swh.attach(t.tid).use_key("C", 2)
    assert txn_spark.delete(spark, again, "sales.events", "id IN (2, 4)", via=via) == 2
    assert ids(t.read("sales.events")) == [1, 3, 5]
    t.commit()
    assert ids(swh.read("sales.events")) == [1, 3, 5]


# -- a background merge swapping out chosen parts while the statement's Spark jobs run ---------------

def _statement(spark: SparkSession, t: Transaction, kind: str, via: str = "native") -> int:
    """Rows 3 (day 1's second part) and 4 (day 2's only part): two chosen parts."""
    if kind == "delete":
        return txn_spark.delete(spark, t, "sales.events", "id IN (3, 4)", via=via)
    return txn_spark.update(spark, t, "sales.events", "id IN (3, 4)", {"value": 9.0}, via=via)


@pytest.mark.parametrize("kind", ["delete", "update"])
def test_a_merge_of_some_chosen_parts_mid_statement_makes_it_run_again(
        spark: SparkSession, swh: Warehouse, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    """The statement chooses its parts and runs its jobs, then a merge swaps out one of them (day 1's two
    parts merged; day 2's chosen part untouched), then the statement registers: it runs again on the
    merged part and the transaction commits the rows it would have without the merge."""
    plain = Warehouse.open(catalog=f"sqlite:///{tmp_path / 'plain.db'}", root=str(tmp_path / "plain"))
    try:
        _three_parts(plain)
        with plain.begin() as t:
            assert _statement(spark, t, kind) == 2
        expected = rows_of(txn_spark.read(spark, plain, "sales.events"))
    finally:
        plain.close()

    _three_parts(swh)
    original = staging.register_written
    chosen: list[list[int]] = []
    merges: list[dict[str, Any]] = []

    def interleaved(rt: Runtime, stmt: Statement, info: TableInfo, written: Any, removals: Any, *rest: Any) -> None:
        chosen.append(sorted(removals))
        if not merges:
            merges.append(swh.compact("sales.events"))
        original(rt, stmt, info, written, removals, *rest)

    monkeypatch.setattr(staging, "register_written", interleaved)
    with swh.begin() as t:
        assert _statement(spark, t, kind) == 2
    assert t.state == "committed"
    assert merges[0]["merged"] == 1 and merges[0]["merges"][0]["sources"] == 2, "day 1's two parts were merged"
    merged = merges[0]["merges"][0]["part"]
    assert len(chosen) == 2 and len(chosen[0]) == len(chosen[1]) == 2
    assert merged in chosen[1] and len(set(chosen[0]) & set(chosen[1])) == 1  # day 2's part chosen both times
    assert rows_of(txn_spark.read(spark, swh, "sales.events")) == expected
    assert swh.recover()["orphan_dirs"] == 0  # the first run's write dir was deleted


@pytest.mark.parametrize("kind", ["delete", "update"])
def test_a_merge_while_the_data_source_rewrites_makes_the_statement_run_again(
        spark: SparkSession, swh: Warehouse, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    """Through the data source the registration runs on the Spark side, so the merge comes between the
    statement's choice and its write job: the writer finds a chosen part merged away before writing anything,
    the client gets MergedAwayError (its own type) and the statement runs again on the merged part."""
    _three_parts(swh)
    original = cow._Run.stage
    merges: list[dict[str, Any]] = []
    replaced: list[list[int]] = []

    def interleaved(run: cow._Run, changed: Any, plan: Any) -> None:
        replaced.append(sorted(plan.removals))
        if not merges:
            merges.append(swh.compact("sales.events"))
        original(run, changed, plan)

    monkeypatch.setattr(cow._Run, "stage", interleaved)
    with swh.begin() as t:
        assert _statement(spark, t, kind, via="datasource") == 2
    assert merges[0]["merged"] == 1 and len(replaced) == 2
    assert merges[0]["merges"][0]["part"] in replaced[1]
    got = rows_of(txn_spark.read(spark, swh, "sales.events"))
    changed = [] if kind == "delete" else [(3, "2024-01-01", 9.0), (4, "2024-01-02", 9.0)]
    assert got == sorted([(1, "2024-01-01", 1.0), (2, "2024-01-01", 1.0), *changed, (5, "2024-01-02", 2.0)])
    swh.vacuum(retention_seconds=0)
    assert swh.recover()["orphan_dirs"] == 0


def test_a_statement_merged_away_on_every_run_fails_clearly_after_the_last(
        spark: SparkSession, swh: Warehouse, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each time the statement registers, a merge combines the part it chose with one more: after
    MERGE_RETRIES runs it gives up with a clear conflict; nothing was staged."""
    make_tables(swh)
    with swh.begin() as t:
        for i in range(1, MERGE_RETRIES + 2):  # the chosen part and one more per run
            t.append("sales.events", events([i]))
    original = staging.register_written
    runs: list[list[int]] = []

    def interleaved(rt: Runtime, stmt: Statement, info: TableInfo, written: Any, removals: Any, *rest: Any) -> None:
        runs.append(sorted(removals))
        with rt.catalog.read() as conn:
            watermark = commit_log.readable_csn(conn, rt.oracle.last_csn(conn))
            live = part_records.visible_parts(conn, info.id, None, watermark)
        other = min(p.id for p in live if p.id not in removals)
        sources = sorted((p for p in live if p.id in removals or p.id == other),
                         key=lambda p: (int(p.version.creation_csn or 0), p.id))
        group = MergeGroup(info, sources[0].partition_key, tuple(sources))
        assert compaction.merge_group(rt, group)["status"] == "merged"
        original(rt, stmt, info, written, removals, *rest)

    monkeypatch.setattr(staging, "register_written", interleaved)
    t = swh.begin()
    with pytest.raises(MergedAwayError, match=f"ran {MERGE_RETRIES} times"):
        txn_spark.delete(spark, t, "sales.events", "id = 1")
    assert len(runs) == MERGE_RETRIES and len({tuple(r) for r in runs}) == MERGE_RETRIES
    with pytest.raises(TransactionClosedError):  # a conflict: the transaction can only roll back
        t.append("sales.events", events([99]))
    t.rollback()
    monkeypatch.undo()
    assert ids(swh.read("sales.events")) == list(range(1, MERGE_RETRIES + 2))
    assert swh.recover()["orphan_dirs"] == 0
