"""Mapping between Arrow types (the catalog's schemas) and Spark SQL types, both ways.

One table column has one Spark type: integers, floats, decimals, strings, binaries, booleans,
dates, timestamps (with a time zone -> TimestampType, without -> TimestampNTZType), and lists,
structs and maps of those. Spark stores timestamps in microseconds, so a table column that Spark
writes must be `timestamp("us")`; reads also accept "s" and "ms". Anything else is refused with a
SchemaMismatchError that names the column.
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
from pyspark.sql import types as T

from airflow_txn.errors import SchemaMismatchError

PART_ID = "__airflow_txn_part"
"""The column a read adds when asked for each row's part id (a copy-on-write statement's first job counts the
matching rows by it). A table with a column of this name cannot be rewritten by Spark (cow.py refuses it)."""

_SIMPLE_TO_SPARK: list[tuple[Callable[[pa.DataType], bool], Callable[[], T.DataType]]] = [
    (pa.types.is_boolean, T.BooleanType),
    (lambda t: t == pa.int8(), T.ByteType),
    (lambda t: t == pa.int16(), T.ShortType),
    (lambda t: t == pa.int32(), T.IntegerType),
    (lambda t: t == pa.int64(), T.LongType),
    (lambda t: t == pa.float32(), T.FloatType),
    (lambda t: t == pa.float64(), T.DoubleType),
    (lambda t: pa.types.is_string(t) or pa.types.is_large_string(t), T.StringType),
    (lambda t: pa.types.is_binary(t) or pa.types.is_large_binary(t), T.BinaryType),
    (lambda t: t == pa.date32(), T.DateType),
]

_SPARK_TO_ARROW: dict[type[T.DataType], pa.DataType] = {
    T.BooleanType: pa.bool_(), T.ByteType: pa.int8(), T.ShortType: pa.int16(), T.IntegerType: pa.int32(),
    T.LongType: pa.int64(), T.FloatType: pa.float32(), T.DoubleType: pa.float64(), T.StringType: pa.string(),
    T.BinaryType: pa.binary(), T.DateType: pa.date32(), T.TimestampType: pa.timestamp("us", tz="UTC"),
    T.TimestampNTZType: pa.timestamp("us"),
}


class UnsupportedTypeError(SchemaMismatchError):
    """A column type has no Spark equivalent here: change the column's type."""


def to_spark_type(arrow_type: pa.DataType) -> T.DataType:
    """The Spark type of an Arrow column type (raises UnsupportedTypeError)."""
    for check, make in _SIMPLE_TO_SPARK:
        if check(arrow_type):
            return make()
    if pa.types.is_timestamp(arrow_type) and arrow_type.unit in ("s", "ms", "us"):
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
        if spark_field is not None and not same_storage(spark_field.dataType, field.type):
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
