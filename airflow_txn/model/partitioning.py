"""Partition values: their canonical text form, the catalog key, path names, and splitting data by them.

A partition is a dict {column: value-as-text} in the table's partition_by order; its catalog key
is that dict as compact JSON. Values are written as text the same way everywhere (bool as
true/false, dates and times in ISO form) and cast back with the column's Arrow type.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from airflow_txn.errors import InvalidNameError, SchemaMismatchError
from airflow_txn.model.names import encode_path_value

Partition = dict[str, str | None]
WHOLE_TABLE = "*"

_PARTITION_TYPES = (pa.types.is_integer, pa.types.is_string, pa.types.is_large_string, pa.types.is_date,
                    pa.types.is_boolean, pa.types.is_timestamp)


def is_partition_type(arrow_type: pa.DataType) -> bool:
    return any(check(arrow_type) for check in _PARTITION_TYPES)


def value_to_text(value: Any) -> str | None:
    """The canonical text of a partition value."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    return str(value)


def partition_key(partition: Mapping[str, str | None]) -> str:
    """The catalog key of a partition: compact JSON, columns in partition_by order."""
    return json.dumps(dict(partition), separators=(",", ":"), ensure_ascii=False)


def parse_partition_key(key: str) -> Partition:
    loaded: Partition = json.loads(key)
    return loaded


def partition_path(partition: Mapping[str, str | None]) -> list[str]:
    """Directory names for a partition (`col=value`, value percent-encoded): one per column."""
    return [f"{encode_path_value(col)}={encode_path_value(val)}" for col, val in partition.items()]


def split_by_partition(data: pa.Table, partition_by: Sequence[str]) -> list[tuple[Partition, pa.Table]]:
    """One (partition, rows) pair per distinct partition value combination (null is a value of its own),
    each partition's rows in their input order; [({}, data)] if unpartitioned.

    One pass whatever the number of partitions: a group-by gathers each combination's row numbers, one
    `take` puts the rows in that order, and every partition is a zero-copy slice of the result."""
    if not partition_by:
        return [({}, data)]
    if data.num_rows == 0:
        return []
    # group on positional names: Arrow would parse a column name like ".a" or "..." as a field path
    keys = [f"k{i}" for i in range(len(partition_by))]
    numbered = data.select(list(partition_by)).rename_columns(keys).append_column("row", _row_numbers(data.num_rows))
    # single-threaded: a stable group order, each list of row numbers in input order
    groups = numbered.group_by(keys, use_threads=False).aggregate([("row", "list")])
    combos = [{col: value_to_text(row[k]) for col, k in zip(partition_by, keys, strict=True)}
              for row in groups.select(keys).to_pylist()]
    if len(combos) == 1:
        return [(combos[0], data)]
    rows = groups["row_list"].combine_chunks()
    ordered = data.take(rows.flatten())
    offsets = rows.offsets.to_pylist()
    return [(combo, ordered.slice(start, end - start))
            for combo, start, end in zip(combos, offsets[:-1], offsets[1:], strict=True)]


def _row_numbers(count: int) -> pa.Array:
    """0, 1, ..., count - 1 as int64 (a running sum of ones: no Python loop, no numpy)."""
    return pc.subtract(pc.cumulative_sum(pa.repeat(pa.scalar(1, pa.int64()), count)), 1)


def normalize_partitions(partitions: Sequence[Mapping[str, Any]], schema: pa.Schema,
                         partition_by: Sequence[str]) -> list[Partition]:
    """Check user-given partitions name exactly the partition columns and cast each value to its type."""
    if isinstance(partitions, Mapping) or not isinstance(partitions, Sequence):
        raise InvalidNameError("partitions must be a list of dicts like [{'day': '2024-01-01'}]")
    if not partition_by:
        raise InvalidNameError("partitions were given but the table is not partitioned")
    normalized: list[Partition] = []
    for given in partitions:
        if not isinstance(given, Mapping) or sorted(given) != sorted(partition_by):
            raise InvalidNameError(f"partition {given!r} must name exactly the partition columns {list(partition_by)}")
        normalized.append({col: _cast_text(given[col], schema.field(col).type, col) for col in partition_by})
    return normalized


def _cast_text(value: Any, arrow_type: pa.DataType, column: str) -> str | None:
    if value is None:
        return None
    try:
        if isinstance(value, int) and not isinstance(value, bool) and pa.types.is_integer(arrow_type):
            typed = pa.array([value], arrow_type)  # range-checked; inferring first stops at int64 (uint64!)
        else:
            typed = (pa.array([text_to_value(value, arrow_type)]) if isinstance(value, str)
                     else pa.array([value]).cast(arrow_type))
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OverflowError) as exc:
        raise SchemaMismatchError(f"partition value {value!r} of column {column!r} is not a {arrow_type}") from exc
    return value_to_text(_python_values(typed, column, "")[0])


def check_partition_values(data: pa.Table, partition_by: Sequence[str], table: str) -> None:
    """Refuse rows whose partition values have no canonical text (`value_to_text` takes Python values):
    a timestamp with a sub-microsecond part, a date or timestamp outside the years 1-9999. Checked
    before anything is written, so such a write is rejected, not failed half-way."""
    for column in partition_by:
        if pa.types.is_temporal(data.schema.field(column).type):
            _python_values(pc.unique(data[column]), column, f"{table}: ")


def _python_values(values: pa.Array, column: str, where: str) -> list[Any]:
    """`values` as Python objects, or SchemaMismatchError naming what has no Python (text) form."""
    unit = getattr(values.type, "unit", None)
    if pa.types.is_timestamp(values.type) and unit == "ns":
        try:
            pc.cast(values, pa.timestamp("us", values.type.tz), safe=True)
        except pa.ArrowInvalid as exc:
            raise SchemaMismatchError(
                f"{where}partition column {column!r} holds a timestamp with a sub-microsecond part ({exc}): "
                "partition values are whole microseconds; truncate them (e.g. cast to timestamp[us])") from exc
    try:
        python: list[Any] = values.to_pylist()
    except (ValueError, OverflowError) as exc:
        raise SchemaMismatchError(f"{where}partition column {column!r} holds a date or time outside the years "
                                  f"1-9999, which has no text form for a partition path: {exc}") from exc
    return python


def partition_column(text: str | None, arrow_type: pa.DataType, length: int) -> pa.Array:
    """A constant column holding one partition value, for files that do not store it (Spark's layout)."""
    if text is None:
        return pa.nulls(length, arrow_type)
    return pa.repeat(text_to_value(text, arrow_type), length)


def text_to_value(text: str, arrow_type: pa.DataType) -> pa.Scalar:
    """A partition value's canonical text (value_to_text) as a scalar of its column's type. A timestamp is parsed
    at microseconds (the canonical text's precision: Python's isoformat writes 0 or 6 digits) and then cast to
    the column's unit, exactly: pyarrow parses a string straight to timestamp[ms] only with 3 digits (or none),
    so '12:30:45.500000' could not be read back into a timestamp[ms] column."""
    if pa.types.is_timestamp(arrow_type):
        parsed = pa.array([text], pa.string()).cast(pa.timestamp("us", arrow_type.tz))
        return parsed.cast(arrow_type, safe=True)[0]
    return pa.array([text], pa.string()).cast(arrow_type)[0]
