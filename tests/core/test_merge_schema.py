"""`merge_schema=True` on the core's own writes (issue 32; docs/CONCEPTS.md, "Changing tables"): `Transaction.append`,
`append_many` and `overwrite` add the data's columns the table lacks (nullable) and widen the columns the data holds
wider, in the SAME statement as the rows (one catalog transaction: the new version of the schema and the parts), so a
keyed retry replaces both and a rollback leaves neither; time travel to an older CSN reads the schema of then. Which
changes a data schema needs is decided once, in model/evolution.merge_schema, which Spark's merge_schema calls too.
Bad input (a non-bool flag, a narrowing, a type no widening reaches, a partition column, an unsupported type) is a
typed error naming the column, before anything is staged. On SQLite and PostgreSQL."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from airflow_txn import Warehouse
from airflow_txn.errors import (
    InvalidArgumentError,
    SchemaMismatchError,
    SerializationError,
    StaleAttemptError,
    UnsupportedTypeError,
)
from airflow_txn.model import evolution
from airflow_txn.model.evolution import column_id
from tests.core import test_table_changes

TABLE, SCHEMA = test_table_changes.TABLE, test_table_changes.SCHEMA
table = test_table_changes.table
"""The fixture: shop.orders partitioned by day, rows 1 and 2 committed; its value is that commit's CSN."""
OTHER = "shop.stock"
STOCK = pa.schema([("sku", pa.string()), ("qty", pa.int64())])
REPO = Path(__file__).resolve().parents[2]


def orders(ids: list[int], day: str = "d1", id_type: pa.DataType | None = None, **extra: Any) -> pa.Table:
    table = pa.table({"id": pa.array(ids, id_type or pa.int32()), "item": [f"i{i}" for i in ids],
                      "day": [day] * len(ids)})
    for name, values in extra.items():
        table = table.append_column(name, pa.array(values))
    return table


def rows(table: pa.Table) -> list[dict[str, object]]:
    return sorted(table.to_pylist(), key=lambda r: int(r["id"]))


def files_under(root: Path | str) -> list[Path]:
    return sorted(Path(root).rglob("*.parquet")) if isinstance(root, Path) else []


# -- the core's writes ------------------------------------------------------------------------------------------
def test_append_adds_the_new_columns_and_widens_in_one_statement_time_travel_reads_the_old_schema(
        wh: Warehouse, table: int) -> None:
    """Data with a new column, a wider id, its columns in another order: without merge_schema refused, nothing
    staged; with it the transaction sees the new schema at once, others from its CSN on (a concurrent append of the
    old schema still commits: the changes are compatible), old rows read null, and an older CSN reads the old schema
    through every read path (read, dataset, DuckDB)."""
    data = orders([3], id_type=pa.int64(), note=["n3"]).select(["note", "day", "id", "item"])
    t = wh.begin()
    with pytest.raises(SchemaMismatchError, match="note"):
        t.append(TABLE, data)
    assert t.state == "active" and wh.transaction_info(t.tid)["parts"] == []
    assert t.append(TABLE, data, merge_schema=True) == 1
    seen = t.schema(TABLE)
    assert seen.names == ["id", "item", "day", "note"] and seen.field("id").type == pa.int64()
    assert seen.field("note").nullable and column_id(seen.field("note")) == 4
    assert wh.schema(TABLE).names == SCHEMA.names  # not visible to others before the commit
    other = wh.begin()
    other.append(TABLE, orders([4]))  # the schema it sees: version 1
    csn = t.commit()
    other.commit()
    assert wh.schema(TABLE).names == ["id", "item", "day", "note"]
    assert wh.schema(TABLE).field("id").type == pa.int64()
    assert [(r["id"], r["note"]) for r in rows(wh.read(TABLE))] == [(1, None), (2, None), (3, "n3"), (4, None)]
    assert wh.read(TABLE).schema.field("id").type == pa.int64()
    assert wh.schema(TABLE, csn=table).names == SCHEMA.names
    assert wh.read(TABLE, csn=table).column_names == SCHEMA.names  # time travel: the old schema, no column
    assert wh.read(TABLE, csn=table).schema.field("id").type == pa.int32()
    assert rows(wh.read(TABLE, csn=table)) == rows(orders([1, 2]))
    assert wh.read(TABLE, csn=csn).num_rows == 3
    # the lazy paths read the same
    assert rows(wh.dataset(TABLE).to_table()) == rows(wh.read(TABLE))
    assert wh.dataset(TABLE, csn=table).schema.names == SCHEMA.names
    duckdb = pytest.importorskip("duckdb")
    con = duckdb.connect()
    wh.duckdb(con, tables=[TABLE])
    assert con.sql("SELECT id, note FROM shop.orders ORDER BY id").fetchall() == [
        (1, None), (2, None), (3, "n3"), (4, None)]
    wh.duckdb(con, csn=table, tables=[TABLE])
    assert [c[0] for c in con.sql("DESCRIBE shop.orders").fetchall()] == SCHEMA.names


def test_data_that_needs_no_change_is_appended_as_it_is(wh: Warehouse, table: int) -> None:
    with wh.begin() as t:
        assert t.append(TABLE, orders([3]).select(["day", "item", "id"]), merge_schema=True) == 1
    assert wh.schema(TABLE).names == SCHEMA.names
    assert [r["id"] for r in rows(wh.read(TABLE))] == [1, 2, 3]


def test_a_keyed_retry_replaces_the_changes_with_the_rows(wh: Warehouse, table: int) -> None:
    """A key without an attempt: each statement under it replaces the earlier one, the table changes with the rows
    (one statement). With attempts (an Airflow task's retry): the retry's changes and rows replace the first
    attempt's, and the first attempt, stale, is refused."""
    t = wh.begin()
    t.append(TABLE, orders([3], note=["n3"], extra=["e3"]), key="load", merge_schema=True)
    assert t.schema(TABLE).names == [*SCHEMA.names, "note", "extra"]
    t.append(TABLE, orders([4], note=["n4"]), key="load", merge_schema=True)  # the retry: no extra
    assert t.schema(TABLE).names == [*SCHEMA.names, "note"]
    t.commit()
    assert wh.schema(TABLE).names == [*SCHEMA.names, "note"]
    assert [(r["id"], r["note"]) for r in rows(wh.read(TABLE))] == [(1, None), (2, None), (4, "n4")]

    t = wh.begin()
    first = wh.attach(t.tid).use_key("task", 1)
    first.append(TABLE, orders([5], id_type=pa.int64(), note=["n5"], tag=["t5"]), merge_schema=True)
    again = wh.attach(t.tid).use_key("task", 2)
    again.append(TABLE, orders([6], note=["n6"]), merge_schema=True)  # replaces attempt 1: no widening, no tag
    with pytest.raises(StaleAttemptError):
        first.append(TABLE, orders([7], note=["n7"], late=["l7"]), merge_schema=True)
    t.commit()
    assert wh.schema(TABLE).names == [*SCHEMA.names, "note"] and wh.schema(TABLE).field("id").type == pa.int32()
    assert [r["id"] for r in rows(wh.read(TABLE))] == [1, 2, 4, 6]


def test_a_rollback_leaves_neither_the_changes_nor_the_rows(wh: Warehouse, table: int) -> None:
    t = wh.begin()
    t.append(TABLE, orders([3], id_type=pa.int64(), note=["n3"]), merge_schema=True)
    t.rollback()
    assert wh.schema(TABLE).names == SCHEMA.names and wh.schema(TABLE).field("id").type == pa.int32()
    assert rows(wh.read(TABLE)) == rows(orders([1, 2]))
    with wh.begin() as t:  # the column again: a fresh id, never the rolled-back one's
        t.append(TABLE, orders([4], note=["n4"]), merge_schema=True)
    assert column_id(wh.schema(TABLE).field("note")) == 5


def test_the_changes_and_the_rows_are_registered_together_or_not_at_all(wh: Warehouse, table: int,
                                                                        root: Path | str) -> None:
    """Another transaction holds the version the statement would change (its own change, not committed): the
    statement's registration fails as a whole (SerializationError: no version, no part), its files are deleted."""
    before = files_under(root)
    holder = wh.begin()
    holder.add_column(TABLE, pa.field("other", pa.string()))
    t = wh.begin()
    with pytest.raises(SerializationError):
        t.append(TABLE, orders([3], note=["n3"]), merge_schema=True)
    assert wh.transaction_info(t.tid)["parts"] == []
    assert files_under(root) == before
    t.rollback()
    holder.commit()
    assert wh.schema(TABLE).names == [*SCHEMA.names, "other"]


BAD: list[tuple[str, Any, type[Exception], str]] = [
    ("not a bool", "yes", InvalidArgumentError, "merge_schema"),
    ("one", 1, InvalidArgumentError, "merge_schema"),
    ("a narrowing", orders([3], note=["n"]).set_column(0, "id", pa.array([3], pa.int16())), SchemaMismatchError,
     "'id'"),
    ("no widening reaches", orders([3]).set_column(0, "id", pa.array(["3"])), SchemaMismatchError, "'id'"),
    ("a partition column", orders([3]).set_column(2, "day", pa.array(["d1"], pa.large_string())),
     SchemaMismatchError, "'day'"),
    ("an unsupported type", orders([3], at=pa.array([1], pa.time32("s"))), UnsupportedTypeError, "'at'"),
    ("a missing column", orders([3], note=["n"]).drop_columns(["item"]), SchemaMismatchError, "item"),
    ("duplicate columns", orders([3], note=["n"]).append_column("note", pa.array(["m"])), SchemaMismatchError,
     "duplicate"),
    ("not a table", {"id": [3]}, SchemaMismatchError, "pyarrow.Table"),
]


@pytest.mark.parametrize(("what", "bad", "error", "match"), BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_refused_naming_the_column_before_anything_is_staged(
        wh: Warehouse, table: int, what: str, bad: Any, error: type[Exception], match: str) -> None:
    t = wh.begin()
    with pytest.raises(error, match=match):
        if isinstance(bad, (pa.Table, dict)):
            t.append(TABLE, bad, merge_schema=True)
        else:
            t.append(TABLE, orders([3], note=["n"]), merge_schema=bad)
    assert t.state == "active" and wh.transaction_info(t.tid)["parts"] == []
    assert t.schema(TABLE).names == SCHEMA.names and t.schema(TABLE).field("id").type == pa.int32()
    t.append(TABLE, orders([3]))  # the transaction is still usable
    t.commit()
    assert wh.schema(TABLE).names == SCHEMA.names


def test_append_many_merges_each_tables_schema_in_the_one_statement(wh: Warehouse, table: int) -> None:
    wh.create_table(OTHER, STOCK)
    stock = pa.table({"sku": ["a"], "qty": pa.array([1], pa.int64()), "bin": ["b1"]})
    t = wh.begin()
    with pytest.raises(SchemaMismatchError, match="'qty'"):  # one bad table: nothing staged for either
        t.append_many({TABLE: orders([3], note=["n3"]), OTHER: stock.set_column(1, "qty", pa.array([1], pa.int8()))},
                      merge_schema=True)
    assert wh.transaction_info(t.tid)["parts"] == [] and t.schema(TABLE).names == SCHEMA.names
    assert t.append_many({TABLE: orders([3], note=["n3"]), OTHER: stock}, key="k", merge_schema=True) == {
        TABLE: 1, OTHER: 1}
    assert t.append_many({TABLE: orders([4])}, key="k", merge_schema=True) == {TABLE: 1}  # replaces both
    t.commit()
    assert wh.schema(TABLE).names == SCHEMA.names and wh.schema(OTHER).names == STOCK.names
    assert wh.read(OTHER).num_rows == 0 and [r["id"] for r in rows(wh.read(TABLE))] == [1, 2, 4]
    with wh.begin() as t:
        t.append_many({TABLE: orders([5], note=["n5"]), OTHER: stock}, merge_schema=True)
    assert wh.schema(TABLE).names == [*SCHEMA.names, "note"] and wh.schema(OTHER).names == [*STOCK.names, "bin"]


def test_overwrite_merges_the_schema_too(wh: Warehouse, table: int) -> None:
    with wh.begin() as t:
        t.append(TABLE, orders([3], day="d2"))
    with wh.begin() as t:
        assert t.overwrite(TABLE, orders([9], note=["n9"]), partitions=[{"day": "d1"}], merge_schema=True) == 1
    assert [(r["id"], r["note"]) for r in rows(wh.read(TABLE))] == [(3, None), (9, "n9")]
    t = wh.begin()
    with pytest.raises(InvalidArgumentError, match="merge_schema"):
        t.overwrite(TABLE, orders([9]), merge_schema="no")
    t.rollback()


# -- the decision, in one place ---------------------------------------------------------------------------------
V1 = evolution.with_ids(pa.schema([("id", pa.int32()), ("qty", pa.int64()), ("day", pa.string())]), fresh=True)


def test_the_model_decides_the_changes_a_data_schema_needs() -> None:
    data = pa.schema([("day", pa.string()), ("id", pa.int64()), ("qty", pa.int64()), ("note", pa.string(), False)])
    merged = evolution.merge_schema(V1, data, table="t.t", partition_by=("day",))
    assert [(c.kind, c.column) for c in merged.changes] == [("alter_column", "id"), ("add_column", "note")]
    assert all(c.compatible for c in merged.changes)
    assert merged.schema.names == ["id", "qty", "day", "note"] and merged.schema.field("id").type == pa.int64()
    assert merged.schema.field("note").nullable and column_id(merged.schema.field("note")) == 4
    assert "note" in merged.detail and "id" in merged.detail
    same = evolution.merge_schema(V1, V1, table="t.t")
    assert same.changes == () and same.schema == V1
    # what a column fits is the engine's to say (Spark writes a ShortType into a uint8 column): no change then
    fits = evolution.merge_schema(V1, pa.schema([("id", pa.int16())]), table="t.t", fits=lambda name, _t: True)
    assert fits.changes == ()


@pytest.mark.parametrize(("data", "error", "match"), [
    (pa.schema([("qty", pa.int32())]), SchemaMismatchError, r"'qty'.*never narrows"),
    (pa.schema([("qty", pa.string())]), SchemaMismatchError, r"'qty'.*no widening"),
    (pa.schema([("day", pa.large_string())]), SchemaMismatchError, r"'day'.*partition column"),
    (pa.schema([("at", pa.time64("us"))]), UnsupportedTypeError, "'at'"),
    (pa.schema([("n", pa.int8()), ("n", pa.int8())]), SchemaMismatchError, "duplicate"),
    ("not a schema", SchemaMismatchError, "pyarrow.Schema"),
])
def test_the_model_refuses_naming_the_column(data: Any, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        evolution.merge_schema(V1, data, table="t.t", partition_by=("day",))


def test_add_column_refuses_a_type_create_table_refuses() -> None:
    """Found with merge_schema: add_column took any Arrow type (a time32, a dictionary), which create_table refuses
    (not every engine path reads and writes it back exactly)."""
    for type_ in (pa.time32("s"), pa.dictionary(pa.int8(), pa.string()), pa.null()):
        with pytest.raises(UnsupportedTypeError, match="'x'"):
            evolution.add_column(V1, pa.field("x", type_), table="t.t")


def test_sparks_merge_schema_asks_the_model_and_decides_nothing_itself() -> None:
    """One owner: spark/evolve.py calls evolution.merge_schema for the changes, never the rules it is made of."""
    source = (REPO / "airflow_txn" / "spark" / "evolve.py").read_text(encoding="utf-8")
    called = {node.attr for node in ast.walk(ast.parse(source))
              if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "evolution"}
    assert called - {"SchemaMerge"} == {"merge_schema"}  # the type it returns, and the one call
