"""Issue 31, item 3: a table's column types are those that round-trip exactly through every path (docs/TYPES.md).

create_table refuses any other type (as a column, inside a list, struct or map) with an UnsupportedTypeError naming
the column, the type and what to use instead, creating nothing; a timestamp[ns] column holds whole microseconds
(Spark's precision), a value with a sub-microsecond part refused before anything is staged.
"""

from __future__ import annotations

import datetime as dt

import pyarrow as pa

from airflow_txn import Warehouse
from airflow_txn.errors import SchemaMismatchError, UnsupportedTypeError
from tests.core.test_errors import rejected, still_usable
from tests.helpers import make_tables

REFUSED = [  # (type, what the message proposes instead)
    (pa.float16(), "float32"), (pa.time64("us"), "timestamp"), (pa.time32("s"), "timestamp"),
    (pa.duration("s"), "int64"), (pa.month_day_nano_interval(), "struct"),
    (pa.dictionary(pa.int32(), pa.string()), "its value type"), (pa.binary(16), "binary"),
    (pa.decimal256(40, 2), "decimal128"), (pa.string_view(), "string"), (pa.list_(pa.int32(), 3), "list"),
    (pa.null(), "nullable column"), (pa.struct([]), "at least one field"),
    (pa.list_(pa.uint8()), "int16"), (pa.struct([("u", pa.uint64())]), "decimal128"),
    (pa.map_(pa.string(), pa.date64()), "date32"), (pa.list_(pa.timestamp("ns", "UTC")), r"timestamp\[us, UTC\]"),
    (pa.struct([("t", pa.timestamp("ms"))]), r"timestamp\[us\]"), (pa.list_(pa.float16()), "float32"),
]
ACCEPTED = [pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64(), pa.date64(), pa.timestamp("ns"),
            pa.timestamp("s", "Europe/Paris"), pa.large_string(), pa.large_binary(), pa.decimal128(38, 10),
            pa.large_list(pa.int8()), pa.map_(pa.string(), pa.list_(pa.timestamp("us", "UTC"))),
            pa.struct([("a", pa.date32()), ("b", pa.list_(pa.struct([("c", pa.binary())])))])]


def test_create_table_refuses_a_type_not_every_path_round_trips_naming_what_to_use(wh: Warehouse) -> None:
    calls = [lambda t=t: wh.create_table("ns.bad", pa.schema([("id", pa.int64()), ("col", t)])) for t, _ in REFUSED]
    make_tables(wh)
    for (arrow_type, instead), call in zip(REFUSED, calls, strict=True):
        error = rejected(wh, wh.config.root, UnsupportedTypeError, call, match=rf"column 'col' of ns.bad.*{instead}")
        assert str(arrow_type) in str(error)
        assert isinstance(error, SchemaMismatchError)  # what callers of earlier releases catch
    assert "ns.bad" not in wh.tables()
    for i, arrow_type in enumerate(ACCEPTED):
        wh.create_table(f"ns.ok{i}", pa.schema([("id", pa.int64()), ("col", arrow_type)]))


def test_a_sub_microsecond_value_of_a_timestamp_ns_column_is_refused_before_anything_is_staged(
        wh: Warehouse) -> None:
    schema = pa.schema([("id", pa.int64()), ("at", pa.timestamp("ns", "UTC"))])
    make_tables(wh)
    wh.create_table("ns.nanos", schema)
    whole = pa.table({"id": [1], "at": pa.array([1_700_000_000_000_001_000], pa.timestamp("ns", "UTC"))}, schema=schema)
    finer = pa.table({"id": [2], "at": pa.array([1_700_000_000_000_000_001], pa.timestamp("ns", "UTC"))},
                     schema=schema)
    t = wh.begin()
    rejected(wh, wh.config.root, SchemaMismatchError, lambda: t.append("ns.nanos", finer),
             match=r"column 'at' of ns.nanos is timestamp\[ns\].*sub-microsecond.*truncate")
    t.append("ns.nanos", whole)
    still_usable(wh, t)
    assert wh.read("ns.nanos").column("at").to_pylist()[0] == dt.datetime(2023, 11, 14, 22, 13, 20, 1, tzinfo=dt.UTC)
