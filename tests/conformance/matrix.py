"""The types matrix: one table holding every column type a table may have (docs/TYPES.md) as data, and every
partition column type as partition values, with rows of extreme, null, NaN, empty and awkward values. One table
per path x root keeps the conformance suite to a handful of Spark actions per combination.

Row 0 holds each type's least value, row 1 its greatest (and NaN, infinities, -0.0, long and non-ASCII text),
row 2 nulls everywhere they are allowed, row 3 plain values (their partition directories are ones Spark's
partition discovery reads back, the others are not: the native read takes both ways at once). Values the core
accepts and a path refuses with a typed error (an empty string or Spark's null name as a partition value on the
native writer, a value out of a column's range) are cases of their own (test_types.py).
"""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal
from typing import Any

import pyarrow as pa

UTC = dt.UTC
TOKYO = dt.timezone(dt.timedelta(hours=9))
DEC = pa.decimal128(38, 10)
DEC_MAX = Decimal("9" * 28 + "." + "9" * 10)
DEC_MIN = Decimal("-" + str(DEC_MAX))  # not -DEC_MAX: the default context rounds to 28 digits

DATA = [
    ("i8", pa.int8()), ("i16", pa.int16()), ("i32", pa.int32()), ("i64", pa.int64()),
    ("u8", pa.uint8()), ("u16", pa.uint16()), ("u32", pa.uint32()), ("u64", pa.uint64()),
    ("f32", pa.float32()), ("f64", pa.float64()), ("dec", DEC), ("s", pa.string()), ("ls", pa.large_string()),
    ("bin", pa.binary()), ("lbin", pa.large_binary()), ("b", pa.bool_()), ("d32", pa.date32()), ("d64", pa.date64()),
    ("t_s", pa.timestamp("s")), ("t_ms", pa.timestamp("ms", "UTC")), ("t_us", pa.timestamp("us", "Europe/Paris")),
    ("t_us_local", pa.timestamp("us")), ("t_ns", pa.timestamp("ns")), ("t_ns_tokyo", pa.timestamp("ns", "Asia/Tokyo")),
    ("lst", pa.list_(pa.int32())), ("st", pa.struct([("a", pa.int64()), ("b", pa.string())])),
    ("mp", pa.map_(pa.string(), pa.float64())),
]
PARTITIONS = [
    ("p_i8", pa.int8()), ("p_u16", pa.uint16()), ("p_i64", pa.int64()), ("p_u64", pa.uint64()), ("p_s", pa.string()),
    ("p_ls", pa.large_string()), ("p_d64", pa.date64()), ("p_b", pa.bool_()), ("p_ts_s", pa.timestamp("s")),
    ("p_ts_ms", pa.timestamp("ms", "UTC")), ("p_ts_ns", pa.timestamp("ns", "Asia/Tokyo")),
]
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), *DATA, *PARTITIONS])
PARTITION_BY = [name for name, _ in PARTITIONS]

LOW: dict[str, Any] = {
    "i8": -128, "i16": -(2**15), "i32": -(2**31), "i64": -(2**63), "u8": 0, "u16": 0, "u32": 0, "u64": 0,
    "f32": -math.inf, "f64": math.nan, "dec": DEC_MIN, "s": "", "ls": "é 日本 😀 \u0000", "bin": b"",
    "lbin": b"\x00\xff", "b": False, "d32": dt.date(1, 1, 1), "d64": dt.date(1, 1, 1), "t_s": dt.datetime(1, 1, 1),
    "t_ms": dt.datetime(1969, 12, 31, 23, 59, 59, 999000, tzinfo=UTC), "t_us": dt.datetime(1, 1, 1, tzinfo=UTC),
    "t_us_local": dt.datetime(1, 1, 1), "t_ns": dt.datetime(1677, 9, 22),
    "t_ns_tokyo": dt.datetime(1677, 9, 22, tzinfo=UTC),
    "lst": [], "st": {"a": None, "b": ""}, "mp": [],
    "p_i8": -128, "p_u16": 0, "p_i64": -(2**63), "p_u64": 0, "p_s": "café", "p_ls": " a/b=c%",
    "p_d64": dt.date(1, 1, 1), "p_b": False, "p_ts_s": dt.datetime(1, 1, 1),
    "p_ts_ms": dt.datetime(2024, 3, 1, 12, 30, 45, 500000, tzinfo=UTC),
    "p_ts_ns": dt.datetime(2024, 3, 1, 0, 0, 0, 1, tzinfo=TOKYO),
}
HIGH: dict[str, Any] = {
    "i8": 127, "i16": 2**15 - 1, "i32": 2**31 - 1, "i64": 2**63 - 1, "u8": 255, "u16": 2**16 - 1, "u32": 2**32 - 1,
    "u64": 2**64 - 1, "f32": math.inf, "f64": -0.0, "dec": DEC_MAX, "s": "'\"\\%{}[]*?\n\t", "ls": "x" * 300,
    "bin": bytes(range(256)), "lbin": b"\xff" * 3, "b": True, "d32": dt.date(9999, 12, 31),
    "d64": dt.date(9999, 12, 31), "t_s": dt.datetime(9999, 12, 31, 23, 59, 59),
    "t_ms": dt.datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=UTC),
    "t_us": dt.datetime(2024, 10, 27, 0, 30, tzinfo=UTC), "t_us_local": dt.datetime(9999, 12, 31, 23, 59, 59, 999999),
    "t_ns": dt.datetime(2262, 4, 11, 23, 47, 16, 854775),
    "t_ns_tokyo": dt.datetime(2024, 3, 1, 12, 0, 0, 1, tzinfo=UTC),
    "lst": [1, None, 2**31 - 1], "st": {"a": 2**63 - 1, "b": "é"}, "mp": [("k", math.nan), ("", -0.0)],
    "p_i8": 127, "p_u16": 2**16 - 1, "p_i64": 2**63 - 1, "p_u64": 2**64 - 1, "p_s": "x" * 150,
    "p_ls": "+:*?{}[]^\"#'\\ %41 ..", "p_d64": dt.date(9999, 12, 31), "p_b": True,
    "p_ts_s": dt.datetime(9999, 12, 31, 23, 59, 59),
    "p_ts_ms": dt.datetime(1969, 12, 31, 23, 59, 59, 999000, tzinfo=UTC),
    "p_ts_ns": dt.datetime(2262, 4, 11, 8, 47, 16, 854775, tzinfo=TOKYO),
}
PLAIN: dict[str, Any] = {
    "i8": 1, "i16": 2, "i32": 3, "i64": 4, "u8": 5, "u16": 6, "u32": 7, "u64": 8, "f32": 1.5, "f64": 2.5,
    "dec": Decimal("1.5"), "s": "a", "ls": "b", "bin": b"c", "lbin": b"d", "b": True, "d32": dt.date(2024, 2, 29),
    "d64": dt.date(2024, 2, 29), "t_s": dt.datetime(2024, 3, 1, 12),
    "t_ms": dt.datetime(2024, 3, 1, 12, 0, 0, 1000, tzinfo=UTC),
    "t_us": dt.datetime(2024, 3, 1, 12, tzinfo=UTC), "t_us_local": dt.datetime(2024, 3, 1, 12),
    "t_ns": dt.datetime(2024, 3, 1, 12, 0, 0, 2), "t_ns_tokyo": dt.datetime(2024, 3, 1, 12, tzinfo=UTC),
    "lst": [7], "st": {"a": 1, "b": "x"}, "mp": [("a", 1.0)],
    "p_i8": 1, "p_u16": 2, "p_i64": 3, "p_u64": 4, "p_s": "plain", "p_ls": "text", "p_d64": dt.date(2024, 2, 29),
    "p_b": True, "p_ts_s": dt.datetime(2024, 3, 1, 12), "p_ts_ms": dt.datetime(2024, 3, 1, 12, tzinfo=UTC),
    "p_ts_ns": dt.datetime(2024, 3, 1, 21, tzinfo=TOKYO),
}
NULLS: dict[str, Any] = dict.fromkeys(LOW)


def rows() -> pa.Table:
    """The matrix's four rows in the table's own types."""
    return pa.Table.from_pylist([{"id": i, **values} for i, values in enumerate([LOW, HIGH, NULLS, PLAIN])], SCHEMA)


def comparable(table: pa.Table) -> list[tuple[Any, ...]]:
    """`table`'s rows sorted by id, each value comparable with ==: NaN as a marker, an aware timestamp in UTC (the
    same instant whatever the zone it is shown in), a map as a list of pairs."""
    return [tuple(_value(v) for v in row.values()) for row in sorted(table.to_pylist(), key=lambda r: r["id"])]


def _value(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, float) and value == 0.0:
        return ("zero", math.copysign(1.0, value))
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(UTC)
    if isinstance(value, list):
        return [_value(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_value(v) for v in value)
    if isinstance(value, dict):
        return {k: _value(v) for k, v in value.items()}
    return value
