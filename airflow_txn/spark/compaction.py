"""Spark-executed compaction: the core's merge protocol (airflow_txn/core/compaction.py) with Spark writing
the merged files, so the rows of a merge never pass through the driver's Python process.

    import airflow_txn.spark as txn_spark
    txn_spark.compact(spark, wh, "shop.orders", partitions=[{"day": "2024-01-01"}])

Only step 2 (write) differs from `wh.compact`: the core plans the groups, begins each merge as a
transaction of its own (lease kept alive while Spark runs) and swaps the sources for the merged
part in one catalog transaction, yielding to any user transaction that took a source. The writer
here reads exactly the group's source files (`spark.read.parquet(file, ...)`, the data columns only:
part files never hold the partition columns), coalesces them to about `target_file_bytes` per file
and has Spark's Parquet writer write them into the merge's new write dir (sidecar first), laid out
like the core's write dirs: `<col>=<value>/p-<32 hex>/<Spark's part files>`, timestamps as INT64
microseconds (not Spark's default INT96, which the core's pyarrow reader misreads outside 1677-2262).
The row count Spark wrote is read back from the Parquet footers; the swap refuses a part whose
count differs. Spark reaches the core through the compaction plan, in three calls: adapter.open_compaction (the
core plans the merges), CompactionPlan.run (the core runs and swaps each) and, per merge, MergePlan.new_write_dir
(where its files go); the data-source way reads the merge's read plan and finds its one file by the merge's
statement id instead.

That is the native way. Where the executors cannot reach the root by path (an object store, Spark Connect:
`via`), the "airflow_txn" data source reads exactly the sources (option `parts`, at the merge's snapshot) and
one Spark task writes their rows as ONE plain part file of the merge through pyarrow.fs (option `merge`: its
footer names the merge, nothing registers it); the client finds it by its statement id and the core swaps it
in the same way (via.write_merge).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from airflow_txn.core.adapter import (
    DEFAULT_TARGET_FILE_BYTES,
    MergePlan,
    MergeWrite,
    Progress,
    StoredTable,
    TableView,
    WrittenPart,
    open_compaction,
)
from airflow_txn.core.warehouse import Warehouse
from airflow_txn.errors import SchemaMismatchError
from airflow_txn.model.options import Via, ViaName
from airflow_txn.model.results import CompactionReport, PartitionSpec
from airflow_txn.spark import layout
from airflow_txn.spark import via as via_module
from airflow_txn.spark.frames import _literal
from airflow_txn.spark.settings import temporary_setting
from airflow_txn.spark.types import field_id_metadata, same_storage, to_spark_schema, to_spark_type
from airflow_txn.spark.via import is_connect
from airflow_txn.spark.writer import column_of, spark_path

JOB_DESCRIPTION = "spark.job.description"
"""The local property Spark's UI shows as a job's description (SparkContext.setJobDescription)."""
TIMESTAMP_TYPE = "spark.sql.parquet.outputTimestampType"
"""Spark writes TimestampType as INT96 by default, which pyarrow reads as nanoseconds: values outside
1677-2262 would come back wrong to the core's reader. Merged parts are written as TIMESTAMP_MICROS."""


def compact(spark: SparkSession, wh: Warehouse, table: str, partitions: PartitionSpec | None = None,
            target_file_bytes: int = DEFAULT_TARGET_FILE_BYTES, min_parts: int = 2,
            progress: Progress | None = None, via: Via | ViaName = Via.AUTO) -> CompactionReport:
    """`wh.compact(...)` with Spark writing each merged part; returns the same CompactionReport.

    `via` as for airflow_txn.spark.write: "native" (Spark reads the sources' files and writes the merged part
    into a write dir by path: the root must be a path every executor reaches), "datasource" (the "airflow_txn"
    data source reads the sources and one Spark task writes the merged part as one plain file through
    pyarrow.fs: any root, Spark Connect), "auto" (the data source for an object-store root or Spark Connect).
    Refuses (before any merge begins) a table with a column Spark cannot write back unchanged
    (e.g. a timestamp in seconds or nanoseconds, an unsigned integer): compact it with `wh.compact`.
    """
    plan = open_compaction(wh, table, partitions, target_file_bytes, min_parts)  # before Spark is asked anything
    way = via_module.choose(spark, wh, via)
    check_writable(plan.table)
    writer = _datasource_writer(spark, wh) if way is via_module.DATASOURCE else spark_writer(spark, target_file_bytes)
    return plan.run(writer, progress)


def _datasource_writer(spark: SparkSession, wh: Warehouse) -> MergeWrite:
    """The merge writer of the data-source way: the sources read through their read plan, ONE plain file written."""
    return lambda task: via_module.write_merge(_sources(spark, wh, task), wh, task)


def _sources(spark: SparkSession, wh: Warehouse, task: MergePlan) -> DataFrame:
    """The rows of the merge's sources, read through the data source at the merge's snapshot (its read plan)."""
    return via_module.read_planned(spark, wh, task.read_plan)


def check_writable(info: TableView | StoredTable) -> None:
    """SchemaMismatchError naming the first data column whose values Spark would not write back unchanged."""
    for field in info.schema:
        if field.name in info.partition_by:
            continue  # never stored in part files
        try:
            ok = same_storage(to_spark_type(field.type), field.type)
        except SchemaMismatchError:
            ok = False
        if not ok:
            raise SchemaMismatchError(
                f"column {field.name!r} of {info.name} is {field.type}, which Spark cannot write back unchanged; "
                "compact this table with wh.compact (the pyarrow engine) instead"
            )


def spark_writer(spark: SparkSession, target_file_bytes: int = DEFAULT_TARGET_FILE_BYTES) -> MergeWrite:
    """The merge writer a compaction plan runs (adapter.CompactionPlan.run): one Spark job per merge."""
    return lambda task: write_group(spark, task, target_file_bytes)


def write_group(spark: SparkSession, task: MergePlan, target_file_bytes: int) -> WrittenPart:
    """Spark reads the group's source files and writes them into a new write dir; returns its part.
    On any failure the write dir is deleted (the core then rolls the merge back)."""
    info = task.view
    write_dir = task.new_write_dir(engine="spark")
    try:
        paths = [_literal(info.location / source.path / name) for source in task.sources for name in source.files]
        files = output_files(task.size_bytes, target_file_bytes)
        what = (f"airflow_txn compaction of {info.name} {task.partition_key or '(table)'}: "
                f"{len(task.sources)} parts into {files} file(s), merge {task.tid}")
        with _described(spark, what), _micros(spark):
            frame = spark.read.schema(_stored_schema(info)).parquet(*paths)
            frame = frame.select(*[column_of(f.name).alias(f.name, metadata=field_id_metadata(f))
                                   for f in info.schema if f.name not in info.partition_by])  # the ids, as written
            frame.coalesce(files).write.mode("append").parquet(spark_path(write_dir.location))
        written = layout.written_parts(write_dir.location, write_dir.relative, info.schema, (), None)
    except BaseException:
        task.discard(write_dir)
        raise
    if not written:  # the sources held no rows: an empty part (the swap checks the count)
        return WrittenPart(write_dir.relative, (), 0, 0)
    ((_, part),) = written
    return part


def output_files(source_bytes: int, target_file_bytes: int) -> int:
    """How many files a merge writes: the sources' bytes in files of about `target_file_bytes`."""
    return max(1, math.ceil(source_bytes / target_file_bytes))


@contextmanager
def _described(spark: SparkSession, text: str) -> Iterator[None]:
    """The Spark jobs run inside carry `text` as their description in Spark's UI (a classic session's; a Spark
    Connect session has no job description to set: its jobs are found by the session's tags)."""
    if is_connect(spark):
        yield
        return
    context = spark.sparkContext
    previous = context.getLocalProperty(JOB_DESCRIPTION)
    context.setLocalProperty(JOB_DESCRIPTION, text)
    try:
        yield
    finally:
        context.setLocalProperty(JOB_DESCRIPTION, previous)  # type: ignore[arg-type]  # None unsets it


def _micros(spark: SparkSession) -> AbstractContextManager[None]:
    """Timestamps written as INT64 microseconds (TIMESTAMP_TYPE) while inside; the session's own
    setting is restored after (it is a session-wide runtime setting: merges run one at a time)."""
    return temporary_setting(spark, TIMESTAMP_TYPE, "TIMESTAMP_MICROS")


def _stored_schema(info: TableView) -> Any:
    """The Spark schema of what part files store: the table's columns minus the partition columns."""
    return to_spark_schema(pa.schema([f for f in info.schema if f.name not in info.partition_by]))
