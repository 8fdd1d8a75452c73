"""Staging a DataFrame: Spark's own Parquet writer writes straight into a new write dir, then the
driver registers one part per partition directory in the transaction.

    check the DataFrame's schema ─► new write dir `w-<32 hex>` ─► Spark job: df.write.partitionBy(...)
    (nothing written on a mismatch)  (sidecar first)                 .parquet(write dir), lease kept alive
      ─► each `<col>=<value>` leaf is one part: rows from its Parquet footers (no data on the driver)
      ─► ONE catalog transaction (adapter.WritePlan.commit): fence stale attempts, compensate the key,
         take removal locks (overwrite), record the read set, register the parts

What the statement replaces is the core's decision (adapter.open_write, the rule the core's own statements
follow); this module only runs the Spark job and hands the written parts back.

A write that fails or is rejected deletes its write dir and changes nothing in the catalog. A Spark
job that fails leaves the transaction usable (the task may be retried); a conflict or a catalog
failure marks it failed, as for the core's writes. A driver that dies mid-job leaves only an
unregistered write dir, which vacuum deletes once the transaction is over (invariant 8).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from airflow_txn.core.adapter import TableView, WritePlan, open_write
from airflow_txn.core.transaction import Transaction
from airflow_txn.errors import SchemaMismatchError
from airflow_txn.model import evolution
from airflow_txn.model.options import SAVE_MODES, SaveModeName, Via, ViaName, WriteMode
from airflow_txn.model.results import PartitionSpec
from airflow_txn.spark import evolve, layout
from airflow_txn.spark import via as via_module
from airflow_txn.spark.types import check_frame_schema, field_id_metadata, write_guards

_GUARD = "airflow_txn refused a row: "
_GUARD_RE = re.compile(re.escape(_GUARD) + r"(null|empty|range|fraction)#(\d+)")


def write(df: DataFrame, txn: Transaction, table: str, mode: WriteMode | SaveModeName = WriteMode.APPEND,
          partitions: PartitionSpec | None = None, key: str | None = None, via: Via | ViaName = Via.AUTO,
          merge_schema: bool = False) -> int:
    """Stage `df` in `table` within `txn`; returns the number of rows staged.

    mode="append" adds parts (never conflicts); mode="overwrite" replaces the whole table, or only
    the listed `partitions` (then every row must belong to one of them). `key` defaults to the
    transaction's default key (a retried task replaces what its failed try staged). `via`: "native"
    (Spark's Parquet writer; the root must be a path every executor reaches), "datasource" (the
    "airflow_txn" data source: any root, Spark Connect) or "auto" (the data source for an object-store
    root or a Spark Connect session; via.py). A bad `mode` or `via` raises InvalidOptionError before anything runs.

    The DataFrame must match the table's schema as the transaction sees it (its own changes included: add a column
    in one statement, write it in the next). `merge_schema=True` first adds the DataFrame's columns the table lacks
    (nullable) and widens the columns it holds in a wider type the core allows, in the same statement under the
    same key (evolve.py); without it a mismatch is SchemaMismatchError, nothing staged.
    """
    save_mode = WriteMode.parse(mode, "mode", SAVE_MODES)
    way = via_module.choose(df.sparkSession, txn.warehouse, via)
    if evolution.merge_flag(merge_schema):
        evolve.merge_schema(txn, table, df.schema, key)
    plan = open_write(txn, table, save_mode, partitions, key=key, what=f"spark {save_mode} of {table}")
    if way is via_module.DATASOURCE:
        return via_module.write(df, plan)
    return stage_frame(plan, conform(df, plan.view))


def conform(df: DataFrame, info: TableView) -> DataFrame:
    """`df`'s columns in the table's order, checked against the table (SchemaMismatchError listing
    every difference, before anything is written) and guarded against values the table refuses; each stored
    column carries its column id as Spark's `parquet.field.id` metadata, which Spark's Parquet writer writes as
    the file's field id (spark.sql.parquet.fieldId.write.enabled, true by default), as the core's files carry it
    (docs/DESIGN.md, D27; top-level columns: Spark takes nested ids only from a nested schema's own metadata)."""
    check_frame_schema(df.schema, info.schema, str(info.name))
    got = {f.name: f for f in df.schema.fields}
    projection = _guarded_projection(info, {name: got[name].nullable for name in info.schema.names})
    return df.select(*[_with_field_id(F.expr(expr), field, info.partition_by)
                       for expr, field in zip(projection, info.schema, strict=True)])


def _with_field_id(column: Column, field: pa.Field, partition_by: Sequence[str]) -> Column:
    if field.name in partition_by:  # never stored in part files
        return column.alias(field.name)
    return column.alias(field.name, metadata=field_id_metadata(field))


def quote(name: str) -> str:
    """A column name as a Spark SQL identifier (dots and backticks included)."""
    return "`" + name.replace("`", "``") + "`"


def column_of(name: str) -> Column:
    """A top-level column by its exact name."""
    return F.col(quote(name))


def _guarded_projection(info: TableView, nullable: Mapping[str, bool]) -> list[str]:
    """The table's columns as SQL expressions that fail the Spark job on a row the table refuses,
    instead of scanning the data beforehand: a null in a non-nullable column, or an empty string in
    a string partition column (Spark would name its directory like null's: it would come back null).
    The messages name the column by position, `_refused` names it properly."""
    projection = []
    for index, field in enumerate(info.schema):
        column = quote(field.name)
        guards, expr = write_guards(field, column, field.name in info.partition_by)
        for condition, reason in guards:
            expr = f"CASE WHEN {condition} THEN raise_error('{_GUARD}{reason}#{index}') ELSE {expr} END"
        if nullable[field.name] and not field.nullable:
            expr = f"CASE WHEN {column} IS NULL THEN raise_error('{_GUARD}null#{index}') ELSE {expr} END"
        if field.name in info.partition_by and (pa.types.is_string(field.type) or pa.types.is_large_string(field.type)):
            refused = f"{column} = '' OR {column} = '{layout.HIVE_NULL}'"
            expr = f"CASE WHEN {refused} THEN raise_error('{_GUARD}empty#{index}') ELSE {expr} END"
        projection.append(expr)
    return projection


def _refused(error: Exception, info: TableView) -> SchemaMismatchError | None:
    match = _GUARD_RE.search(str(error))
    if match is None:
        return None
    name = info.schema.names[int(match.group(2))]
    if match.group(1) == "null":
        reason = f"column {name!r} of {info.name} is not nullable but a row holds null"
    elif match.group(1) in ("range", "fraction"):
        what = "out of its range" if match.group(1) == "range" else "a finer fraction of a second"
        reason = f"column {name!r} of {info.name} is {info.schema.field(name).type} and a row holds a value {what}"
    else:
        reason = (f"partition column {name!r} of {info.name} holds an empty string or {layout.HIVE_NULL!r}, which "
                  "Spark would store as null (write such a value with the core or via='datasource')")
    return SchemaMismatchError(f"nothing was staged: {reason}")


def stage_frame(plan: WritePlan, frame: DataFrame) -> int:
    """Write `frame` (conformed) into a new write dir with Spark and commit its parts as the statement `plan`;
    returns the rows staged. On any failure the write dir is deleted (a REWRITE whose chosen parts a background
    merge took meanwhile raises MergedAwayError, the transaction still usable: WritePlan.commit)."""
    info = plan.view
    zone = None
    if layout.zoned_partitions(info.schema, info.partition_by):  # asking Spark costs a round trip
        zone = layout.check_zone(frame.sparkSession.conf.get("spark.sql.session.timeZone") or "UTC",
                                 info.schema, info.partition_by)
    write_dir = plan.write_dir or plan.new_write_dir(writer="spark")  # a rewrite's comes with its choice
    try:
        with plan.keep_alive():
            _run_job(frame, info, write_dir.location)
        written = layout.written_parts(write_dir.location, write_dir.relative, info.schema, info.partition_by, zone)
        rows = plan.commit(written)
    except BaseException:
        plan.discard(write_dir)
        raise
    if not written:  # nothing to register: the empty write dir is no part
        plan.discard(write_dir)
    return rows


def _run_job(frame: DataFrame, info: TableView, write_dir: Path) -> None:
    writer = frame.write.mode("append")
    if info.partition_by:
        writer = writer.partitionBy(*info.partition_by)
    try:
        writer.parquet(spark_path(write_dir))
    except Exception as exc:
        refused = _refused(exc, info)
        if refused is None:
            raise
        raise refused from exc


def spark_path(path: Path) -> str:
    """A local path as Spark reads and writes it (Hadoop takes the characters after `file://` literally)."""
    return "file://" + str(path.resolve())
