"""model/evolution.py (issue 32, the pure part): column ids, schema changes and their compatibility, and the
projection that reads a part written under one schema version as another, without rewriting it."""

from __future__ import annotations

import datetime as dt
import decimal
import io

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_txn.errors import InvalidNameError, SchemaMismatchError
from airflow_txn.model import evolution as ev

T = "sales.orders"
BASE = pa.schema([("id", pa.int32()), ("day", pa.string()), ("amount", pa.float32()),
                  ("tags", pa.list_(pa.string())), ("who", pa.struct([("name", pa.string()), ("age", pa.int8())]))])


def ids_of(schema: pa.Schema) -> dict[str, int | None]:
    return {f.name: ev.column_id(f) for f in schema}


def test_ids_are_given_in_order_to_every_field_nested_ones_too_and_never_twice() -> None:
    schema = ev.with_ids(BASE)
    assert ids_of(schema) == {"id": 1, "day": 2, "amount": 3, "tags": 4, "who": 5}  # a struct's fields first
    assert ev.column_id(schema.field("tags").type.value_field) == 6  # then their children, in turn
    who = schema.field("who").type
    assert [ev.column_id(who.field(i)) for i in range(2)] == [7, 8]
    assert ev.last_id(schema) == 8 and ev.with_ids(schema) == schema  # idempotent
    dropped, _ = ev.drop_column(schema, "who", table=T)
    assert ev.last_id(dropped) == 8  # the dropped column's ids are never given again
    added, _ = ev.add_column(dropped, pa.field("note", pa.string()), table=T)
    assert ev.column_id(added.field("note")) == 9


def test_ids_are_those_iceberg_gives_the_published_table() -> None:
    """Iceberg readers match a file's columns by field id: a table's ids must be the fresh ids its published Iceberg
    table gets (publish/iceberg.py), nested ones included, or they would read one column as another."""
    pytest.importorskip("pyiceberg")
    from pyiceberg.io.pyarrow import _pyarrow_to_schema_without_ids
    from pyiceberg.schema import assign_fresh_schema_ids

    nested = pa.schema([("a", pa.int64()), ("s", pa.struct([("x", pa.int32()), ("t", pa.struct([("p", pa.string())])),
                                                            ("l", pa.list_(pa.struct([("q", pa.int8())])))])),
                        ("m", pa.map_(pa.string(), pa.struct([("v", pa.float64())]))), ("b", pa.string()), *BASE])

    def ids(field: pa.Field, path: str = "") -> dict[str, int | None]:
        name = path + field.name
        found = {name: ev.column_id(field)}
        for child in ev._children(field.type):
            found |= ids(child, name + ".")
        return found

    ours = {k: v for f in ev.with_ids(nested, fresh=True) for k, v in ids(f).items()}
    iceberg = assign_fresh_schema_ids(_pyarrow_to_schema_without_ids(nested))
    arrow_names = {"s.l.element": "s.l.item", "s.l.element.q": "s.l.item.q", "tags.element": "tags.item"}
    for name in ("a", "s", "m", "b", "s.x", "s.t", "s.l", "s.t.p", "s.l.element", "s.l.element.q", "m.key",
                 "m.value", "m.value.v", "id", "day", "amount", "tags", "tags.element", "who", "who.name", "who.age"):
        assert ours[arrow_names.get(name, name)] == iceberg.find_field(name).field_id, name


def test_ids_a_users_schema_carries_are_replaced_for_a_new_table() -> None:
    foreign = pa.schema([pa.field("a", pa.int64(), metadata={ev.COLUMN_ID: b"42"}), pa.field("b", pa.string())])
    assert ids_of(ev.with_ids(foreign, fresh=True)) == {"a": 1, "b": 2}


def test_parquet_files_carry_the_ids_as_field_ids() -> None:
    schema = ev.with_ids(BASE)
    sink = io.BytesIO()
    pq.write_table(schema.empty_table(), sink)
    written = pq.read_schema(io.BytesIO(sink.getvalue()))
    assert {f.name: ev.column_id(f) for f in written} == ids_of(schema)


def test_compatible_and_incompatible_changes() -> None:
    schema = ev.with_ids(BASE)
    found = {
        "add nullable": ev.add_column(schema, pa.field("note", pa.string()), table=T)[1],
        "add default": ev.add_column(schema, pa.field("n", pa.int64(), nullable=False), default=7, table=T)[1],
        "widen": ev.alter_column(schema, "id", pa.int64(), table=T)[1],
        "relax": ev.set_nullable(ev.set_nullable(schema, "id", False, table=T)[0], "id", True, table=T)[1],
        "rename": ev.rename_column(schema, "amount", "total", table=T)[1],
        "drop": ev.drop_column(schema, "amount", table=T)[1],
        "tighten": ev.set_nullable(schema, "id", False, table=T)[1],
    }
    assert {k: c.compatible for k, c in found.items()} == {
        "add nullable": True, "add default": True, "widen": True, "relax": True,
        "rename": False, "drop": False, "tighten": False}
    assert found["rename"].detail == "renamed column 'amount' to 'total'"


@pytest.mark.parametrize(("old", "new", "ok"), [
    (pa.int8(), pa.int16(), True), (pa.int16(), pa.int64(), True), (pa.int64(), pa.int32(), False),
    (pa.uint8(), pa.uint32(), True), (pa.uint8(), pa.int16(), True), (pa.uint32(), pa.int32(), False),
    (pa.uint64(), pa.int64(), False), (pa.float32(), pa.float64(), True), (pa.float64(), pa.float32(), False),
    (pa.int32(), pa.float64(), False), (pa.decimal128(10, 2), pa.decimal128(12, 2), True),
    (pa.decimal128(10, 2), pa.decimal128(12, 3), False), (pa.date32(), pa.timestamp("us"), True),
    (pa.date32(), pa.timestamp("ns"), False), (pa.date32(), pa.timestamp("us", "UTC"), False),
    (pa.string(), pa.large_string(), True), (pa.large_string(), pa.string(), False),
    (pa.binary(), pa.large_binary(), True), (pa.string(), pa.int64(), False),
])
def test_only_lossless_widenings_are_allowed(old: pa.DataType, new: pa.DataType, ok: bool) -> None:
    assert ev.is_widening(old, new) is ok


def test_bad_changes_are_typed_errors_naming_the_table_and_the_column() -> None:
    schema = ev.with_ids(BASE)
    cases = [
        (lambda: ev.add_column(schema, pa.field("id", pa.int8()), table=T), SchemaMismatchError, "already"),
        (lambda: ev.add_column(schema, pa.field("x", pa.int8(), nullable=False), table=T), SchemaMismatchError,
         "needs a default"),
        (lambda: ev.add_column(schema, pa.field("x", pa.int8()), default="many", table=T), SchemaMismatchError,
         "is not a int8"),
        (lambda: ev.add_column(schema, "x", table=T), SchemaMismatchError, "pyarrow.Field"),
        (lambda: ev.add_column(schema, pa.field("a/b", pa.int8()), table=T), InvalidNameError, "a/b"),
        (lambda: ev.rename_column(schema, "nope", "x", table=T), SchemaMismatchError, "no column 'nope'"),
        (lambda: ev.rename_column(schema, "day", "d", table=T, partition_by=["day"]), SchemaMismatchError,
         "partition column"),
        (lambda: ev.rename_column(schema, "id", "day", table=T), SchemaMismatchError, "already"),
        (lambda: ev.drop_column(schema, "day", table=T, partition_by=["day"]), SchemaMismatchError,
         "partition column"),
        (lambda: ev.alter_column(schema, "id", pa.int16(), table=T), SchemaMismatchError, "int32 to int16"),
        (lambda: ev.alter_column(schema, "day", pa.large_string(), table=T, partition_by=["day"]),
         SchemaMismatchError, "partition column"),
        (lambda: ev.set_nullable(schema, "id", True, table=T), SchemaMismatchError, "already"),
    ]
    for call, error, match in cases:
        with pytest.raises(error, match=match) as raised:
            call()
        assert T in str(raised.value) or error is InvalidNameError
    two = ev.with_ids(pa.schema([("day", pa.string()), ("x", pa.int8())]))
    with pytest.raises(SchemaMismatchError, match="last one"):
        ev.drop_column(two, "x", table=T, partition_by=["day"])


def test_a_part_reads_under_every_later_version_without_being_rewritten() -> None:
    v1 = ev.with_ids(BASE)
    rows = pa.Table.from_pylist([{"id": 1, "day": "d", "amount": 1.5, "tags": ["a"], "who": {"name": "x", "age": 3}},
                                 {"id": 2, "day": "d", "amount": None, "tags": None, "who": None}], v1)
    v2, _ = ev.add_column(v1, pa.field("note", pa.string()), table=T)
    v3, _ = ev.add_column(v2, pa.field("qty", pa.int64(), nullable=False), default=1, table=T)
    v4, _ = ev.alter_column(v3, "id", pa.int64(), table=T)
    v5, _ = ev.rename_column(v4, "amount", "total", table=T)
    v6, _ = ev.drop_column(v5, "tags", table=T)
    v7, _ = ev.alter_column(v6, "total", pa.float64(), table=T)
    got = ev.projection(v1, v7)(rows)
    assert got.schema == v7
    assert got.to_pylist() == [
        {"id": 1, "day": "d", "total": 1.5, "who": {"name": "x", "age": 3}, "note": None, "qty": 1},
        {"id": 2, "day": "d", "total": None, "who": None, "note": None, "qty": 1}]
    assert ev.projection(v1, v1)(rows) is rows  # nothing changed: nothing done
    back = ev.projection(v7, v1)  # time travel reads old parts only; a newer part under an older schema is
    assert back(got.slice(0, 0)).num_rows == 0  # never asked for, but projects by id all the same


def test_defaults_of_every_kind_round_trip() -> None:
    schema = ev.with_ids(pa.schema([("id", pa.int64())]))
    for field, default in [(pa.field("d", pa.date32(), nullable=False), dt.date(2024, 1, 1)),
                           (pa.field("m", pa.decimal128(9, 2), nullable=False), decimal.Decimal("1.25")),
                           (pa.field("s", pa.string()), "é"), (pa.field("t", pa.timestamp("us", "UTC")),
                                                                dt.datetime(2024, 1, 1, tzinfo=dt.UTC))]:
        evolved, _ = ev.add_column(schema, field, default=default, table=T)
        assert ev.default_of(evolved.field(field.name)).as_py() == default  # type: ignore[union-attr]
        filled = ev.projection(schema, evolved)(pa.table({"id": [1, 2]}, schema=schema))
        assert filled.column(field.name).to_pylist() == [default, default]


def test_a_schema_from_before_ids_is_matched_by_name() -> None:
    old = BASE  # a table created before column ids: its parts' schema has none
    new, _ = ev.add_column(ev.with_ids(BASE), pa.field("note", pa.string()), table=T)
    rows = pa.Table.from_pylist([{"id": 1, "day": "d", "amount": 2.0, "tags": [], "who": None}], old)
    assert ev.projection(old, new)(rows).column("note").to_pylist() == [None]
    assert ev.projection(old, new)(rows).column("amount").to_pylist() == [2.0]


def test_a_part_written_before_nulls_were_allowed_or_forbidden_reads_under_the_new_nullability() -> None:
    """Issue 32 (found by the random histories, tests/history): a part written while a column was nullable, read
    after set_nullable(False) (and the other way round), has the reader's field, so it concatenates with the parts
    written since (pa.concat_tables refused 'int32' beside 'int32 not null')."""
    nullable = ev.with_ids(pa.schema([("id", pa.int64()), ("x", pa.int32())]))
    not_null, _ = ev.set_nullable(nullable, "x", False, table=T)
    for written, read in [(nullable, not_null), (not_null, nullable)]:
        rows = pa.Table.from_pylist([{"id": 1, "x": 5}], written)
        got = ev.projection(written, read)(rows)
        assert got.schema == read and got.to_pylist() == [{"id": 1, "x": 5}]
        pa.concat_tables([got, pa.Table.from_pylist([{"id": 2, "x": 6}], read)])
