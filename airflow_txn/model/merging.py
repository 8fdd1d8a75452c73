"""MERGE (upsert) as pure functions on Arrow tables (docs/DESIGN.md, "MERGE is copy-on-write that validates what
it scanned"): the request checked before anything is staged, one part's rows merged with the source, and the
source rows left to insert. The core's statement decides which parts are candidates, rewrites the changed ones
under removal locks and appends the inserts; nothing here touches the catalog or storage.

- `on`: the key columns. A source row matches the target rows whose keys are all equal to its own; a null key
  never matches (SQL's rule), so such a source row is inserted, never an update.
- `when_matched`: "update" (every column from the source), "delete", "ignore", or {column: value} where a value
  is a scalar or a pyarrow.compute.Expression evaluated on the target's row, the matching source row being the
  struct column `source` (`pc.field("qty") + pc.field("source", "qty")`).
- `when_not_matched`: "insert" or "ignore"; `when_not_matched_by_source`: "keep" or "delete" (target rows no
  source row matches; then every part of the table is a candidate).
- The source may not hold a key twice (which row would win?), as Delta refuses; SchemaMismatchError names one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import pyarrow as pa
import pyarrow.compute as pc

from airflow_txn.errors import InvalidArgumentError, SchemaMismatchError

Matched = Literal["update", "delete", "ignore"]
NotMatched = Literal["insert", "ignore"]
NotMatchedBySource = Literal["keep", "delete"]
SOURCE = "source"
"""The struct column holding the matching source row, in when_matched expressions."""
_T, _S = "__airflow_txn_target_row", "__airflow_txn_source_row"
ROW = _S
"""The column of source_keys holding each source row's number."""


@dataclass(frozen=True)
class MergeSpec:
    """A checked MERGE request: what every part's merge and the inserts follow."""

    table: str
    on: tuple[str, ...]
    when_matched: Matched | Mapping[str, object]
    when_not_matched: NotMatched
    when_not_matched_by_source: NotMatchedBySource
    source: pa.Table
    """The source, with the table's types (every column, or the key columns and those it sets)."""

    @property
    def every_part(self) -> bool:
        """Whether every part of the table is a candidate (rows no source row matches are deleted)."""
        return self.when_not_matched_by_source == "delete"


@dataclass(frozen=True)
class PartMerge:
    """One part's rows merged: `rows` None when nothing in the part changed (the part stays as it is)."""

    rows: pa.Table | None
    updated: int
    deleted: int
    matched: pa.Array
    """The indices of the source rows that matched a row of this part."""


def check(schema: pa.Schema, table: str, source: object, on: object, when_matched: object = "update",
          when_not_matched: object = "insert", when_not_matched_by_source: object = "keep") -> MergeSpec:
    """The request checked completely (the source's columns and types, the keys, the clauses, no key twice):
    a typed error naming what is wrong, before anything is staged."""
    if isinstance(source, pa.RecordBatch):
        source = pa.Table.from_batches([source])
    if not isinstance(source, pa.Table):
        raise SchemaMismatchError(f"merge into {table} takes a pyarrow.Table source, got {type(source).__name__}")
    keys = _keys(on, schema, table)
    if when_matched not in ("update", "delete", "ignore") and not isinstance(when_matched, Mapping):
        raise InvalidArgumentError(f"merge into {table}: when_matched must be 'update', 'delete', 'ignore' or a "
                                   f"dict {{column: value or Expression}}, got {when_matched!r}")
    if when_not_matched not in ("insert", "ignore"):
        raise InvalidArgumentError(f"merge into {table}: when_not_matched must be 'insert' or 'ignore', "
                                   f"got {when_not_matched!r}")
    if when_not_matched_by_source not in ("keep", "delete"):
        raise InvalidArgumentError(f"merge into {table}: when_not_matched_by_source must be 'keep' or 'delete', "
                                   f"got {when_not_matched_by_source!r}")
    whole = when_matched == "update" or when_not_matched == "insert"
    conformed = _conform(source, schema, table, keys, whole)
    if isinstance(when_matched, Mapping):
        _check_setters(when_matched, schema, conformed, table, keys)
    _no_key_twice(conformed, keys, table)
    matched: Matched | Mapping[str, object] = dict(when_matched) if isinstance(when_matched, Mapping) else when_matched
    return MergeSpec(table, keys, matched, when_not_matched, when_not_matched_by_source, conformed)


def _keys(on: object, schema: pa.Schema, table: str) -> tuple[str, ...]:
    names = [on] if isinstance(on, str) else on
    if not isinstance(names, Sequence) or not names or not all(isinstance(n, str) for n in names):
        raise InvalidArgumentError(f"merge into {table}: on must be a non-empty list of column names, got {on!r}")
    if len(set(names)) != len(names):
        raise InvalidArgumentError(f"merge into {table}: on names a column twice: {list(names)}")
    for name in names:
        if name not in schema.names:
            raise SchemaMismatchError(f"merge into {table}: key column {name!r} is not a column of the table")
    return tuple(names)


def _conform(source: pa.Table, schema: pa.Schema, table: str, keys: Sequence[str], whole: bool) -> pa.Table:
    unknown = [n for n in source.column_names if n not in schema.names]
    if unknown:
        raise SchemaMismatchError(f"merge into {table}: the source has column(s) {unknown} the table has not")
    if len(set(source.column_names)) != len(source.column_names):
        raise SchemaMismatchError(f"merge into {table}: the source names a column twice: {source.column_names}")
    needed = list(schema.names) if whole else list(keys)
    missing = [n for n in needed if n not in source.column_names]
    if missing:
        why = "to insert or update rows" if whole else "its keys"
        raise SchemaMismatchError(f"merge into {table}: the source lacks column(s) {missing} ({why})")
    names = [n for n in schema.names if n in source.column_names]
    wrong = [f"{n!r} is {source.schema.field(n).type}, the table has {schema.field(n).type}"
             for n in names if source.schema.field(n).type != schema.field(n).type]
    if wrong:
        raise SchemaMismatchError(f"merge into {table}: source column " + "; ".join(wrong))
    nulls = [n for n in names if not schema.field(n).nullable and source.column(n).null_count]
    if nulls and whole:
        raise SchemaMismatchError(f"merge into {table}: column(s) {nulls} are NOT NULL but the source holds nulls")
    return pa.Table.from_arrays([source.column(n) for n in names],
                                schema=pa.schema([schema.field(n) for n in names]))


def _check_setters(setters: Mapping[str, object], schema: pa.Schema, source: pa.Table, table: str,
                   keys: Sequence[str]) -> None:
    if not setters:
        raise InvalidArgumentError(f"merge into {table}: when_matched={{}} sets nothing (use 'ignore')")
    for column, value in setters.items():
        if column not in schema.names:
            raise SchemaMismatchError(f"merge into {table}: when_matched sets unknown column {column!r}")
        if column in keys:
            raise SchemaMismatchError(f"merge into {table}: when_matched sets key column {column!r}")
        if isinstance(value, pc.Expression):
            continue
        try:
            scalar = value if isinstance(value, pa.Scalar) else pa.scalar(value)
            scalar = scalar.cast(schema.field(column).type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError) as exc:
            raise SchemaMismatchError(f"merge into {table}: cannot set {column!r} ({schema.field(column).type}) "
                                      f"to {value!r}: {exc}") from exc
        if not scalar.is_valid and not schema.field(column).nullable:
            raise SchemaMismatchError(f"merge into {table}: column {column!r} is NOT NULL: it cannot be set to None")
    probe = _joined(schema.empty_table(), source.slice(0, 0), pa.array([], pa.int64()))
    try:
        _evaluate(probe, setters, schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError) as exc:
        raise SchemaMismatchError(f"merge into {table}: when_matched cannot be evaluated: {exc}") from exc


def _no_key_twice(source: pa.Table, keys: Sequence[str], table: str) -> None:
    valid = source.select(list(keys))
    for key in keys:
        valid = valid.filter(pc.is_valid(valid.column(key)))
    counts = valid.group_by(list(keys)).aggregate([([], "count_all")])
    twice = counts.filter(pc.greater(counts.column("count_all"), 1))
    if twice.num_rows:
        raise key_twice(table, twice.num_rows, {k: twice.column(k)[0].as_py() for k in keys})


def key_twice(table: str, count: int, example: Mapping[str, object]) -> SchemaMismatchError:
    """The refusal of a source holding `count` keys more than once, `example` one of them ({key column: value}):
    an engine that finds them itself raises the core's words."""
    return SchemaMismatchError(f"merge into {table}: the source holds {count} key(s) more than once, "
                               f"e.g. {dict(example)}; a target row may match one source row at most")


def merge_part(rows: pa.Table, spec: MergeSpec, sources: pa.Array | None = None) -> PartMerge:
    """One part's rows merged with the source (see the module doc); `sources`: the numbers of the only source rows
    that may match one of them (rows_in), None: any source row (the other rows are not joined at all)."""
    target = rows.append_column(_T, row_numbers(rows.num_rows))
    if sources is None:
        source = spec.source.select(list(spec.on)).append_column(_S, row_numbers(spec.source.num_rows))
    else:
        source = spec.source.select(list(spec.on)).take(sources).append_column(_S, sources)
    joined = target.select([*spec.on, _T]).join(source, keys=list(spec.on), join_type="left outer")
    joined = joined.sort_by(_T)
    match = joined.column(_S).combine_chunks()
    is_matched = pc.is_valid(match)
    matched_sources = pc.drop_null(match)
    n_matched = len(matched_sources)
    keep = pa.array([True] * rows.num_rows, pa.bool_())
    deleted = 0
    if spec.when_matched == "delete":
        keep = pc.and_(keep, pc.invert(is_matched))
        deleted += n_matched
    if spec.every_part:
        keep = pc.and_(keep, is_matched)
        deleted += rows.num_rows - n_matched
    updated = 0 if spec.when_matched in ("delete", "ignore") else n_matched
    if not deleted and not updated:
        return PartMerge(None, 0, 0, matched_sources)
    result = rows
    if updated:
        result = _updated(rows, spec, match, is_matched)
    return PartMerge(result.filter(keep), updated, deleted, matched_sources)


def _updated(rows: pa.Table, spec: MergeSpec, match: pa.Array, is_matched: pa.Array) -> pa.Table:
    if spec.when_matched == "update":
        setters: Mapping[str, object] = {n: pc.field(SOURCE, n) for n in rows.column_names if n not in spec.on}
    else:
        assert isinstance(spec.when_matched, Mapping)
        setters = spec.when_matched
    values = _evaluate(_joined(rows, spec.source, match), setters, rows.schema)
    columns = [pc.if_else(is_matched, values.column(n), rows.column(n)) if n in setters else rows.column(n)
               for n in rows.column_names]
    return pa.Table.from_arrays(columns, schema=rows.schema)


def _joined(rows: pa.Table, source: pa.Table, match: pa.Array) -> pa.Table:
    """The target's rows, each with its matching source row (or nulls) as the struct column `source`."""
    if source.num_rows:
        taken = source.take(pc.fill_null(match, 0))
    else:  # no source row: nothing matches
        taken = pa.Table.from_arrays([pa.nulls(len(match), f.type) for f in source.schema], schema=source.schema)
    struct = pa.StructArray.from_arrays([taken.column(n).combine_chunks() for n in taken.column_names],
                                        fields=list(source.schema), mask=pc.invert(pc.is_valid(match)))
    return rows.append_column(SOURCE, struct)


def _evaluate(joined: pa.Table, setters: Mapping[str, object], schema: pa.Schema) -> pa.Table:
    import pyarrow.dataset as ds  # (and pandas, which it loads) only where an expression is evaluated

    projections = {n: v if isinstance(v, pc.Expression) else pc.scalar(v) for n, v in setters.items()}
    computed = ds.dataset(joined).to_table(columns=projections)
    return pa.Table.from_arrays([pc.cast(computed.column(n), schema.field(n).type) for n in setters],
                                names=list(setters))


def inserts(spec: MergeSpec, matched: Sequence[pa.Array]) -> pa.Table:
    """The source rows no target row matched (in every candidate part), to append; none unless
    when_not_matched="insert"."""
    if spec.when_not_matched != "insert":
        return spec.source.slice(0, 0)
    hit = pa.chunked_array(list(matched), pa.int64()) if matched else pa.chunked_array([], pa.int64())
    unmatched = pc.invert(pc.is_in(row_numbers(spec.source.num_rows), value_set=hit.combine_chunks()))
    return spec.source.filter(unmatched)


Range = tuple[pa.Scalar, pa.Scalar]
"""The least and the greatest value a part holds in one column (its nulls aside)."""


def statistics_keys(spec: MergeSpec, schema: pa.Schema) -> tuple[str, ...]:
    """The key columns whose ranges in a part (its files' Parquet statistics, or its partition value) can rule the
    part out: none with when_not_matched_by_source="delete" (every row is checked); never a floating-point column
    (a NaN is left out of the statistics yet a key equal to itself, and -0.0 equals 0.0 across their order), nor a
    nested, dictionary or null one (no order that statistics follow)."""
    if spec.every_part:
        return ()
    return tuple(name for name in spec.on if _ordered(schema.field(name).type))


def _ordered(arrow_type: pa.DataType) -> bool:
    return bool(pa.types.is_integer(arrow_type) or pa.types.is_decimal(arrow_type) or pa.types.is_string(arrow_type)
                or pa.types.is_large_string(arrow_type) or pa.types.is_binary(arrow_type)
                or pa.types.is_large_binary(arrow_type) or pa.types.is_fixed_size_binary(arrow_type)
                or pa.types.is_date(arrow_type) or pa.types.is_timestamp(arrow_type) or pa.types.is_time(arrow_type)
                or pa.types.is_boolean(arrow_type))


def source_keys(spec: MergeSpec) -> pa.Table:
    """The source's key columns and each row's number (column ROW), without the rows holding a null key (such a
    row never matches)."""
    return spec.source.select(list(spec.on)).append_column(ROW, row_numbers(spec.source.num_rows)).drop_null()


def rows_in(keys: pa.Table, ranges: Mapping[str, Range]) -> pa.Array:
    """The numbers of the source rows among `keys` (source_keys) that a part whose key columns lie in `ranges`
    ({column: (least, greatest)}; a column not listed: any value) may hold: those inside every range at once.
    None of them: the part holds no key of the source, so the MERGE neither reads nor rewrites it; else only
    these rows are joined with the part's (merge_part)."""
    inside: pa.ChunkedArray | None = None
    for column, (low, high) in ranges.items():
        values = keys.column(column)
        within = pc.and_(pc.greater_equal(values, low), pc.less_equal(values, high))
        inside = within if inside is None else pc.and_(inside, within)
    numbers = keys.column(ROW) if inside is None else keys.column(ROW).filter(inside)
    return numbers.combine_chunks()


def may_hold(keys: pa.Table, ranges: Mapping[str, Range]) -> bool:
    """Whether a part whose key columns lie in `ranges` may hold one of `keys` (rows_in)."""
    return len(rows_in(keys, ranges)) > 0


def row_numbers(count: int) -> pa.Array:
    """0, 1, ..., count - 1 as int64 (no Python loop)."""
    return pc.subtract(pc.cumulative_sum(pa.repeat(pa.scalar(1, pa.int64()), count)), 1)
