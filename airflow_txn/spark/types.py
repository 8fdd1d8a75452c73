"""Mapping between Arrow types (the catalog's schemas) and Spark SQL types, both ways (docs/TYPES.md).

One table column has one Spark type, the one Spark's own Parquet reader gives a file of it: integers
(unsigned ones widened: uint8 -> short, uint16 -> int, uint32 -> long, uint64 -> decimal(20,0)),
floats, decimals, strings, binaries, booleans, dates (date32 and date64), timestamps of any unit
(with a time zone -> TimestampType, without -> TimestampNTZType; Spark holds microseconds), and
lists, structs and maps of those. Spark writes back in its own types: a column Spark writes is
checked to fit the table's type (`writable`; the writers guard the values), and the core reads it
back as the table's type. Anything else is refused with an UnsupportedTypeError naming the column
(create_table refuses such types in the first place: model/types.py).
"""

from __future__ import annotations

import decimal
from collections.abc import Callable, Sequence

import pyarrow as pa
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from airflow_txn.errors import SchemaMismatchError, UnsupportedTypeError
from airflow_txn.model.evolution import column_id
from airflow_txn.model.types import needs_guard

PART_ID = "__airflow_txn_part"
"""The column a read adds when asked for each row's part id (a copy-on-write statement's first job counts the
matching rows by it). A table with a column of this name cannot be rewritten by Spark (cow.py refuses it)."""

_SIMPLE_TO_SPARK: list[tuple[Callable[[pa.DataType], bool], Callable[[], T.DataType]]] = [
    (pa.types.is_boolean, T.BooleanType),
    (lambda t: t == pa.int8(), T.ByteType),
    (lambda t: t == pa.int16(), T.ShortType),
    (lambda t: t == pa.int32(), T.IntegerType),
    (lambda t: t == pa.int64(), T.LongType),
    (lambda t: t == pa.uint8(), T.ShortType),  # as Spark's Parquet reader widens an unsigned integer
    (lambda t: t == pa.uint16(), T.IntegerType),
    (lambda t: t == pa.uint32(), T.LongType),
    (lambda t: t == pa.uint64(), lambda: T.DecimalType(20, 0)),
    (lambda t: t == pa.float32(), T.FloatType),
    (lambda t: t == pa.float64(), T.DoubleType),
    (lambda t: pa.types.is_string(t) or pa.types.is_large_string(t), T.StringType),
    (lambda t: pa.types.is_binary(t) or pa.types.is_large_binary(t), T.BinaryType),
    (lambda t: t == pa.date32() or t == pa.date64(), T.DateType),
]

_SPARK_TO_ARROW: dict[type[T.DataType], pa.DataType] = {
    T.BooleanType: pa.bool_(), T.ByteType: pa.int8(), T.ShortType: pa.int16(), T.IntegerType: pa.int32(),
    T.LongType: pa.int64(), T.FloatType: pa.float32(), T.DoubleType: pa.float64(), T.StringType: pa.string(),
    T.BinaryType: pa.binary(), T.DateType: pa.date32(), T.TimestampType: pa.timestamp("us", tz="UTC"),
    T.TimestampNTZType: pa.timestamp("us"),
}


def to_spark_type(arrow_type: pa.DataType) -> T.DataType:
    """The Spark type of an Arrow column type (raises UnsupportedTypeError)."""
    for check, make in _SIMPLE_TO_SPARK:
        if check(arrow_type):
            return make()
    if pa.types.is_timestamp(arrow_type):  # Spark holds microseconds: a timestamp[ns] holds whole ones (D25)
        return T.TimestampType() if arrow_type.tz is not None else T.TimestampNTZType()
    if pa.types.is_decimal128(arrow_type):
        return T.DecimalType(arrow_type.precision, arrow_type.scale)
    return _nested_to_spark(arrow_type)


def _nested_to_spark(arrow_type: pa.DataType) -> T.DataType:
    if pa.types.is_map(arrow_type):
        return T.MapType(to_spark_type(arrow_type.key_type), to_spark_type(arrow_type.item_type),
                         arrow_type.item_field.nullable)
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        return T.ArrayType(to_spark_type(arrow_type.value_type), arrow_type.value_field.nullable)
    if pa.types.is_struct(arrow_type):
        return T.StructType([
            T.StructField(f.name, to_spark_type(f.type), f.nullable)
            for f in (arrow_type.field(i) for i in range(arrow_type.num_fields))
        ])
    raise UnsupportedTypeError(f"Arrow type {arrow_type} has no Spark equivalent")


def to_spark_schema(arrow_schema: pa.Schema) -> T.StructType:
    """The Spark schema of a table (column names, types and nullability kept)."""
    fields = []
    for field in arrow_schema:
        try:
            fields.append(T.StructField(field.name, to_spark_type(field.type), field.nullable))
        except UnsupportedTypeError as exc:
            raise UnsupportedTypeError(f"column {field.name!r}: {exc}") from exc
    return T.StructType(fields)


def to_arrow_type(spark_type: T.DataType) -> pa.DataType:
    """The Arrow type of a Spark type (timestamps in microseconds, TimestampType in UTC)."""
    simple = _SPARK_TO_ARROW.get(type(spark_type))
    if simple is not None:
        return simple
    if isinstance(spark_type, T.DecimalType):
        return pa.decimal128(spark_type.precision, spark_type.scale)
    if isinstance(spark_type, T.ArrayType):
        return pa.list_(pa.field("item", to_arrow_type(spark_type.elementType), spark_type.containsNull))
    if isinstance(spark_type, T.MapType):
        return pa.map_(to_arrow_type(spark_type.keyType),
                       pa.field("value", to_arrow_type(spark_type.valueType), spark_type.valueContainsNull))
    if isinstance(spark_type, T.StructType):
        return pa.struct([pa.field(f.name, to_arrow_type(f.dataType), f.nullable) for f in spark_type.fields])
    raise UnsupportedTypeError(f"Spark type {spark_type.simpleString()} has no Arrow equivalent here")


def to_arrow_schema(spark_schema: T.StructType) -> pa.Schema:
    """An Arrow schema for a DataFrame's schema, e.g. `wh.create_table(name, to_arrow_schema(df.schema))`."""
    fields = []
    for field in spark_schema.fields:
        try:
            fields.append(pa.field(field.name, to_arrow_type(field.dataType), field.nullable))
        except UnsupportedTypeError as exc:
            raise UnsupportedTypeError(f"column {field.name!r}: {exc}") from exc
    return pa.schema(fields)


FIELD_ID = "parquet.field.id"
"""Spark's StructField metadata key its Parquet writer writes as the column's Parquet field id (when
spark.sql.parquet.fieldId.write.enabled, true by default)."""


def field_id_metadata(field: pa.Field) -> dict[str, int]:
    """The Spark column metadata that makes Spark's Parquet writer store column `field`'s column id as its field id,
    as the core's files do (docs/DESIGN.md, D27); {} for a column without one."""
    found = column_id(field)
    return {} if found is None else {FIELD_ID: found}


def is_stored_nanos(field: pa.Field, partition_by: Sequence[str]) -> bool:
    """Whether the files hold column `field` as a timestamp in nanoseconds: a timestamp[ns] data column (a
    Spark write stores it as the long of its nanoseconds, as pyarrow's INT64 TIMESTAMP(NANOS) is), which
    Spark's Parquet reader reads only as a long (it refuses the nanosecond timestamp type)."""
    return pa.types.is_timestamp(field.type) and field.type.unit == "ns" and field.name not in partition_by


def read_schema(arrow_schema: pa.Schema, partition_by: Sequence[str]) -> T.StructType:
    """The schema a native scan reads the files with: the table's Spark schema, a timestamp[ns] data column
    as the long the files hold (stored_column turns it into Spark's timestamp)."""
    schema = to_spark_schema(arrow_schema)
    return T.StructType([T.StructField(f.name, T.LongType(), f.nullable)
                         if is_stored_nanos(arrow_schema.field(f.name), partition_by) else f for f in schema.fields])


_EPOCH_NTZ = "TIMESTAMP_NTZ'1970-01-01 00:00:00'"


def stored_column(field: pa.Field, partition_by: Sequence[str]) -> Column:
    """Column `field` of a native scan (read_schema) as its Spark type: a nanosecond long becomes Spark's
    microseconds. The core keeps timestamp[ns] values whole microseconds; a value written before it did fails
    the query, naming the column, rather than losing its nanoseconds."""
    name = "`" + field.name.replace("`", "``") + "`"
    if not is_stored_nanos(field, partition_by):
        return F.col(name)
    text = f"airflow_txn: column {field.name} holds a timestamp with a sub-microsecond part, which Spark cannot hold"
    micros = f"{name} div 1000"
    value = (f"timestamp_micros({micros})" if field.type.tz else f"timestampadd(MICROSECOND, {micros}, {_EPOCH_NTZ})")
    return F.expr(f"CASE WHEN {name} % 1000 <> 0 THEN raise_error({_sql_string(text)}) ELSE {value} END").alias(
        field.name)


def _sql_string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


_UNSIGNED_MAX = {pa.uint8(): 2**8 - 1, pa.uint16(): 2**16 - 1, pa.uint32(): 2**32 - 1, pa.uint64(): 2**64 - 1}


def write_guards(field: pa.Field, column: str, partition: bool) -> tuple[list[tuple[str, str]], str]:
    """What a native Spark write of column `field` (`column`: its quoted name) checks and stores: [(a SQL
    condition that refuses the row, the reason's tag: range or fraction)] and the SQL of the stored value.
    Spark's type for the column may hold values the column cannot (types.needs_guard): an unsigned integer's
    range, a timestamp[s]/[ms]'s whole seconds or milliseconds, a timestamp[ns]'s years 1677-2262; a timestamp[ns]
    data column is stored as the long of its nanoseconds (is_stored_nanos)."""
    arrow_type = field.type
    if pa.types.is_unsigned_integer(arrow_type):
        return [(f"{column} < 0 OR {column} > {_UNSIGNED_MAX[arrow_type]}", "range")], column
    if not pa.types.is_timestamp(arrow_type) or arrow_type.unit == "us":
        return [], column
    if arrow_type.unit in ("s", "ms"):
        step = 1000 if arrow_type.unit == "ms" else 1000000
        fraction = f"CAST(extract(SECOND FROM {column}) * 1000000 AS BIGINT) % {step}"
        return [(f"{fraction} <> 0", "fraction")], column
    micros = (f"unix_micros({column})" if arrow_type.tz else f"timestampdiff(MICROSECOND, {_EPOCH_NTZ}, {column})")
    limit = (2**63 - 1) // 1000
    guards = [(f"{micros} NOT BETWEEN {-limit} AND {limit}", "range")]
    return guards, (column if partition else f"{micros} * 1000")


def writable(spark_type: T.DataType, arrow_type: pa.DataType) -> bool:
    """Whether a DataFrame column of `spark_type` may be written into a top-level column of `arrow_type`: the
    values are stored unchanged (same_storage), or the column's Spark type is `spark_type` and the writer checks
    each value fits (write_guards; a date64 takes every date)."""
    if same_storage(spark_type, arrow_type):
        return True
    if not (needs_guard(arrow_type) or arrow_type == pa.date64()):
        return False
    try:
        return bool(spark_type == to_spark_type(arrow_type))
    except UnsupportedTypeError:
        return False


def spark_value(scalar: pa.Scalar) -> object:
    """A partition value as the Python value of its Spark type (uint64: a Decimal; timestamp[ns]: a datetime)."""
    if pa.types.is_timestamp(scalar.type) and scalar.type.unit == "ns":
        return scalar.cast(pa.timestamp("us", scalar.type.tz)).as_py()
    value = scalar.as_py()
    if scalar.type == pa.uint64() and value is not None:
        return decimal.Decimal(value)
    return value


def check_frame_schema(spark_schema: T.StructType, arrow_schema: pa.Schema, table: str) -> None:
    """SchemaMismatchError listing every difference between a DataFrame's columns and the table's (in any
    order: writers select the table's order), before anything is written."""
    got = {f.name: f for f in spark_schema.fields}
    names = [f.name for f in spark_schema.fields]
    problems = []
    missing = [n for n in arrow_schema.names if n not in got]
    extra = [n for n in names if n not in arrow_schema.names]
    if missing:
        problems.append(f"missing column(s) {missing}")
    if extra:
        problems.append(f"unknown column(s) {extra}")
    if len(set(names)) != len(names):
        problems.append(f"duplicate column names in {names}")
    for field in arrow_schema:
        spark_field = got.get(field.name)
        if spark_field is not None and not writable(spark_field.dataType, field.type):
            problems.append(f"column {field.name!r} is {spark_field.dataType.simpleString()}, "
                            f"the table has {field.type} ({_spark_name(field.type)} in Spark)")
    if problems:
        raise SchemaMismatchError(f"DataFrame does not match the schema of {table}: " + "; ".join(problems))


def _spark_name(arrow_type: pa.DataType) -> str:
    try:
        return str(to_spark_type(arrow_type).simpleString())
    except SchemaMismatchError:
        return "no type"


def same_storage(spark_type: T.DataType, arrow_type: pa.DataType) -> bool:
    """Whether Spark writes `spark_type` as values a column of `arrow_type` reads back unchanged.

    Nested nullability, string/binary/list offset widths and the time zone name of a timestamp
    do not change the stored values; everything else must match exactly.
    """
    try:
        return bool(_canonical(to_arrow_type(spark_type)) == _canonical(arrow_type))
    except UnsupportedTypeError:
        return False


def _canonical(arrow_type: pa.DataType) -> pa.DataType:
    if pa.types.is_large_string(arrow_type):
        return pa.string()
    if pa.types.is_large_binary(arrow_type):
        return pa.binary()
    if pa.types.is_timestamp(arrow_type) and arrow_type.tz is not None:
        return pa.timestamp(arrow_type.unit, tz="UTC")
    if pa.types.is_map(arrow_type):
        return pa.map_(_canonical(arrow_type.key_type), _canonical(arrow_type.item_type))
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        return pa.list_(_canonical(arrow_type.value_type))
    if pa.types.is_struct(arrow_type):
        return pa.struct([(f.name, _canonical(f.type))
                          for f in (arrow_type.field(i) for i in range(arrow_type.num_fields))])
    return arrow_type
