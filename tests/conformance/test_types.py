"""Issue 31, items 3 and 6: every type a table may have round-trips exactly through every engine path on every
root (paths.py), as data and as partition values (matrix.py), and a value a column cannot hold is refused with a
typed error before anything is staged.

"Round-trips" (docs/TYPES.md): a table the core wrote, read through a path, gives each value exactly, in the
path's own types (a Spark path: uint8 as short, ..., uint64 as decimal(20,0), date64 as a date, every timestamp in
microseconds, an aware one as the same instant); a path that writes (in its own types) stages rows the core reads
back as exactly the table's values, and the path reads them back as it reads the core's.
"""

from __future__ import annotations

import datetime as dt
import functools
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pytest

from airflow_txn import Warehouse
from airflow_txn.errors import SchemaMismatchError
from tests.conformance.matrix import PARTITION_BY, PLAIN, SCHEMA, UTC, comparable, rows
from tests.conformance.paths import EnginePath, spark_arrow
from tests.core.test_errors import rejected, rejected_all

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def test_every_type_round_trips_as_data_and_as_partition_values(engine_path: EnginePath, cwh: Warehouse,
                                                                engine_session: SparkSession | None) -> None:
    """The core writes the matrix's rows, the path writes them again (ids + 100) into the same table: the core
    reads both as the table's values, the path reads both as the same values in its own types (one Spark job and
    one Spark read)."""
    cwh.create_table("c.types", SCHEMA, partition_by=PARTITION_BY)
    data = rows()
    with cwh.begin() as t:
        t.append("c.types", data)
    if engine_path.session is not None:
        again = data.set_column(0, SCHEMA.field("id"), pa.array([i + 100 for i in range(data.num_rows)], pa.int64()))
        with cwh.begin() as t:
            assert engine_path.write(engine_session, t, "c.types", again) == data.num_rows
        data = pa.concat_tables([data, again])
    assert comparable(cwh.read("c.types")) == comparable(data)
    expected = comparable(data.cast(engine_path.reads_as(SCHEMA)))
    assert comparable(engine_path.read(engine_session, cwh, "c.types")) == expected


def test_every_type_round_trips_through_a_merge(engine_path: EnginePath, cwh: Warehouse,
                                                 engine_session: SparkSession | None) -> None:
    """The core writes the matrix's rows; the path merges them again (every column of each matched row set from
    the source: the same values) with the same rows under ids + 100 (inserted), keyed by id alone (every part a
    candidate): the core reads both as exactly the table's values (a Spark path: a DataFrame in Spark's types,
    each value cast back to the table's)."""
    cwh.create_table("c.types", SCHEMA, partition_by=PARTITION_BY)
    data = rows()
    with cwh.begin() as t:
        t.append("c.types", data)
    again = data.set_column(0, SCHEMA.field("id"), pa.array([i + 100 for i in range(data.num_rows)], pa.int64()))
    with cwh.begin() as t:
        assert engine_path.merge(engine_session, t, "c.types", pa.concat_tables([data, again]), ["id"]) == {
            "updated": data.num_rows, "inserted": data.num_rows, "deleted": 0}
    assert comparable(cwh.read("c.types")) == comparable(pa.concat_tables([data, again]))


test_every_type_round_trips_through_a_merge.roots = ("local",)  # type: ignore[attr-defined]
"""The merge's writes are the core's on every path (test_merge.py runs merges on both roots)."""


def _bad_rows(engine_path: EnginePath) -> pa.Table:
    """Rows in the types the path writes with, each holding one value its column cannot hold."""
    if engine_path.session is None:  # the core: a timestamp[ns] value finer than Spark's microseconds
        finer = pa.scalar(1_709_294_400_000_000_001, pa.timestamp("ns"))
        return pa.Table.from_pylist([{**PLAIN, "id": 9, "t_ns": finer}], SCHEMA)
    spark_schema = spark_arrow(SCHEMA)
    bad: list[dict[str, Any]] = [{"u8": 256}, {"t_ms": dt.datetime(2024, 3, 1, 0, 0, 0, 1, tzinfo=UTC)},
                                 {"t_ns": dt.datetime(2300, 1, 1)}, {"t_s": dt.datetime(2024, 3, 1, 0, 0, 0, 500000)}]
    return pa.Table.from_pylist([{**PLAIN, "id": 10 + i, **b} for i, b in enumerate(bad)], spark_schema)


def test_a_value_its_column_cannot_hold_is_refused_before_anything_is_staged(
        engine_path: EnginePath, cwh: Warehouse, engine_session: SparkSession | None,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("airflow_txn.spark.via.SWEEP_MIN_S", 0.5)  # one task (coalesce(1)): none is left running
    cwh.create_table("c.bad", SCHEMA, partition_by=PARTITION_BY)
    bad = _bad_rows(engine_path)
    t = cwh.begin()
    if engine_session is None:
        rejected(cwh, cwh.config.root, SchemaMismatchError, lambda: t.append("c.bad", bad), match="column 't_ns'")
    else:
        import airflow_txn.spark as txn_spark
        from airflow_txn.spark.types import to_spark_schema

        frame = engine_session.createDataFrame(bad, schema=to_spark_schema(SCHEMA)).coalesce(1)
        rejected(cwh, cwh.config.root, SchemaMismatchError,
                 lambda: txn_spark.write(frame, t, "c.bad", via=str(engine_path.via)))
    assert t.state == "active"
    t.rollback()


test_a_value_its_column_cannot_hold_is_refused_before_anything_is_staged.roots = ("local",)  # type: ignore[attr-defined]
"""The refusal does not depend on the root (a data-source write's refusal waits for its tasks: seconds each)."""


def test_a_merge_of_a_value_its_column_cannot_hold_is_refused_before_anything_is_staged(
        engine_path: EnginePath, cwh: Warehouse, engine_session: SparkSession | None) -> None:
    """The rows of the previous case as a MERGE's source through the path: the same typed error, nothing staged."""
    cwh.create_table("c.bad", SCHEMA, partition_by=PARTITION_BY)
    bad = _bad_rows(engine_path)
    t = cwh.begin()
    if engine_session is None:
        rejected(cwh, cwh.config.root, SchemaMismatchError, lambda: t.merge("c.bad", bad, ["id"]),
                 match="column 't_ns'")
    else:
        import airflow_txn.spark as txn_spark
        from airflow_txn.spark.types import to_spark_schema

        frames = [engine_session.createDataFrame(bad.slice(i, 1), schema=to_spark_schema(SCHEMA))
                  for i in range(bad.num_rows)]  # each value on its own: each is refused
        rejected_all(cwh, cwh.config.root, SchemaMismatchError,
                     [functools.partial(txn_spark.merge, frame, t, "c.bad", "id") for frame in frames],
                     match="does not fit")
    assert t.state == "active" and cwh.transaction_info(t.tid)["parts"] == []
    t.rollback()


test_a_merge_of_a_value_its_column_cannot_hold_is_refused_before_anything_is_staged.roots = ("local",)  # type: ignore[attr-defined]
"""The refusal does not depend on the root."""
