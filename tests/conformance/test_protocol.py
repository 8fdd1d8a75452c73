"""Issue 31, item 6: the protocol gives the core's answer on every engine path x root (paths.py): keyed writes
and keyed reads with a retry that withdraws what a read saw, a partition overwrite, time travel and tags, and
bad input refused by the same typed error at the same call, before anything is staged.

Each case is one history written once; a path only says how it writes and reads (`stage`, `read_ids` below),
so a new path listed in paths.py runs every case. The cases are few and whole (a handful of Spark jobs per path
x root): the CI budget pays for each.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pytest

from airflow_txn import Warehouse
from airflow_txn.core.transaction import Transaction
from airflow_txn.errors import (
    InvalidatedKeysError,
    InvalidOptionError,
    SchemaMismatchError,
    SnapshotTooOldError,
    TableNotFoundError,
    TableNotInTagError,
)
from airflow_txn.model.options import SaveModeName, Via
from airflow_txn.model.results import PartitionSpec
from tests.conformance.paths import EnginePath, spark_frame
from tests.helpers import accounts, events, ids, make_tables

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def stage(path: EnginePath, spark: SparkSession | None, t: Transaction, table: str, rows: pa.Table,
          mode: SaveModeName = "append", partitions: PartitionSpec | None = None) -> int:
    """Stage `rows` in `table` through the path, under the handle's key (if any); the rows staged."""
    if spark is None:
        return t.overwrite(table, rows, partitions) if mode == "overwrite" else t.append(table, rows)
    import airflow_txn.spark as txn_spark

    return txn_spark.write(spark_frame(spark, rows), t, table, mode=mode, partitions=partitions,
                           via=path.via or Via.AUTO)


def read_ids(path: EnginePath, spark: SparkSession | None, wh: Warehouse, table: str, **at: Any) -> list[int]:
    """The ids of `table` as the path reads it at `at` (csn=, tag= or txn=: a transaction's own view)."""
    if spark is None:
        txn: Transaction | None = at.pop("txn", None)
        return ids(txn.read(table) if txn is not None else wh.read(table, **at))
    import airflow_txn.spark as txn_spark

    return sorted(r.id for r in txn_spark.read(spark, wh, table, via=path.via or Via.AUTO, **at).collect())


def test_a_retry_withdraws_the_keyed_work_derived_from_what_it_replaced(
        engine_path: EnginePath, cwh: Warehouse, engine_session: SparkSession | None) -> None:
    """A keyed task reads the transaction's own view and derives rows from it; the task that wrote what it read
    is retried and stages fewer rows. The commit is refused until the reader runs again (invariant 7), then
    commits what the new attempts made. (The data source once lost the read's key: the commit succeeded with
    src=[1, 2] and dst=[10, 20, 30].)"""
    make_tables(cwh)
    t = cwh.begin()
    stage(engine_path, engine_session, cwh.attach(t.tid).use_key("load", 1), "sales.accounts",
          accounts({1: 1, 2: 2, 3: 3}))
    derive = cwh.attach(t.tid).use_key("derive", 1)
    seen = read_ids(engine_path, engine_session, cwh, "sales.accounts", txn=derive)
    assert seen == [1, 2, 3]
    stage(engine_path, engine_session, derive, "sales.events", events([i * 10 for i in seen]))
    stage(engine_path, engine_session, cwh.attach(t.tid).use_key("load", 2), "sales.accounts",
          accounts({1: 1, 2: 2}))  # the retry
    with pytest.raises(InvalidatedKeysError, match="derive"):
        t.commit()
    assert ids(t.read("sales.events")) == []  # withdrawn until the reader runs again
    again = cwh.attach(t.tid).use_key("derive", 2)
    seen = read_ids(engine_path, engine_session, cwh, "sales.accounts", txn=again)
    stage(engine_path, engine_session, again, "sales.events", events([i * 10 for i in seen]))
    t.commit()
    assert ids(cwh.read("sales.accounts")) == [1, 2] and ids(cwh.read("sales.events")) == [10, 20]


def test_an_overwrite_replaces_its_partitions_and_every_snapshot_reads_the_same_on_every_path(
        engine_path: EnginePath, cwh: Warehouse, engine_session: SparkSession | None) -> None:
    """Partition overwrite through the path; the snapshot before it by CSN and by tag, and the latest, read
    through the path give what the core reads."""
    make_tables(cwh)
    t = cwh.begin()
    t.append("sales.events", pa.concat_tables([events([1, 2], day="2024-01-01"), events([3], day="2024-01-02")]))
    first = t.commit()
    cwh.tag("before", csn=first)
    t = cwh.begin()
    assert stage(engine_path, engine_session, t, "sales.events", events([4], day="2024-01-01"), mode="overwrite",
                 partitions=[{"day": "2024-01-01"}]) == 1
    assert read_ids(engine_path, engine_session, cwh, "sales.events", txn=t) == [3, 4]  # its own view
    second = t.commit()
    expected = {"latest": [3, 4], "csn": [1, 2, 3], "tag": [1, 2, 3], "csn2": [3, 4]}
    found = {"latest": read_ids(engine_path, engine_session, cwh, "sales.events"),
             "csn": read_ids(engine_path, engine_session, cwh, "sales.events", csn=first),
             "tag": read_ids(engine_path, engine_session, cwh, "sales.events", tag="before"),
             "csn2": read_ids(engine_path, engine_session, cwh, "sales.events", csn=second)}
    assert found == expected
    at: dict[str, dict[str, Any]] = {"latest": {}, "csn": {"csn": first}, "tag": {"tag": "before"},
                                     "csn2": {"csn": second}}
    assert {k: ids(cwh.read("sales.events", **a)) for k, a in at.items()} == expected  # the core agrees


def test_bad_input_is_the_same_typed_error_at_the_same_call_and_stages_nothing(
        engine_path: EnginePath, cwh: Warehouse, engine_session: SparkSession | None) -> None:
    """A write to a missing table, an overwrite holding a row outside its listed partitions: refused at the write,
    nothing staged. A read below the retention horizon, a tag not holding the table: refused at read(), before
    any Spark action."""
    make_tables(cwh)
    csns = []
    for i in (1, 2):
        t = cwh.begin()
        t.append("sales.accounts", accounts({i: i}))
        csns.append(t.commit())
    t = cwh.begin()
    with pytest.raises(TableNotFoundError, match=r"sales\.nope"):
        stage(engine_path, engine_session, t, "sales.nope", accounts({9: 9}))
    with pytest.raises(SchemaMismatchError, match="2024-01-02"):
        stage(engine_path, engine_session, t, "sales.events", events([9], day="2024-01-02"), mode="overwrite",
              partitions=[{"day": "2024-01-01"}])
    assert t.state == "active" and cwh.transaction_info(t.tid)["parts"] == []
    t.rollback()
    cwh.vacuum(retention_seconds=0)  # the first snapshot is below the horizon now
    with pytest.raises(SnapshotTooOldError):
        read_ids(engine_path, engine_session, cwh, "sales.accounts", csn=csns[0])
    cwh.tag("events-only", tables=["sales.events"])
    with pytest.raises(TableNotInTagError):
        read_ids(engine_path, engine_session, cwh, "sales.accounts", tag="events-only")


test_bad_input_is_the_same_typed_error_at_the_same_call_and_stages_nothing.roots = ("local",)  # type: ignore[attr-defined]
"""The refusals do not depend on the root."""


def test_a_bad_option_is_the_same_typed_error_at_the_same_call_and_stages_nothing(
        engine_path: EnginePath, cwh: Warehouse, engine_session: SparkSession | None) -> None:
    """Issue 31, item 7: a write `mode` that is no WriteMode (the core's engine interface, adapter.open_write; a
    DataFrame write: spark.write) and a `via` that is no Via are refused at the call with InvalidOptionError naming
    the parameter, the value and the values allowed; nothing is staged and the transaction stays usable."""
    make_tables(cwh)
    t = cwh.begin()
    mode_refused = r"^mode must be one of 'append', 'overwrite'(, 'rewrite')?, got 'upsert'$"
    if engine_session is None:
        from airflow_txn.core.adapter import open_write

        with pytest.raises(InvalidOptionError, match=mode_refused):
            open_write(t, "sales.accounts", "upsert")  # type: ignore[arg-type]  # a caller's bad text
    else:
        import airflow_txn.spark as txn_spark

        frame = spark_frame(engine_session, accounts({9: 9}))
        with pytest.raises(InvalidOptionError, match=mode_refused):
            txn_spark.write(frame, t, "sales.accounts", mode="upsert",  # type: ignore[arg-type]  # on purpose
                            via=engine_path.via or Via.AUTO)
        via_refused = r"^via must be one of 'auto', 'native', 'datasource', got 'hadoop'$"
        with pytest.raises(InvalidOptionError, match=via_refused):
            txn_spark.write(frame, t, "sales.accounts", via="hadoop")  # type: ignore[arg-type]
        with pytest.raises(InvalidOptionError, match=via_refused):
            txn_spark.read(engine_session, cwh, "sales.accounts", via="hadoop")  # type: ignore[arg-type]
    assert t.state == "active" and cwh.transaction_info(t.tid)["parts"] == []
    assert stage(engine_path, engine_session, t, "sales.accounts", accounts({1: 1})) == 1  # still usable
    t.commit()


test_a_bad_option_is_the_same_typed_error_at_the_same_call_and_stages_nothing.roots = ("local",)  # type: ignore[attr-defined]
"""The refusals do not depend on the root."""
