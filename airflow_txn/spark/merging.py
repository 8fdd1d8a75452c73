"""MERGE of a DataFrame into a table executed by Spark (docs/CONCEPTS.md "MERGE", "From Spark"): copy-on-write of
only the parts holding a matched key, and the unmatched source rows appended, in ONE statement through the chosen
write path (`via`, as for airflow_txn.spark.write: Spark's own Parquet writer, or the "airflow_txn" data source on
any root and through Spark Connect). The source never reaches the driver: what does is a handful of rows (the
source's distinct partition values, one count per candidate part, one summary of the source's checks).

    checks    the source's columns and types (types.writable), the clauses (the core's merging.check on an empty
              table of the source's columns), then one Spark job over the source: every value fits its column
              (types.write_guards), no NOT NULL column holds a null, no key twice (the core's refusal, naming one)
    scope     adapter.open_write(REWRITE) lists the parts the statement sees; WritePlan.merge_scope narrows them
              to the candidates by the core's rule (the partitions of the source's rows when the key covers the
              partition columns; every part with when_not_matched_by_source="delete") and records what it scans
    job 1     the candidates' keys (with part ids; only those inside the source's key range, a filter Spark's
              Parquet reader checks against the row groups' statistics) joined with the source's keys: per part,
              its matched rows (and its rows, when the source's lack deletes them), and the source rows no
              candidate matches (the inserts): the counts, and the parts to rewrite
    job 2     the parts to rewrite, joined with the source (each target row with its source row as the struct
              column `source`), changed or dropped, plus the inserts: staged as the statement (WritePlan.replacing,
              then the native writer or the data source; WritePlan.commit registers them with what it scanned,
              validated at commit when it inserts or deletes what the source lacks: docs/DESIGN.md D27)

A null key never matches (SQL's rule). when_matched takes "update", "delete", "ignore" or {column: value}, a value
being a Spark Column (over the target's columns and the source row's, `F.col("source.qty")`; F.expr("...") for
SQL) or a Python value (cast to the column's type), as airflow_txn.spark.update takes `set`. A dict holding
pyarrow.compute Expressions (the core's form) cannot run in Spark: such a MERGE collects the source to the driver
and the core runs it (Transaction.merge), the only case that does.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from airflow_txn.core.adapter import REWRITE, PartView, StoredTable, WritePlan, open_write, stored_table
from airflow_txn.core.transaction import Transaction
from airflow_txn.errors import InvalidArgumentError, MergedAwayError, SchemaMismatchError
from airflow_txn.model import merging
from airflow_txn.model.options import Via, ViaName
from airflow_txn.model.results import MergeCounts
from airflow_txn.spark import via as via_module
from airflow_txn.spark.cow import MERGE_RETRIES, _first_line, _give_up, _Run
from airflow_txn.spark.types import PART_ID, to_spark_schema, to_spark_type, writable, write_guards
from airflow_txn.spark.writer import column_of, quote
from airflow_txn.telemetry import logs

log = logs.get_logger(__name__)

SOURCE = merging.SOURCE
"""The struct column holding a target row's matching source row, in when_matched Columns (`source.qty`)."""
_FROM_SOURCE, _FROM_TARGET = "__airflow_txn_source_row", "__airflow_txn_target_row"
_GUARD = "airflow_txn merge source refused: "
_GUARD_RE = re.compile(re.escape(_GUARD) + r"(null|range|fraction)#(\d+)")


def merge(df: DataFrame, txn: Transaction, table: str, on: Sequence[str] | str,
          when_matched: str | Mapping[str, object] = "update", when_not_matched: str = "insert",
          when_not_matched_by_source: str = "keep", key: str | None = None,
          via: Via | ViaName = Via.AUTO) -> MergeCounts:
    """Upsert the rows of `df` into `table` within `txn`, as `Transaction.merge` does with a pyarrow.Table (the
    same clauses, the same refusals before anything is staged), executed by Spark; returns {updated, inserted,
    deleted}. `df` may hold every column of the table, or (deleting, or setting columns from values) the key
    columns and those it sets; each column in Spark's type for the table's (docs/TYPES.md), each value checked to
    fit. when_matched's dict takes Spark Columns (`F.col("qty") + F.col("source.qty")`) or Python values. `via`
    as for airflow_txn.spark.write; `key` as for every statement (a retried task replaces its earlier attempt)."""
    if isinstance(when_matched, Mapping) and any(isinstance(v, pc.Expression) for v in when_matched.values()):
        return _collected(df, txn, table, on, when_matched, when_not_matched, when_not_matched_by_source, key)
    way = via_module.choose(df.sparkSession, txn.warehouse, via)
    what = f"spark merge into {table}"
    plan = open_write(txn, table, REWRITE, key=key, what=what)
    info = plan.table
    spec = _checked(df, info, on, when_matched, when_not_matched, when_not_matched_by_source)
    source = df.select(*[_as_table_type(df, info, name) for name in spec.source.column_names])
    setters = _setters(df, info, spec)
    bounds = _check_source(source, info, spec)
    statement = _Statement(_Run(df.sparkSession, txn, way), spec, source, setters, info, bounds)
    partitions = functools.cache(statement.partitions)
    # a background merge may swap out parts this statement chose while its jobs run: the snapshot's rows are the
    # same, now in the merged part, so the statement runs again on a fresh choice
    for attempt in range(1, MERGE_RETRIES):
        try:
            return statement.run(plan.merge_scope(spec.on, spec.every_part, partitions))
        except MergedAwayError as exc:
            log.info("%s runs again (%d of %d runs done): %s", what, attempt, MERGE_RETRIES, exc)
        plan = open_write(txn, table, REWRITE, key=key, what=what)
    try:
        return statement.run(plan.merge_scope(spec.on, spec.every_part, partitions))
    except MergedAwayError as exc:
        cause = exc
    return plan.run(lambda: _give_up(what, cause))


# -- the checks, before anything runs -----------------------------------------------------------------------------
def _checked(df: DataFrame, info: StoredTable, on: object, when_matched: object, when_not_matched: object,
             when_not_matched_by_source: object) -> merging.MergeSpec:
    """The request checked by the core's rules (merging.check) on an empty table of the source's columns: the keys,
    the clauses, the columns the clauses need; the source's Spark types against the table's first."""
    schema, table = info.schema, info.name
    _check_columns(df, schema, table)
    own = [name for name in (PART_ID, SOURCE) if name in schema.names]
    if own:
        raise SchemaMismatchError(f"{table} has a column named {own[0]!r}, which a MERGE from Spark uses for itself: "
                                  "use Transaction.merge")
    probe: object = when_matched
    if isinstance(when_matched, Mapping):  # a Column is analyzed by Spark (_setters); the rest checked by the core
        probe = {name: pc.field(name) if isinstance(value, Column) else _python(value)
                 for name, value in when_matched.items()}
    empty = pa.schema([schema.field(f.name) for f in df.schema.fields]).empty_table()
    spec = merging.check(schema, table, empty, on, probe, when_not_matched, when_not_matched_by_source)
    if isinstance(when_matched, Mapping):  # the caller's values again, checked
        return merging.MergeSpec(spec.table, spec.on, dict(when_matched), spec.when_not_matched,
                                 spec.when_not_matched_by_source, spec.source)
    return spec


def _check_columns(df: DataFrame, schema: pa.Schema, table: str) -> None:
    """SchemaMismatchError for a source column the table has not, or of a Spark type the column does not take."""
    unknown = [f.name for f in df.schema.fields if f.name not in schema.names]
    if unknown:
        raise SchemaMismatchError(f"merge into {table}: the source has column(s) {unknown} the table has not")
    wrong = [f"{f.name!r} is {f.dataType.simpleString()}, the table has {schema.field(f.name).type}"
             for f in df.schema.fields if not writable(f.dataType, schema.field(f.name).type)]
    if wrong:
        raise SchemaMismatchError(f"merge into {table}: source column " + "; ".join(wrong))


def _python(value: object) -> object:
    return value.as_py() if isinstance(value, pa.Scalar) else value


def _as_table_type(df: DataFrame, info: StoredTable, name: str) -> Column:
    """A source column in the Spark type of the table's column (types.writable allowed it; the check job then
    refuses a value it cannot hold)."""
    wanted = to_spark_type(info.schema.field(name).type)
    if df.schema[name].dataType == wanted:
        return column_of(name)
    return column_of(name).cast(wanted).alias(name)


def _setters(df: DataFrame, info: StoredTable, spec: merging.MergeSpec) -> dict[str, Column] | None:
    """{column: its new value in a matched row} as Columns over the joined rows (the target's columns and the struct
    column `source`), each cast to the column's type and analyzed by Spark; None: no matched row changes."""
    if spec.when_matched in ("delete", "ignore"):
        return None
    if spec.when_matched == "update":
        return {n: F.col(SOURCE)[n] for n in info.schema.names if n not in spec.on}
    assert isinstance(spec.when_matched, Mapping)
    fields = [T.StructField(f.name, to_spark_type(f.type), True) for f in spec.source.schema]
    empty = df.sparkSession.createDataFrame([], T.StructType([*to_spark_schema(info.schema).fields,
                                                              T.StructField(SOURCE, T.StructType(fields), True)]))
    setters: dict[str, Column] = {}
    for name, value in spec.when_matched.items():
        given = value if isinstance(value, Column) else F.lit(_python(value))
        column = given.cast(to_spark_type(info.schema.field(name).type))
        try:
            empty.select(column.alias("v")).schema  # noqa: B018  (analysis only)
        except AnalysisException as exc:
            raise SchemaMismatchError(f"merge into {info.name}: when_matched cannot be evaluated: cannot set "
                                      f"{name!r} to {value!r}: {_first_line(exc)}") from exc
        setters[name] = column
    return setters


def _check_source(source: DataFrame, info: StoredTable, spec: merging.MergeSpec) -> dict[str, tuple[Any, Any]]:
    """One Spark job over the source, one row back: every value fits its column (what Spark's type holds beyond
    the table's: types.write_guards), no NOT NULL column holds a null (when it inserts or updates rows), and no key
    twice (a null key never matches: it may repeat). The core's typed errors, before anything is staged. Returns
    the source's least and greatest value of each key column a target row's key must lie between to match
    (_ranged: the core's statistics keys of a type whose values come back exactly), for job 1's filter."""
    whole = spec.when_matched == "update" or spec.when_not_matched == "insert"
    cases = []
    for index, name in enumerate(spec.source.column_names):
        field = info.schema.field(name)
        guards, _stored = write_guards(field, quote(name), name in info.partition_by)
        if whole and not field.nullable:
            guards = [(f"{quote(name)} IS NULL", "null"), *guards]
        cases += [f"WHEN {condition} THEN raise_error('{_GUARD}{reason}#{index}')" for condition, reason in guards]
    guard = F.expr(f"CASE {' '.join(cases)} ELSE 0 END") if cases else F.lit(0)
    keys = [column_of(k) for k in spec.on]
    null_key = functools.reduce(lambda a, b: a | b, [k.isNull() for k in keys])
    # the guards are an aggregate every row feeds (a filter before it could be reordered past them)
    counted = source.select(*keys, guard.alias("g"), F.when(null_key, 1).otherwise(0).alias("nk")).groupBy(
        *keys).agg(F.count(F.lit(1)).alias("n"), F.max("g").alias("g"), F.max("nk").alias("nk"))
    twice = (F.col("n") > 1) & (F.col("nk") == 0)
    ranged = _ranged(info, spec)
    extremes = [e for i, c in enumerate(ranged) for e in (F.min(column_of(c)).alias(f"min{i}"),
                                                          F.max(column_of(c)).alias(f"max{i}"))]
    try:
        found = counted.agg(F.count(F.when(twice, 1)).alias("keys"),
                            F.first(F.when(twice, F.struct(*keys)), ignorenulls=True).alias("example"),
                            F.max("g").alias("g"), *extremes).collect()[0]
    except Exception as exc:
        refused = _refused(exc, info, spec)
        if refused is None:
            raise
        raise refused from exc
    if found["keys"]:
        raise merging.key_twice(info.name, int(found["keys"]), found["example"].asDict())
    return {c: (found[f"min{i}"], found[f"max{i}"]) for i, c in enumerate(ranged)}


def _ranged(info: StoredTable, spec: merging.MergeSpec) -> list[str]:
    """The key columns job 1 filters the candidates' rows by (the source's range): the core's statistics keys
    (merging.statistics_keys: none when it deletes what the source lacks) of a signed integer, decimal, string or
    date type, whose values come back from Spark to a literal exactly and whose Parquet statistics Spark's reader
    checks. A target row outside the range matches no source row, so the filter changes no count."""
    def exact(arrow_type: pa.DataType) -> bool:
        return bool(pa.types.is_signed_integer(arrow_type) or pa.types.is_decimal(arrow_type)
                    or pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type)
                    or arrow_type == pa.date32())

    return [c for c in merging.statistics_keys(spec, info.schema) if exact(info.schema.field(c).type)]


def _refused(error: Exception, info: StoredTable, spec: merging.MergeSpec) -> SchemaMismatchError | None:
    match = _GUARD_RE.search(str(error))
    if match is None:
        return None
    name = spec.source.column_names[int(match.group(2))]
    if match.group(1) == "null":
        return SchemaMismatchError(f"merge into {info.name}: column(s) {[name]} are NOT NULL but the source holds "
                                   "nulls")
    why = "out of its range" if match.group(1) == "range" else "a finer fraction of a second"
    return SchemaMismatchError(f"merge into {info.name}: a source value does not fit its column: column {name!r} "
                               f"({info.schema.field(name).type}) holds a value {why}")


# -- the statement ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Statement:
    """One MERGE's Spark side: what it reads and writes with, the checked request and the source (in the table's
    Spark types), the setters of a matched row."""

    runner: _Run
    spec: merging.MergeSpec
    source: DataFrame
    setters: dict[str, Column] | None
    info: StoredTable
    bounds: dict[str, tuple[Any, Any]]
    """{key column: the source's least and greatest key} (_check_source): a target row outside matches nothing."""

    def partitions(self) -> pa.Table:
        """The distinct partition values of the source's rows, in the table's types (a small collect)."""
        columns = list(self.info.partition_by)
        found = self.source.select(*[column_of(c) for c in columns]).distinct().toArrow()
        wanted = pa.schema([self.info.schema.field(c).with_nullable(True) for c in columns])
        try:
            return found.select(columns).cast(wanted, safe=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
            raise SchemaMismatchError(f"merge into {self.info.name}: a source partition value does not fit its "
                                      f"column: {exc}") from exc

    def run(self, plan: WritePlan) -> MergeCounts:
        """One run on the candidates `plan` lists (merge_scope): count (job 1), rewrite and insert (job 2),
        register. MergedAwayError, the transaction still usable, when a merge took a chosen part meanwhile."""
        spec, keys = self.spec, list(self.spec.on)
        inserting = spec.when_not_matched == "insert"
        candidates = plan.visible
        with plan.keep_alive():
            per_part, unmatched = self._matches(plan, candidates, inserting)
        updated = deleted = 0
        affected: list[PartView] = []
        for part in candidates:
            rows, matched = per_part.get(part.id, (0, 0))
            removed = (matched if spec.when_matched == "delete" else 0) + (rows - matched if spec.every_part else 0)
            changed = matched if self.setters is not None else 0
            if removed or changed:
                affected.append(part)
                updated, deleted = updated + changed, deleted + removed
        inserted = unmatched if inserting else 0
        plan = plan.replacing([p.id for p in affected], writer=self.runner.writer, inserts=bool(inserted))
        counts = MergeCounts(updated=updated, inserted=inserted, deleted=deleted)
        if not affected and not inserted:  # registering nothing still records what it scanned
            plan.commit([])
            return counts
        try:
            frames = []
            if affected:
                frames.append(self._rewritten(self.runner.parts(plan, affected), keys))
            if inserted:
                frames.append(self.source.join(self._keys_of(plan, candidates), on=keys, how="left_anti")
                              .select(*[column_of(n) for n in self.info.schema.names]))
            changed_rows = frames[0] if len(frames) == 1 else frames[0].unionByName(frames[1])
        except BaseException:
            self.runner.discard(plan)
            raise
        self.runner.stage(changed_rows, plan)
        return counts

    def _keys_of(self, plan: WritePlan, parts: Sequence[PartView], part_id: bool = False) -> DataFrame:
        """The key columns (and part ids) of the rows of `parts` that may match a source row (inside `bounds`)."""
        names = [*self.spec.on, *([PART_ID] if part_id else [])]
        if not parts:
            fields = [T.StructField(k, to_spark_type(self.info.schema.field(k).type), True) for k in self.spec.on]
            fields += [T.StructField(PART_ID, T.LongType(), False)] if part_id else []
            return self.source.sparkSession.createDataFrame([], T.StructType(fields))
        rows = self.runner.parts(plan, parts, with_part_id=part_id)
        for column, (low, high) in self.bounds.items():  # pushed into the Parquet scan: row groups skipped
            rows = rows.where(column_of(column).between(F.lit(low), F.lit(high)))
        return rows.select(*[column_of(n) for n in names])

    def _matches(self, plan: WritePlan, candidates: Sequence[PartView],
                 inserting: bool) -> tuple[dict[int, tuple[int, int]], int]:
        """Job 1: {candidate part id: (its rows, its rows a source row matches)} for the candidates holding rows,
        and the number of source rows no candidate row matches (only counted when it inserts them)."""
        keys = list(self.spec.on)
        target = self._keys_of(plan, candidates, part_id=True).withColumn(_FROM_TARGET, F.lit(1))
        source = self.source.select(*[column_of(k) for k in keys]).withColumn(_FROM_SOURCE, F.lit(1))
        joined = target.join(source, on=keys, how="full_outer" if inserting else "left")
        found = joined.groupBy(PART_ID).agg(F.count(_FROM_TARGET).alias("rows"),
                                            F.count(_FROM_SOURCE).alias("matched")).collect()
        per_part = {int(r[PART_ID]): (int(r["rows"]), int(r["matched"])) for r in found if r[PART_ID] is not None}
        unmatched = sum(int(r["matched"]) for r in found if r[PART_ID] is None)
        return per_part, unmatched

    def _rewritten(self, rows: DataFrame, keys: Sequence[str]) -> DataFrame:
        """The rows of the parts rewritten: each joined with its source row (the struct column `source`), the
        matched ones changed or dropped, the unmatched ones dropped too when the source's lack deletes them."""
        spec = self.spec
        row = F.struct(*[column_of(n) for n in self.source.columns]).alias(SOURCE)
        source = self.source.select(*[column_of(k) for k in keys], row, F.lit(1).alias(_FROM_SOURCE))
        joined = rows.join(source, on=list(keys), how="left")
        matched = F.col(_FROM_SOURCE).isNotNull()
        if spec.when_matched == "delete":
            joined = joined.where(~matched)
        if spec.every_part:
            joined = joined.where(matched)
        setters = self.setters or {}
        return joined.select(*[F.when(matched, setters[n]).otherwise(column_of(n)).alias(n) if n in setters
                               else column_of(n) for n in self.info.schema.names])


# -- the one clause form Spark cannot run -------------------------------------------------------------------------
def _collected(df: DataFrame, txn: Transaction, table: str, on: Sequence[str] | str,
               when_matched: Mapping[str, object], when_not_matched: str, when_not_matched_by_source: str,
               key: str | None) -> MergeCounts:
    """A when_matched dict holding pyarrow.compute Expressions (the core's form): the source collected to the
    driver as Arrow, cast to the table's types with every value checked to fit, and merged by the core."""
    mixed = [name for name, value in when_matched.items() if isinstance(value, Column)]
    if mixed:
        raise InvalidArgumentError(f"merge into {table}: when_matched mixes pyarrow Expressions and Spark Columns "
                                   f"({mixed}): use one form")
    schema = stored_table(txn.warehouse, table, txn=txn).schema  # as the transaction sees it
    _check_columns(df, schema, table)
    source = df.toArrow()
    target = pa.schema([schema.field(name).with_nullable(True) for name in source.column_names])
    try:
        source = source.cast(target, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise SchemaMismatchError(f"merge into {table}: a source value does not fit its column: {exc}") from exc
    return txn.merge(table, source, on, when_matched, when_not_matched, when_not_matched_by_source, key)

