"""Which Arrow column types a table may have: those that round-trip exactly through every path (the core,
Spark's native writer and reader, the `airflow_txn` data source; docs/TYPES.md). `create_table` refuses any
other type with an UnsupportedTypeError naming the column, the type and what to use instead, before anything
is written.

Top-level columns: booleans, signed and unsigned integers, float32/float64, decimal128, string and
large_string, binary and large_binary, date32 and date64, timestamps of any unit and zone, and lists, structs
and maps. Spark reads an unsigned integer widened (uint8 -> short, ..., uint64 -> decimal(20,0)), a date64 as
a date and every timestamp in microseconds, as its own Parquet reader does; its writers check that each value
fits the table's type (a range, whole seconds or milliseconds) before anything is staged. Such a check reaches
top-level columns only, so inside a list, struct or map the types are the ones Spark stores unchanged:
no unsigned integer, no date64, timestamps in microseconds. A timestamp[ns] column holds whole microseconds
(the core refuses a value with a sub-microsecond part: `check_values`), so Spark reads every value exactly.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from airflow_txn.errors import SchemaMismatchError, UnsupportedTypeError

_EXACT = (pa.types.is_boolean, pa.types.is_signed_integer, lambda t: t in (pa.float32(), pa.float64()),
          pa.types.is_decimal128, pa.types.is_string, pa.types.is_large_string, pa.types.is_binary,
          pa.types.is_large_binary, lambda t: t == pa.date32(), lambda t: pa.types.is_timestamp(t) and t.unit == "us")
"""Types Spark stores unchanged (allowed anywhere, nested too)."""

_INSTEAD: list[tuple[str, str]] = [  # (the type's name as pyarrow prints it begins so, what to use instead)
    ("halffloat", "float32"), ("time32", "timestamp[us] or int64 (microseconds since midnight)"),
    ("time64", "timestamp[us] or int64 (microseconds since midnight)"), ("duration", "int64 (a count of the unit)"),
    ("month_interval", "int32 (months)"), ("day_time_interval", "int64 (milliseconds)"),
    ("month_day_nano_interval", "a struct of months, days and nanoseconds"), ("dictionary", "its value type"),
    ("fixed_size_binary", "binary"), ("decimal256", "decimal128 (precision up to 38)"),
    ("decimal32", "decimal128"), ("decimal64", "decimal128"), ("string_view", "string"),
    ("binary_view", "binary"), ("fixed_size_list", "list"), ("list_view", "list"), ("large_list_view", "list"),
    ("sparse_union", "a struct"), ("dense_union", "a struct"), ("null", "a nullable column of the type it holds"),
    ("run_end_encoded", "its value type"), ("extension", "its storage type"),
]


def needs_guard(arrow_type: pa.DataType) -> bool:
    """Whether Spark's type for a column of `arrow_type` holds values the column cannot (a wider integer, a
    finer timestamp), so that a Spark writer checks each value fits: unsigned integers, timestamps not in
    microseconds (a date64 takes every date Spark holds)."""
    finer = pa.types.is_timestamp(arrow_type) and arrow_type.unit != "us"
    return bool(pa.types.is_unsigned_integer(arrow_type) or finer)


def check_column_type(column: str, arrow_type: pa.DataType, table: str) -> None:
    """UnsupportedTypeError unless a column `column` of `arrow_type` round-trips through every path."""
    problem = _problem(arrow_type, nested=False)
    if problem is not None:
        found, instead = problem
        where = "" if found == arrow_type else f" (it holds {found})"
        raise UnsupportedTypeError(
            f"column {column!r} of {table} has type {arrow_type}{where}, which not every engine path reads and "
            f"writes back exactly (docs/TYPES.md); use {instead}")


def _problem(arrow_type: pa.DataType, nested: bool) -> tuple[pa.DataType, str] | None:
    """(the offending type, what to use instead), or None when `arrow_type` is allowed."""
    if any(check(arrow_type) for check in _EXACT):
        return None
    if pa.types.is_unsigned_integer(arrow_type) or arrow_type == pa.date64() or pa.types.is_timestamp(arrow_type):
        return (arrow_type, _nested_instead(arrow_type) + " inside a list, struct or map") if nested else None
    return _container_problem(arrow_type)


def _nested_instead(arrow_type: pa.DataType) -> str:
    if pa.types.is_unsigned_integer(arrow_type):
        return f"a signed integer wide enough ({_WIDER[arrow_type.bit_width]})"
    if arrow_type == pa.date64():
        return "date32"
    return f"timestamp[us{', ' + arrow_type.tz if arrow_type.tz else ''}]"


def _container_problem(arrow_type: pa.DataType) -> tuple[pa.DataType, str] | None:
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        return _problem(arrow_type.value_type, nested=True)
    if pa.types.is_map(arrow_type):
        return _problem(arrow_type.key_type, nested=True) or _problem(arrow_type.item_type, nested=True)
    if pa.types.is_struct(arrow_type):
        if arrow_type.num_fields == 0:
            return arrow_type, "a struct with at least one field (Parquet stores no empty struct)"
        for i in range(arrow_type.num_fields):
            found = _problem(arrow_type.field(i).type, nested=True)
            if found is not None:
                return found
        return None
    name = str(arrow_type)
    if isinstance(arrow_type, pa.ExtensionType):
        return arrow_type, f"its storage type {arrow_type.storage_type}"
    for prefix, instead in _INSTEAD:
        if name.startswith(prefix):
            return arrow_type, instead
    return arrow_type, "one of the types docs/TYPES.md lists"


_WIDER = {8: "int16", 16: "int32", 32: "int64", 64: "decimal128(20, 0)"}


def check_values(data: pa.Table, table: str) -> None:
    """SchemaMismatchError naming the first timestamp[ns] column holding a value with a sub-microsecond part:
    Spark holds microseconds, so such a value would not read back exactly through it (docs/TYPES.md)."""
    for field in data.schema:
        if pa.types.is_timestamp(field.type) and field.type.unit == "ns":
            column = data[field.name]
            try:
                pc.cast(column, pa.timestamp("us", field.type.tz), safe=True)
            except pa.ArrowInvalid as exc:
                raise SchemaMismatchError(
                    f"column {field.name!r} of {table} is timestamp[ns] and holds a value with a sub-microsecond "
                    f"part ({exc}): its values are whole microseconds, as every engine reads them; truncate "
                    "them first (pyarrow: .cast(pa.timestamp('us')); pandas: .dt.floor('us'))") from exc
