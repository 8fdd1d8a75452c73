"""Issue 32, points 3 and 5: changing tables gives the core's answer on every engine path x root (paths.py).

A table whose parts were written under several versions of its schema (a column added with a default and one
without, a column renamed, one widened, one dropped) reads through every path exactly as the core reads it, at the
latest snapshot, at each older CSN (time travel reads the old schema) and in a transaction's own view after its own
changes; every file a path writes carries the column ids as Parquet field ids; a path writes under the version its
transaction sees (a column added in one statement is written in the next); Spark's merge_schema (and the data
source's mergeSchema) adds the DataFrame's new columns and widenings in the same statement, a keyed retry replacing
them, and refuses a mismatch without it, nothing staged; a table created or dropped inside a transaction is read and
written through every path as the core sees it; compaction through a path merges only parts of one version; MERGE
into a changed table. The core path makes the same changes with the core's own statements: the core's answer.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_txn import Warehouse
from airflow_txn.core.transaction import Transaction
from airflow_txn.errors import InvalidArgumentError, SchemaMismatchError, TableNotFoundError
from airflow_txn.model.evolution import column_id
from airflow_txn.model.options import Via
from tests.conformance.matrix import comparable
from tests.conformance.paths import EnginePath, spark_frame

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

T = "c.orders"
V1 = pa.schema([pa.field("id", pa.int64(), nullable=False), ("item", pa.string()), ("qty", pa.int32()),
                ("price", pa.float32()), ("day", pa.string())])


def rows(schema: pa.Schema, ids: list[int], day: str = "d1", **values: list[Any]) -> pa.Table:
    """Rows of `schema`: id, `<column><id>` text, id as numbers, `values` for the columns named."""
    columns: dict[str, Any] = {}
    for field in schema:
        if field.name in values:
            columns[field.name] = values[field.name]
        elif field.name == "day":
            columns[field.name] = [day] * len(ids)
        elif pa.types.is_string(field.type):
            columns[field.name] = [f"{field.name}{i}" for i in ids]
        elif pa.types.is_boolean(field.type):
            columns[field.name] = [i % 2 == 0 for i in ids]
        else:
            columns[field.name] = ids
    return pa.Table.from_pydict(columns, schema=pa.schema([f.remove_metadata() for f in schema]))


def write(path: EnginePath, spark: SparkSession | None, t: Transaction, table: str, data: pa.Table,
          merge_schema: bool = False) -> int:
    """Stage `data` in `table` through the path (an append), under the handle's key (if any)."""
    if spark is None:
        return t.append(table, data, merge_schema=merge_schema)
    import airflow_txn.spark as txn_spark

    return txn_spark.write(spark_frame(spark, data), t, table, via=path.via or Via.AUTO, merge_schema=merge_schema)


def read(path: EnginePath, spark: SparkSession | None, wh: Warehouse, table: str, **at: Any) -> pa.Table:
    """`table` as the path reads it at `at` (csn=, tag=, txn=, or the latest), as Arrow in the path's types."""
    if spark is None:
        txn: Transaction | None = at.pop("txn", None)
        return txn.read(table) if txn is not None else wh.read(table, **at)
    import airflow_txn.spark as txn_spark

    return txn_spark.read(spark, wh, table, via=path.via or Via.AUTO, **at).toArrow()


def core_answer(path: EnginePath, wh: Warehouse, table: str, **at: Any) -> pa.Table:
    """What the core reads at `at`, in the path's types."""
    txn: Transaction | None = at.pop("txn", None)
    found = txn.read(table) if txn is not None else wh.read(table, **at)
    return found.cast(path.reads_as(found.schema))


def same(path: EnginePath, spark: SparkSession | None, wh: Warehouse, table: str, **at: Any) -> pa.Table:
    """The path's read at `at`, checked to be the core's: the same columns in order, the same rows."""
    got = read(path, spark, wh, table, **at)
    want = core_answer(path, wh, table, **at)
    assert got.schema.names == want.schema.names, at
    assert [f.type for f in got.schema] == [f.type for f in want.schema], at
    assert comparable(got) == comparable(want), at
    return want


def field_ids_of_files(wh: Warehouse, table: str) -> list[list[int | None]]:
    """The Parquet field ids of the top-level columns of each file of `table` (a local root)."""
    directory = Path(wh.config.root) / table.replace(".", "/")
    found = sorted(directory.rglob("*.parquet")) or sorted(Path(wh.config.root).rglob("*.parquet"))
    return [[column_id(f) for f in pq.read_schema(file)] for file in found]


def test_reads_across_schema_versions_and_time_travel_give_the_cores_answer(
        engine_path: EnginePath, cwh: Warehouse, engine_session: SparkSession | None) -> None:
    """Version 1 (two appends in d1, one in d2), then in one transaction: a column added with a default, one added
    without, a column renamed, one widened, and a row written through the path under the new version (its own view
    read through the path first); then a column dropped and a row written. Every snapshot (CSN), the latest, and each
    transaction's own view read through the path give the core's answer, each in its own version's schema; then
    compaction through the path merges only parts of one version, and the reads are unchanged."""
    spark = engine_session
    cwh.create_table(T, V1, partition_by=["day"])
    t = cwh.begin()
    write(engine_path, spark, t, T, rows(V1, [1]))
    write(engine_path, spark, t, T, rows(V1, [2]))
    write(engine_path, spark, t, T, rows(V1, [3], day="d2"))
    c1 = t.commit()

    t = cwh.begin()
    t.add_column(T, pa.field("note", pa.string()), default="n/a")
    t.add_column(T, pa.field("flag", pa.bool_()))
    t.rename_column(T, "item", "product")
    t.alter_column(T, "qty", pa.int64())
    v2 = t.read(T).schema
    assert same(engine_path, spark, cwh, T, txn=t).num_rows == 3  # its own view, under its own changes
    assert write(engine_path, spark, t, T, rows(v2, [4], note=[None], flag=[True])) == 1  # a real null, not "n/a"
    seen = same(engine_path, spark, cwh, T, txn=t)
    assert sorted(zip(seen["id"].to_pylist(), seen["note"].to_pylist(), strict=True)) == [
        (1, "n/a"), (2, "n/a"), (3, "n/a"), (4, None)]
    assert cwh.schema(T).names == V1.names  # others: not before the commit
    c2 = t.commit()

    t = cwh.begin()
    t.drop_column(T, "price")
    write(engine_path, spark, t, T, rows(t.read(T).schema, [5], day="d2"))
    c3 = t.commit()

    expected_names = {c1: V1.names, c2: v2.names, c3: [n for n in v2.names if n != "price"]}
    for csn, names in expected_names.items():
        assert same(engine_path, spark, cwh, T, csn=csn).schema.names == names
    latest = same(engine_path, spark, cwh, T)
    assert latest["product"].to_pylist() and "item" not in latest.schema.names and latest.num_rows == 5
    if engine_path.session is not None and cwh.config.root.startswith("/"):  # the files the path wrote
        assert all(None not in ids for ids in field_ids_of_files(cwh, T))

    _compact(engine_path, spark, cwh)
    for csn in (c2, c3):
        same(engine_path, spark, cwh, T, csn=csn)
    assert comparable(same(engine_path, spark, cwh, T)) == comparable(latest)


def _compact(path: EnginePath, spark: SparkSession | None, wh: Warehouse) -> None:
    """Compact the table through the path: the two version-1 parts of d1 merge; the parts of d2 (versions 1 and 3)
    do not (a merge never mixes versions)."""
    if spark is None:
        report = wh.compact(T)
    else:
        import airflow_txn.spark as txn_spark

        report = txn_spark.compact(spark, wh, T, via=path.via or Via.AUTO)
    assert (report["groups"], report["merged"], report["parts_before"], report["parts_after"]) == (1, 1, 5, 4), report


M = "c.metrics"
M1 = pa.schema([pa.field("id", pa.int64(), nullable=False), ("qty", pa.int32()), ("day", pa.string())])


def test_merge_schema_adds_columns_and_widens_in_the_statement_and_a_retry_replaces_them(
        engine_path: EnginePath, cwh: Warehouse, engine_session: SparkSession | None) -> None:
    """A DataFrame with a new column and a wider qty: refused without merge_schema (nothing staged, the schema as it
    was); with it, the table gains the column and the widening in the same statement under the task's key, and a
    retry of the task (a DataFrame with the column but not the wider type, nor a second new column) replaces the
    first attempt's changes with its own. The core path does the same with its own merge_schema=True."""
    spark = engine_session
    cwh.create_table(M, M1, partition_by=["day"])
    with cwh.begin() as t:
        t.append(M, rows(M1, [1]))
    wider = pa.schema([*[f.remove_metadata() for f in M1 if f.name != "qty"], ("qty", pa.int64()),
                       ("note", pa.string()), ("extra", pa.string())])
    retried = pa.schema([*[f.remove_metadata() for f in M1], ("note", pa.string())])
    t = cwh.begin()
    first = cwh.attach(t.tid).use_key("load", 1)
    with pytest.raises(SchemaMismatchError, match="note"):
        write(engine_path, spark, first, M, rows(wider, [2]))
    assert t.state == "active" and cwh.transaction_info(t.tid)["parts"] == []
    assert t.read(M).schema.names == M1.names
    if spark is not None:
        with pytest.raises(InvalidArgumentError, match="attempt"):  # a key without its attempt: refused
            write(engine_path, spark, cwh.attach(t.tid).use_key("load"), M, rows(wider, [2]), merge_schema=True)
        assert t.read(M).schema.names == M1.names
    assert write(engine_path, spark, first, M, rows(wider, [2]), merge_schema=True) == 1
    assert t.read(M).schema.field("qty").type == pa.int64()
    assert sorted(t.read(M).schema.names) == sorted(wider.names)

    again = cwh.attach(t.tid).use_key("load", 2)  # the task's retry
    assert write(engine_path, spark, again, M, rows(retried, [3]), merge_schema=True) == 1
    t.commit()
    assert cwh.schema(M).names == [*M1.names, "note"] and cwh.schema(M).field("qty").type == pa.int32()
    assert sorted(cwh.read(M).to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "qty": 1, "day": "d1", "note": None}, {"id": 3, "qty": 3, "day": "d1", "note": "note3"}]
    same(engine_path, spark, cwh, M)

    if engine_path.via is Via.DATASOURCE:  # the data source's own option, written with format("airflow_txn")
        assert spark is not None
        import airflow_txn.spark as txn_spark

        t = cwh.begin()
        frame = spark_frame(spark, rows(pa.schema([*retried, ("tag", pa.string())]), [4]))
        txn_spark.register(spark)
        (frame.write.format("airflow_txn").options(**txn_spark.warehouse_options(cwh)).option("tid", t.tid)
         .option("mergeSchema", "true").mode("append").save(M))
        t.commit()
        assert cwh.schema(M).names == [*M1.names, "note", "tag"]
        assert cwh.read(M, filter=None).num_rows == 3
        same(engine_path, spark, cwh, M)


def test_a_write_checks_the_version_its_transaction_sees(
        engine_path: EnginePath, cwh: Warehouse, engine_session: SparkSession | None) -> None:
    """A column added in one statement is written through the path in the next; a DataFrame of the old schema is
    then refused (nothing staged); another transaction, which does not see the change, still writes the old schema
    and its rows read under the new one (a compatible change)."""
    spark = engine_session
    cwh.create_table(M, M1, partition_by=["day"])
    t = cwh.begin()
    other = cwh.begin()
    t.add_column(M, pa.field("note", pa.string()))
    with pytest.raises(SchemaMismatchError, match="note"):
        write(engine_path, spark, t, M, rows(M1, [1]))
    assert cwh.transaction_info(t.tid)["parts"] == []
    assert write(engine_path, spark, t, M, rows(t.read(M).schema, [2])) == 1
    assert write(engine_path, spark, other, M, rows(M1, [3])) == 1  # under version 1, its view
    t.commit()
    other.commit()
    found = same(engine_path, spark, cwh, M)
    assert sorted(zip(found["id"].to_pylist(), found["note"].to_pylist(), strict=True)) == [(2, "note2"), (3, None)]


test_a_write_checks_the_version_its_transaction_sees.roots = ("local",)  # type: ignore[attr-defined]
"""The versions a write checks do not depend on the root."""

N = "c.fresh"


def test_a_table_created_and_dropped_inside_a_transaction_on_every_path(
        engine_path: EnginePath, cwh: Warehouse, engine_session: SparkSession | None) -> None:
    """A table created inside a transaction is written and read through the path in it, and seen by others only
    from its commit; dropped inside another, it is gone in that transaction's view and from its commit, while a
    read at an older CSN still reads it."""
    spark = engine_session
    cwh.create_table(M, M1)
    t = cwh.begin()
    t.create_table(N, M1, partition_by=["day"])
    assert write(engine_path, spark, t, N, rows(M1, [1, 2])) == 2
    assert same(engine_path, spark, cwh, N, txn=t).num_rows == 2
    before = cwh.begin()
    with pytest.raises(TableNotFoundError):
        read(engine_path, spark, cwh, N)
    created = t.commit()
    assert same(engine_path, spark, cwh, N).num_rows == 2

    t = cwh.begin()
    t.drop_table(N)
    with pytest.raises(TableNotFoundError):
        read(engine_path, spark, cwh, N, txn=t)
    with pytest.raises(TableNotFoundError):
        write(engine_path, spark, t, N, rows(M1, [3]))
    dropped = t.commit()
    with pytest.raises(TableNotFoundError):
        read(engine_path, spark, cwh, N)
    with pytest.raises(TableNotFoundError):
        read(engine_path, spark, cwh, N, csn=dropped)
    assert same(engine_path, spark, cwh, N, csn=created).num_rows == 2
    with pytest.raises(TableNotFoundError):  # its snapshot is older than the creation
        write(engine_path, spark, before, N, rows(M1, [4]))
    before.rollback()


test_a_table_created_and_dropped_inside_a_transaction_on_every_path.roots = ("local",)  # type: ignore[attr-defined]
"""Creation and drop are catalog rows: they do not depend on the root."""


def test_merge_into_a_table_after_a_schema_change(
        engine_path: EnginePath, cwh: Warehouse, engine_session: SparkSession | None) -> None:
    """MERGE (airflow_txn.spark.merge; the core: Transaction.merge) into a table whose column was added and renamed
    in the same transaction: matched rows updated in the new column, unmatched ones inserted."""
    spark = engine_session
    cwh.create_table(M, M1, partition_by=["day"])
    with cwh.begin() as t:
        t.append(M, rows(M1, [1, 2]))
    t = cwh.begin()
    t.add_column(M, pa.field("note", pa.string()))
    t.rename_column(M, "qty", "amount")
    source = rows(t.read(M).schema, [2, 3], amount=[20, 30], note=["two", "three"])
    if spark is None:
        counts = t.merge(M, source, on="id")
    else:
        import airflow_txn.spark as txn_spark

        counts = txn_spark.merge(spark_frame(spark, source), t, M, on="id")
    assert (counts["updated"], counts["inserted"]) == (1, 1)
    t.commit()
    found = same(engine_path, spark, cwh, M)
    assert sorted(zip(found["id"].to_pylist(), found["amount"].to_pylist(), found["note"].to_pylist(),
                      strict=True)) == [(1, 1, None), (2, 20, "two"), (3, 30, "three")]


test_merge_into_a_table_after_a_schema_change.roots = ("local",)  # type: ignore[attr-defined]
"""MERGE collects its source to the driver and runs in the core: it does not depend on the root."""


def test_update_and_delete_rewrite_old_parts_under_the_new_version(
        engine_path: EnginePath, cwh: Warehouse, engine_session: SparkSession | None) -> None:
    """Copy-on-write through the path (delete, update) of parts written under version 1, in a transaction that
    added a column with a default and renamed another: the rewritten rows keep their values under the new names, the
    added column's default is written into them, and the path reads the result as the core does."""
    spark = engine_session
    cwh.create_table(M, M1, partition_by=["day"])
    with cwh.begin() as t:
        t.append(M, rows(M1, [1, 2, 3]))
    t = cwh.begin()
    t.add_column(M, pa.field("note", pa.string()), default="old")
    t.rename_column(M, "qty", "amount")
    assert engine_path.delete(spark, t, M, "id", [1]) == 1
    assert engine_path.update(spark, t, M, "id", [2], {"amount": 10}) == 1
    t.commit()
    found = same(engine_path, spark, cwh, M)
    assert sorted(zip(found["id"].to_pylist(), found["amount"].to_pylist(), found["note"].to_pylist(),
                      strict=True)) == [(2, 12, "old"), (3, 3, "old")]


test_update_and_delete_rewrite_old_parts_under_the_new_version.roots = ("local",)  # type: ignore[attr-defined]
"""Copy-on-write reads through the same plans on every root (the reads across versions run on each)."""
