"""The "airflow_txn" Spark data source: format("airflow_txn") writes and reads, and airflow_txn.spark.write/read
through it (via="datasource", what via="auto" picks for an object-store root), on a local root and on a real
S3 server (SeaweedFS), each through the local SparkSession and through a Spark Connect server (`any_spark`)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pytest

import airflow_txn.spark as txn_spark
from airflow_txn import Warehouse
from airflow_txn.errors import (
    InvalidNameError,
    InvalidOptionError,
    SchemaMismatchError,
    SnapshotTooOldError,
    TableNotFoundError,
    TableNotInTagError,
    TransactionClosedError,
)
from airflow_txn.spark.datasource import warehouse_options
from airflow_txn.spark.via import is_connect
from tests.core.test_errors import state
from tests.helpers import ACCOUNTS, EVENTS, accounts, events, ids, make_tables, storage_files
from tests.spark.helpers import events_df, frame, rows_of

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from tests.harness.seaweedfs import S3Server

pytestmark = pytest.mark.spark
KEY = "dag=etl/task=load/map=0"


def _days(spark: SparkSession, rows: dict[str, list[int]]) -> DataFrame:
    return frame(spark, EVENTS, [(i, day, float(i)) for day, found in rows.items() for i in found])


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def dwh(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Warehouse]:
    """A warehouse on a local root, or on the session's S3 server with its settings passed explicitly (the
    Spark workers started before the test, so only options reach them, not this process's environment)."""
    if request.param == "local":
        wh = Warehouse.open(catalog=f"sqlite:///{tmp_path / 'c.db'}", root=str(tmp_path / "warehouse"))
    else:
        s3: S3Server = request.getfixturevalue("s3_server")
        bucket: str = request.getfixturevalue("s3_bucket")
        for name, value in s3.env().items():  # for this process's own looks at the bucket (storage_files)
            monkeypatch.setenv(name, value)
        options = {"endpoint_url": s3.endpoint, "region": "us-east-1", "access_key_id": s3.access_key,
                   "secret_access_key": s3.secret_key}
        wh = Warehouse.open(catalog=f"sqlite:///{tmp_path / 'c.db'}", root=f"s3://{bucket}/t_{uuid.uuid4().hex[:12]}",
                            storage_options=options)
    make_tables(wh)
    yield wh
    wh.close()


def test_format_writes_and_reads_a_snapshot(any_spark: SparkSession, dwh: Warehouse) -> None:
    txn_spark.register(any_spark)
    txn_spark.register(any_spark)  # idempotent
    options = warehouse_options(dwh)
    t = dwh.begin()
    _days(any_spark, {"2024-01-01": [1, 2], "2024-01-02": [3]}).write.format("airflow_txn").options(**options) \
        .option("tid", t.tid).mode("append").save("sales.events")
    parts = dwh.transaction_info(t.tid)["parts"]
    assert {p["partition"]["day"] for p in parts} == {"2024-01-01", "2024-01-02"}  # a part per task and partition
    assert all(p["path"].rsplit("/", 1)[-1].startswith(f"p-{t.tid}-") for p in parts)  # plain files (D8)
    assert ids(dwh.read("sales.events")) == []  # staged, not visible
    own = any_spark.read.format("airflow_txn").options(**options).option("tid", t.tid).load("sales.events")
    assert sorted(r.id for r in own.collect()) == [1, 2, 3]
    csn = t.commit()
    with dwh.begin() as later:
        later.append("sales.events", events([9]))
    at_csn = any_spark.read.format("airflow_txn").options(**options).option("csn", csn).load("sales.events")
    assert rows_of(at_csn) == [(1, "2024-01-01", 1.0), (2, "2024-01-01", 2.0), (3, "2024-01-02", 3.0)]
    assert at_csn.schema["day"].dataType.simpleString() == "string"  # the partition column, typed
    latest = any_spark.read.format("airflow_txn").options(**options).load("sales.events")
    assert sorted(r.id for r in latest.collect()) == [1, 2, 3, 9]


def test_listed_partitions_read_only_their_parts(any_spark: SparkSession, dwh: Warehouse) -> None:
    """Pruned on the driver: with the files of day 1 gone from storage, a read of days 2 and 3 never opens
    them and succeeds, while a read of the whole table fails on the missing file. A Spark filter on the
    partition column gives the right rows (Spark evaluates it; not pushed down on Spark 4.3, datasource.py)."""
    with dwh.begin() as t:
        txn_spark.write(_days(any_spark, {"2024-01-01": [1], "2024-01-02": [2], "2024-01-03": [3]}), t,
                        "sales.events", via="datasource")
    df = txn_spark.read(any_spark, dwh, "sales.events", via="datasource")
    assert rows_of(df.filter("day in ('2024-01-02', '2024-01-03') and id > 2")) == [(3, "2024-01-03", 3.0)]
    for part in dwh.transaction_info(t.tid)["parts"]:
        if part["partition"] == {"day": "2024-01-01"}:
            dwh.runtime.storage.delete_part("sales/events", part["path"])
    later = txn_spark.read(any_spark, dwh, "sales.events", via="datasource",
                           partitions=[{"day": "2024-01-02"}, {"day": "2024-01-03"}])
    assert rows_of(later) == [(2, "2024-01-02", 2.0), (3, "2024-01-03", 3.0)]
    with pytest.raises(Exception, match=r"missing or unreadable|PYTHON_EXCEPTION"):  # Connect shortens it
        df.collect()


def test_a_filtered_query_does_not_prune_later_queries_of_the_same_frame(any_spark: SparkSession,
                                                                        dwh: Warehouse) -> None:
    """Spark plans every query of a DataFrame with one reader object: pruning its part list in pushFilters
    left the unfiltered DataFrame's count at 1 of 3 after a filtered count (locally and on Spark Connect)."""
    with dwh.begin() as t:
        txn_spark.write(_days(any_spark, {"2024-01-01": [1], "2024-01-02": [2], "2024-01-03": [3]}), t,
                        "sales.events", via="datasource")
    df = txn_spark.read(any_spark, dwh, "sales.events", via="datasource")
    assert df.count() == 3
    assert df.filter("day = '2024-01-02'").count() == 1
    assert df.count() == 3 and len(df.collect()) == 3


def test_write_through_the_data_source_appends_overwrites_and_retries(
        any_spark: SparkSession, dwh: Warehouse) -> None:
    with dwh.begin() as t:
        assert txn_spark.write(_days(any_spark, {"2024-01-01": [1, 2], "2024-01-02": [3]}), t, "sales.events",
                               via="datasource") == 3
        assert txn_spark.write(frame(any_spark, ACCOUNTS, [(1, 10)]), t, "sales.accounts", via="datasource") == 1
    t = dwh.begin()
    day2 = [{"day": "2024-01-02"}]
    assert txn_spark.write(_days(any_spark, {"2024-01-02": [7]}), t, "sales.events", mode="overwrite",
                           partitions=day2, key=KEY, via="datasource") == 1
    # the task is retried: its second try replaces the first (invariant 7), nothing doubles
    assert txn_spark.write(_days(any_spark, {"2024-01-02": [7, 8]}), t, "sales.events", mode="overwrite",
                           partitions=day2, key=KEY, via="datasource") == 2
    assert txn_spark.write(frame(any_spark, ACCOUNTS, [(5, 50)]), t, "sales.accounts", mode="overwrite",
                           via="datasource") == 1
    t.commit()
    assert sorted(ids(dwh.read("sales.events"))) == [1, 2, 7, 8]
    assert ids(dwh.read("sales.accounts")) == [5]
    back = txn_spark.read(any_spark, dwh, "sales.events", via="datasource", partitions=[{"day": "2024-01-01"}])
    assert sorted(r.id for r in back.collect()) == [1, 2]


def test_bad_input_is_refused_before_anything_is_staged(any_spark: SparkSession, dwh: Warehouse) -> None:
    """Typed errors, raised in this process (not as a Spark exception); catalog and storage as they were; the
    transaction still usable."""
    dwh.create_table("sales.strict", pa.schema([("id", pa.int64()), pa.field("balance", pa.int64(), nullable=False)]))
    with dwh.begin() as t:
        t.append("sales.events", events([1]))
    t = dwh.begin()
    before = state(dwh, dwh.config.root)
    with pytest.raises(SchemaMismatchError, match="missing column"):
        txn_spark.write(any_spark.createDataFrame([(1,)], "id long"), t, "sales.events", via="datasource")
    with pytest.raises(TableNotFoundError):
        txn_spark.write(events_df(any_spark, [2]), t, "sales.nope", via="datasource")
    with pytest.raises(SchemaMismatchError, match="null"):  # found by the Spark task before it writes anything
        txn_spark.write(any_spark.createDataFrame([(1, 5), (2, None)], "id long, balance long").coalesce(1), t,
                        "sales.strict", via="datasource")
    with pytest.raises(SchemaMismatchError, match="also holds rows of"):  # rows outside the listed partitions
        txn_spark.write(_days(any_spark, {"2024-01-01": [2], "2024-01-05": [3]}), t, "sales.events", mode="overwrite",
                        partitions=[{"day": "2024-01-01"}], via="datasource")
    via_refused = r"^via must be one of 'auto', 'native', 'datasource', got 'hadoop'$"
    with pytest.raises(InvalidNameError, match=via_refused):  # an InvalidOptionError, an InvalidNameError as before
        txn_spark.write(events_df(any_spark, [2]), t, "sales.events", via="hadoop")  # type: ignore[arg-type]
    bad_options: list[tuple[str, Callable[[], object]]] = [  # issue 31, item 7: every entry point taking one
        ("mode must be one of 'append', 'overwrite', got 'rewrite'",
         lambda: txn_spark.write(events_df(any_spark, [2]), t, "sales.events", mode="rewrite")),
        ("mode must be one of 'append', 'overwrite', got 'upsert'",
         lambda: txn_spark.write(events_df(any_spark, [2]), t, "sales.events", mode="upsert", via="datasource")),
        (via_refused, lambda: txn_spark.read(any_spark, dwh, "sales.events", via="hadoop")),
        (via_refused, lambda: txn_spark.delete(any_spark, t, "sales.events", "id = 1", via="hadoop")),
        (via_refused, lambda: txn_spark.update(any_spark, t, "sales.events", "id = 1", {"id": 3}, via="hadoop")),
        (via_refused, lambda: txn_spark.compact(any_spark, dwh, "sales.events", via="hadoop")),
    ]  # (ill-typed on purpose: a caller's bad text)
    for message, call in bad_options:
        with pytest.raises(InvalidOptionError, match=message):
            call()
    assert state(dwh, dwh.config.root) == before
    assert t.state == "active"
    txn_spark.write(events_df(any_spark, [2]), t, "sales.events", via="datasource")
    t.commit()
    assert sorted(ids(dwh.read("sales.events"))) == [1, 2]


def test_a_refused_row_in_one_task_leaves_no_part_and_no_file_of_the_statement(
        any_spark: SparkSession, dwh: Warehouse) -> None:
    """Two tasks: one writes its good rows, the other finds a null in a non-nullable column and fails the job.
    Nothing is registered and the transaction stays usable. The good task's file is deleted by abort() or the
    client's sweep (which waits a few seconds for a task still finishing); one written later still would be an
    orphan named after the transaction, which vacuum removes once the transaction is over: checked after it."""
    dwh.create_table("sales.strict", pa.schema([("id", pa.int64()), pa.field("balance", pa.int64(), nullable=False)]))
    t = dwh.begin()
    rows = any_spark.createDataFrame([(1, 5), (2, None)], "id long, balance long").repartition(2, "id")
    with pytest.raises(SchemaMismatchError, match="null"):
        txn_spark.write(rows, t, "sales.strict", via="datasource")
    assert dwh.transaction_info(t.tid)["parts"] == [] and t.state == "active"
    t.append("sales.strict", pa.table({"id": [3], "balance": [7]}))
    t.commit()
    assert ids(dwh.read("sales.strict")) == [3]
    dwh.vacuum(retention_seconds=0)
    [part] = dwh.transaction_info(t.tid)["parts"]
    kept = [f for f in storage_files(dwh.config.root) if f.startswith("sales/strict/")]
    assert kept == [f"sales/strict/{part['path']}"]


def test_auto_takes_the_data_source_on_an_object_store_root_or_spark_connect(
        any_spark: SparkSession, dwh: Warehouse) -> None:
    with dwh.begin() as t:
        assert txn_spark.write(events_df(any_spark, [1, 2]), t, "sales.events") == 2
    assert sorted(r.id for r in txn_spark.read(any_spark, dwh, "sales.events").collect()) == [1, 2]
    files = storage_files(dwh.config.root)
    if "://" in dwh.config.root or is_connect(any_spark):  # the data source: plain part files, no write dir
        assert all(Path(f).name.startswith("p-") and Path(f).suffix == ".parquet" for f in files), files
    else:  # Spark's native writer: a write dir with its sidecar
        assert any(f.endswith("_airflow_txn.json") for f in files), files


def test_writing_needs_a_transaction(any_spark: SparkSession, dwh: Warehouse) -> None:
    txn_spark.register(any_spark)
    with pytest.raises(Exception, match="writing needs the transaction"):
        events_df(any_spark, [1]).write.format("airflow_txn").options(**warehouse_options(dwh)).mode("append") \
            .save("sales.events")
    assert ids(dwh.read("sales.events")) == []


# -- copy-on-write and compaction through the data source (any root, Spark Connect) --------------------------------
def _three_commits(wh: Warehouse) -> list[int]:
    """Three committed appends (ids 1-2 and 3 on day 1, 4-5 on day 2): the CSNs."""
    csns = []
    for rows, day in (([1, 2], "2024-01-01"), ([3], "2024-01-01"), ([4, 5], "2024-01-02")):
        with wh.begin() as t:
            t.append("sales.events", events(rows, day=day))
        csns.append(wh.transaction_info(t.tid)["commit_csn"])
    return csns


def test_delete_and_update_rewrite_only_the_parts_holding_matches(any_spark: SparkSession, dwh: Warehouse) -> None:
    from pyspark.sql import functions as F

    _three_commits(dwh)
    with dwh.begin() as t:
        assert txn_spark.delete(any_spark, t, "sales.events", F.col("id").isin(2, 5), via="datasource") == 2
        assert txn_spark.update(any_spark, t, "sales.events", "id = 3", {"value": F.col("value") * 10,
                                                                         "day": "2024-01-02"}, via="datasource") == 1
        assert txn_spark.delete(any_spark, t, "sales.events", "id > 100", via="datasource") == 0
        own = txn_spark.read(any_spark, dwh, "sales.events", txn=t, via="datasource")
        assert rows_of(own) == [(1, "2024-01-01", 1.0), (3, "2024-01-02", 10.0), (4, "2024-01-02", 1.0)]
    parts = dwh.transaction_info(t.tid)["parts"]
    removed = [p for p in parts if p["role"] == "removed"]
    assert len(removed) == 3  # day 1's two parts and day 2's, never a part without a match
    assert all(p["path"].rsplit("/", 1)[-1].startswith(f"p-{t.tid}-") for p in parts if p["role"] == "created")
    assert rows_of(txn_spark.read(any_spark, dwh, "sales.events", via="datasource")) == [
        (1, "2024-01-01", 1.0), (3, "2024-01-02", 10.0), (4, "2024-01-02", 1.0)]


def test_copy_on_write_refuses_bad_input_before_any_job(any_spark: SparkSession, dwh: Warehouse) -> None:
    _three_commits(dwh)
    t = dwh.begin()
    before = state(dwh, dwh.config.root)
    with pytest.raises(SchemaMismatchError, match="cannot evaluate"):
        txn_spark.delete(any_spark, t, "sales.events", "nope = 1", via="datasource")
    with pytest.raises(SchemaMismatchError, match="unknown column"):
        txn_spark.update(any_spark, t, "sales.events", "id = 1", {"nope": 1}, via="datasource")
    assert state(dwh, dwh.config.root) == before and t.state == "active"
    t.rollback()


def test_spark_compaction_through_the_data_source_keeps_every_snapshot(any_spark: SparkSession,
                                                                       dwh: Warehouse) -> None:
    """Day 1's two parts become one plain part file named after the merge; every snapshot reads what it read."""
    csns = _three_commits(dwh)
    before = {csn: rows_of(txn_spark.read(any_spark, dwh, "sales.events", csn=csn, via="datasource")) for csn in csns}
    report = txn_spark.compact(any_spark, dwh, "sales.events", via="datasource")
    assert report["merged"] == 1 and report["parts_before"] == 3 and report["parts_after"] == 2
    [merge] = report["merges"]
    merged = [p for p in dwh.transaction_info(merge["tid"])["parts"] if p["role"] == "created"]
    assert [p["path"].rsplit("/", 1)[-1].startswith(f"p-{merge['tid']}-") for p in merged] == [True]
    assert merged[0]["rows"] == 3
    for csn, rows in before.items():
        assert rows_of(txn_spark.read(any_spark, dwh, "sales.events", csn=csn, via="datasource")) == rows
    assert rows_of(txn_spark.read(any_spark, dwh, "sales.events", via="datasource")) == before[csns[-1]]
    dwh.vacuum(retention_seconds=0)  # the merge left nothing unregistered behind
    assert sorted(ids(dwh.read("sales.events"))) == [1, 2, 3, 4, 5]


def test_a_read_the_data_source_cannot_plan_fails_at_read_with_the_error_it_is(any_spark: SparkSession,
                                                                               dwh: Warehouse) -> None:
    """Issue 31: the data source planned its read at the first action, where a SnapshotTooOldError or a tag not
    holding the table surfaced as a raw AnalysisException; the native path raises the typed error at read().
    Now the data source checks the read when Spark asks its schema (at load()), and read() raises it typed."""
    csns = []
    for i in (1, 2):
        t = dwh.begin()
        t.append("sales.accounts", accounts({i: i}))
        csns.append(t.commit())
    first = csns[0]
    dwh.vacuum(retention_seconds=0)  # the first snapshot is below the horizon now
    with pytest.raises(SnapshotTooOldError):
        txn_spark.read(any_spark, dwh, "sales.accounts", csn=first, via="datasource")
    dwh.tag("only-accounts", tables=["sales.accounts"])
    with pytest.raises(TableNotInTagError):
        txn_spark.read(any_spark, dwh, "sales.events", tag="only-accounts", via="datasource")
    assert ids(txn_spark.read(any_spark, dwh, "sales.accounts", tag="only-accounts", via="datasource")
               .toArrow()) == [1, 2]


def test_a_data_source_read_or_write_that_cannot_be_planned_fails_at_the_call(any_spark: SparkSession,
                                                                               dwh: Warehouse) -> None:
    """Issue 31, item 4: the client plans a data-source read or write with the core's two plans, so a read of a
    closed transaction's view or of partitions the table does not have, and a write whose partitions do not
    fit, raise the airflow_txn error at read()/write() (before: at the first action, inside a Spark error), as
    the native path does; nothing was recorded or staged."""
    closed = dwh.begin()
    closed.rollback()
    with pytest.raises(TransactionClosedError):
        txn_spark.read(any_spark, dwh, "sales.accounts", txn=closed, via="datasource")
    with pytest.raises(InvalidNameError, match="partition"):
        txn_spark.read(any_spark, dwh, "sales.events", partitions=[{"nope": 1}], via="datasource")
    t = dwh.begin()
    with pytest.raises(InvalidNameError, match="partition"):
        txn_spark.write(events_df(any_spark, [1]), t, "sales.events", mode="overwrite", partitions=[{"nope": 1}],
                        via="datasource")
    assert t.state == "active" and dwh.transaction_info(t.tid)["parts"] == []
    t.rollback()


def test_a_value_its_column_cannot_hold_is_named_by_its_column(spark: SparkSession, swh: Warehouse) -> None:
    """A data-source write of a Spark `short` 256 into a uint8 column said only `Integer value 256 not in range:
    0 to 255` (the whole batch was cast at once): the refusal names the column now (found by the types helper)."""
    swh.create_table("s.small", pa.schema([("id", pa.int64()), ("u", pa.uint8())]))
    t = swh.begin()
    frame = spark.createDataFrame([(1, 256)], "id long, u short")
    with pytest.raises(SchemaMismatchError, match=r"column 'u' \(uint8\)"):
        txn_spark.write(frame, t, "s.small", via="datasource")
    t.rollback()
