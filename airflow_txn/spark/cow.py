"""Copy-on-write delete and update executed by Spark: only the parts holding matching rows are
rewritten (read, changed and written back by Spark jobs; nothing but part ids and counts reaches
the driver), and the rewritten parts replace them in one registration, taking their removal locks
(invariant 6: a concurrent writer of the same parts gets a SerializationError).

    job 1: scan the visible parts (only the columns `where` needs) -> matching rows per part id
    job 2: scan the affected parts -> drop (delete) or change (update) the matching rows -> writer.stage_frame

The statement is the core's, in three calls: adapter.open_write(..., REWRITE) lists the parts the statement sees
(both jobs read exactly those, through the plan), WritePlan.replacing checks the chosen ones (and, for Spark's
writer by path, makes the write dir), WritePlan.commit registers the rewritten parts with the read set.

A background merge (compaction.py) that swaps out some of the chosen parts while the jobs run makes
the registration refuse them (MergedAwayError): the statement then runs again on a fresh choice, up to
MERGE_RETRIES runs, and the transaction never notices.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from airflow_txn.core.adapter import REWRITE, PartView, StoredTable, WritePlan, open_write
from airflow_txn.core.transaction import Transaction
from airflow_txn.errors import InvalidNameError, MergedAwayError, SchemaMismatchError
from airflow_txn.model.options import Via, ViaName
from airflow_txn.spark import via as via_module
from airflow_txn.spark.frames import plan_frame
from airflow_txn.spark.types import PART_ID, to_spark_schema, to_spark_type
from airflow_txn.spark.writer import column_of, conform, stage_frame
from airflow_txn.telemetry import logs

log = logs.get_logger(__name__)


def delete(spark: SparkSession, txn: Transaction, table: str, where: Column | str, key: str | None = None,
           via: Via | ViaName = Via.AUTO) -> int:
    """Delete the rows matching `where` (a Column or a SQL condition); returns the number deleted. `via` as
    for airflow_txn.spark.write (the data source on an object-store root or Spark Connect)."""
    return _rewrite(spark, txn, table, where, None, key, via)


def update(spark: SparkSession, txn: Transaction, table: str, where: Column | str, set: Mapping[str, object],
           key: str | None = None, via: Via | ViaName = Via.AUTO) -> int:
    """Set columns (to Columns or Python values, cast to the column's type) in the rows matching
    `where`; returns the number of rows updated. `via` as for delete."""
    if not isinstance(set, Mapping) or not set:
        raise InvalidNameError("set must be a non-empty dict {column: value or Column}")
    return _rewrite(spark, txn, table, where, set, key, via)


MERGE_RETRIES = 3
"""Runs of a statement whose chosen parts a background merge combined with others while its Spark
jobs ran (each run costs two Spark jobs); after the last the statement fails as a conflict."""


def _rewrite(spark: SparkSession, txn: Transaction, table: str, where: Column | str,
             assignments: Mapping[str, Any] | None, key: str | None, via: Via | ViaName) -> int:
    way = via_module.choose(spark, txn.warehouse, via)
    verb = "delete in" if assignments is None else "update of"
    what = f"spark {verb} {table}"
    plan = open_write(txn, table, REWRITE, key=key, what=what)
    info = plan.table
    if PART_ID in info.schema.names:
        raise SchemaMismatchError(f"{info.name} has a column named {PART_ID!r}, which Spark's copy-on-write uses "
                                  "for itself: use Transaction.delete/update")
    condition = _condition(spark, info, where)
    setters = None if assignments is None else _setters(spark, info, assignments)
    matched = F.coalesce(condition, F.lit(False))
    run = _Run(spark, txn, way)
    # a background merge may swap out parts this statement chose while its jobs run: the snapshot's
    # rows are the same, now in the merged part, so the statement runs again on a fresh choice
    for attempt in range(1, MERGE_RETRIES):
        try:
            return _rewrite_once(run, plan, matched, setters)
        except MergedAwayError as exc:
            log.info("%s runs again (%d of %d runs done): %s", what, attempt, MERGE_RETRIES, exc)
        plan = open_write(txn, table, REWRITE, key=key, what=what)
    try:
        return _rewrite_once(run, plan, matched, setters)
    except MergedAwayError as exc:
        cause = exc
    return plan.run(lambda: _give_up(what, cause))


@dataclass(frozen=True)
class _Run:
    """Where a statement's jobs read and write: Spark's own Parquet scan and writer by path (NATIVE), or the
    "airflow_txn" data source (DATASOURCE: any root, Spark Connect; via.py)."""

    spark: SparkSession
    txn: Transaction
    way: Via

    def parts(self, plan: WritePlan, parts: Sequence[PartView], with_part_id: bool = False) -> DataFrame:
        """The rows of exactly `parts`, as the statement's plan lists them (a part a background merge took meanwhile
        still holds its rows: its registration then raises MergedAwayError)."""
        if self.way is via_module.NATIVE:
            return plan_frame(self.spark, plan.read_plan(parts), with_part_id=with_part_id)
        # the statement's view: a newer attempt of its key sees again what older attempts replaced
        return via_module.read_planned(self.spark, self.txn.warehouse, plan.read_plan(parts), part_id=with_part_id)

    @property
    def writer(self) -> str | None:
        """Who writes the rewritten parts into a write dir by path (WritePlan.replacing); None: the data source."""
        return "spark" if self.way is via_module.NATIVE else None

    def stage(self, changed: DataFrame, plan: WritePlan) -> None:
        """Stage `changed` as the statement's parts in place of those `plan` replaces, in one registration."""
        if self.way is via_module.NATIVE:
            try:
                frame = conform(changed, plan.view)
            except BaseException:
                self.discard(plan)
                raise
            stage_frame(plan, frame)
            return
        via_module.write(changed, plan)

    @staticmethod
    def discard(plan: WritePlan) -> None:
        """Delete the write dir `plan` came with (WritePlan.replacing), if any: the statement failed before its
        files were written."""
        if plan.write_dir is not None:
            plan.discard(plan.write_dir)


def _give_up(what: str, cause: MergedAwayError) -> NoReturn:
    raise MergedAwayError(
        f"{what} ran {MERGE_RETRIES} times and each time a background merge combined parts it chose with "
        "others before it could register; nothing was staged and the transaction can only roll back "
        "(run compaction of this table less often, or not while it is being written)"
    ) from cause


def _rewrite_once(run: _Run, plan: WritePlan, matched: Column, setters: Mapping[str, Column] | None) -> int:
    """One run: choose the parts holding matches (job 1), rewrite them (job 2), register. Raises
    MergedAwayError, the transaction still usable, when a merge took some chosen parts meanwhile."""
    parts = plan.visible
    counts = {
        int(row[PART_ID]): int(row["count"])
        for row in run.parts(plan, parts, with_part_id=True).where(matched).groupBy(PART_ID).count().collect()
    } if parts else {}
    affected = [p for p in parts if p.id in counts]
    plan = plan.replacing([p.id for p in affected], writer=run.writer)
    if not affected:  # nothing to rewrite; registering nothing still replaces the key's earlier attempts
        plan.commit([])
        return 0
    try:
        changed = _changed(run.parts(plan, affected), matched, setters, plan.table.schema.names)
    except BaseException:
        run.discard(plan)
        raise
    run.stage(changed, plan)
    return sum(counts.values())


def _changed(rows: DataFrame, matched: Column, setters: Mapping[str, Column] | None, names: Sequence[str]) -> DataFrame:
    """The rewritten rows: without the matching ones (a delete), or with them changed (an update)."""
    if setters is None:
        return rows.where(~matched)
    return rows.select(*[F.when(matched, setters[n]).otherwise(column_of(n)).alias(n) if n in setters
                         else column_of(n) for n in names])


def _condition(spark: SparkSession, info: StoredTable, where: object) -> Column:
    """`where` as a Column, checked to be a boolean over the table's columns (before anything runs)."""
    if isinstance(where, str):
        where = F.expr(where)
    if not isinstance(where, Column):
        raise InvalidNameError(f"where must be a pyspark Column or a SQL condition string, got {type(where).__name__}")
    try:
        result = _empty_frame(spark, info).select(where.alias("m")).schema["m"].dataType
    except AnalysisException as exc:
        raise SchemaMismatchError(f"cannot evaluate {where} on {info.name}: {_first_line(exc)}") from exc
    if not isinstance(result, T.BooleanType):
        raise SchemaMismatchError(f"where {where} on {info.name} is {result.simpleString()}, not boolean")
    return where


def _setters(spark: SparkSession, info: StoredTable, assignments: Mapping[str, Any]) -> dict[str, Column]:
    setters: dict[str, Column] = {}
    empty = _empty_frame(spark, info)
    for name, value in assignments.items():
        if name not in info.schema.names:
            raise SchemaMismatchError(f"update sets unknown column {name!r} of {info.name}")
        if value is None and not info.schema.field(name).nullable:
            raise SchemaMismatchError(f"column {name!r} of {info.name} is not nullable: it cannot be set to None")
        spark_type = to_spark_type(info.schema.field(name).type)
        column = (value if isinstance(value, Column) else F.lit(value)).cast(spark_type)
        try:
            empty.select(column.alias("v")).schema  # noqa: B018  (analysis only)
        except AnalysisException as exc:
            raise SchemaMismatchError(f"cannot set {name!r} of {info.name} to {value!r}: {_first_line(exc)}") from exc
        setters[name] = column
    return setters


def _empty_frame(spark: SparkSession, info: StoredTable) -> DataFrame:
    return spark.createDataFrame([], to_spark_schema(info.schema))


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
