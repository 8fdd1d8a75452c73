"""Changing tables inside a transaction (docs/DESIGN.md, D27; docs/CONCEPTS.md, "Changing tables"): a change is a
version of the table's schema stamped like a part. Time travel reads the schema of its snapshot; parts written under
an older version are read under the newer one by column id, never rewritten; compatible changes never fail concurrent
appends, incompatible ones conflict with writers of the table (first committer wins); rollback and keyed retries
withdraw a change like a write; bad input is refused before anything is staged. On SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import sqlalchemy as sa
from alembic import command

from airflow_txn import Warehouse
from airflow_txn.catalog import meta_records, migrate
from airflow_txn.errors import (
    CatalogUpgradeRequiredError,
    InvalidNameError,
    SchemaMismatchError,
    SerializationError,
    TableExistsError,
    TableNotFoundError,
)
from airflow_txn.model.evolution import column_id

TABLE = "shop.orders"
SCHEMA = pa.schema([("id", pa.int32()), ("item", pa.string()), ("day", pa.string())])


def orders(ids: list[int], day: str = "d1", **extra: list[object]) -> pa.Table:
    columns: dict[str, object] = {"id": pa.array(ids, pa.int32()), "item": [f"i{i}" for i in ids],
                                  "day": [day] * len(ids)}
    table = pa.table(columns)
    for name, values in extra.items():
        table = table.append_column(name, pa.array(values))
    return table


@pytest.fixture
def table(wh: Warehouse) -> int:
    """shop.orders partitioned by day, with rows 1 and 2 committed; returns that commit's CSN."""
    wh.create_table(TABLE, SCHEMA, ["day"])
    t = wh.begin()
    t.append(TABLE, orders([1, 2]))
    return t.commit()


def rows(table: pa.Table) -> list[dict[str, object]]:
    return sorted(table.to_pylist(), key=lambda r: str(r["id"]))


def test_add_a_column_and_load_it_in_one_transaction_time_travel_keeps_the_old_schema(wh: Warehouse,
                                                                                       table: int) -> None:
    t = wh.begin()
    t.add_column(TABLE, pa.field("discount", pa.float64()))
    t.append(TABLE, orders([3], discount=[0.5]))  # checked against the version the transaction sees: its own
    assert rows(t.read(TABLE))[2] == {"id": 3, "item": "i3", "day": "d1", "discount": 0.5}
    assert wh.schema(TABLE).names == ["id", "item", "day"]  # not visible to others before the commit
    assert wh.read(TABLE).column_names == ["id", "item", "day"]
    csn = t.commit()
    assert wh.schema(TABLE).names == ["id", "item", "day", "discount"]
    assert wh.schema(TABLE, csn=csn).names == ["id", "item", "day", "discount"]
    assert wh.schema(TABLE, csn=table).names == ["id", "item", "day"]  # time travel keeps the old schema
    assert [r["discount"] for r in rows(wh.read(TABLE))] == [None, None, 0.5]  # old parts: null, not rewritten
    assert wh.read(TABLE, csn=table).column_names == ["id", "item", "day"]
    assert rows(wh.read(TABLE, csn=table)) == rows(orders([1, 2]))
    assert wh.last_commit_csn(TABLE) == csn
    # the lazy paths read the same
    assert rows(wh.dataset(TABLE).to_table()) == rows(wh.read(TABLE))
    assert wh.dataset(TABLE, csn=table).schema.names == ["id", "item", "day"]


def test_a_default_fills_rows_written_before(wh: Warehouse, table: int) -> None:
    with wh.begin() as t:
        t.add_column(TABLE, pa.field("qty", pa.int64(), nullable=False), default=1)
    t = wh.begin()
    t.append(TABLE, orders([3], qty=[7]))
    t.commit()
    assert [r["qty"] for r in rows(wh.read(TABLE))] == [1, 1, 7]


def test_rename_is_read_by_column_id_widen_is_cast_drop_is_not_read(wh: Warehouse, table: int) -> None:
    ids_before = [column_id(f) for f in wh.schema(TABLE)]
    with wh.begin() as t:
        t.rename_column(TABLE, "item", "product")
        t.alter_column(TABLE, "id", pa.int64())
    after = wh.schema(TABLE)
    assert after.names == ["id", "product", "day"] and after.field("id").type == pa.int64()
    assert [column_id(f) for f in after] == ids_before  # a rename or a widening keeps the id
    got = wh.read(TABLE)
    assert got.schema.field("id").type == pa.int64()
    assert rows(got) == [{"id": 1, "product": "i1", "day": "d1"}, {"id": 2, "product": "i2", "day": "d1"}]
    with wh.begin() as t:
        t.append(TABLE, pa.table({"id": pa.array([3], pa.int64()), "product": ["p3"], "day": ["d2"]}))
        t.drop_column(TABLE, "product")
    assert rows(wh.read(TABLE)) == [{"id": 1, "day": "d1"}, {"id": 2, "day": "d1"}, {"id": 3, "day": "d2"}]
    assert rows(wh.read(TABLE, csn=table)) == rows(orders([1, 2]))  # the dropped values stay readable back then


def test_every_part_file_carries_the_column_ids_as_parquet_field_ids(wh: Warehouse, table: int, root: Path) -> None:
    if not isinstance(root, Path):
        pytest.skip("reads the files directly from a local root")
    files = sorted(root.rglob("*.parquet"))
    assert files
    stored = pq.read_schema(files[0])
    assert stored.field("id").metadata[b"PARQUET:field_id"] == b"1"
    assert stored.field("item").metadata[b"PARQUET:field_id"] == b"2"


def test_a_compatible_change_never_fails_a_concurrent_append(wh: Warehouse, table: int) -> None:
    change, load = wh.begin(), wh.begin()
    change.add_column(TABLE, pa.field("discount", pa.float64()))
    load.append(TABLE, orders([3]))  # the old schema: the version `load` sees
    change.commit()
    load.commit()  # both commit
    assert [(r["id"], r["discount"]) for r in rows(wh.read(TABLE))] == [(1, None), (2, None), (3, None)]


def test_an_incompatible_change_and_a_concurrent_append_first_committer_wins(wh: Warehouse, table: int) -> None:
    change, load = wh.begin(), wh.begin()
    change.drop_column(TABLE, "item")
    load.append(TABLE, orders([3]))
    load.commit()  # the writer commits first ...
    with pytest.raises(SerializationError, match=r"shop\.orders.*dropped column 'item'"):
        change.commit()  # ... so the change conflicts
    assert change.state == "rolled_back"
    assert wh.schema(TABLE).names == ["id", "item", "day"]

    change, load = wh.begin(), wh.begin()
    load.append(TABLE, orders([4]))
    change.drop_column(TABLE, "item")
    change.commit()  # the change commits first ...
    with pytest.raises(SerializationError, match=r"shop\.orders.*dropped column 'item'"):
        load.commit()  # ... so the writer of the old version conflicts
    assert ids_of(wh.read(TABLE)) == [1, 2, 3]
    assert wh.schema(TABLE).names == ["id", "day"]


def ids_of(table: pa.Table) -> list[int]:
    return sorted(table.column("id").to_pylist())


def test_two_changes_of_one_table_at_once_the_second_is_refused(wh: Warehouse, table: int) -> None:
    first, second = wh.begin(), wh.begin()
    first.add_column(TABLE, pa.field("a", pa.int64()))
    with pytest.raises(SerializationError, match=r"shop\.orders.*added column 'b'"):
        second.add_column(TABLE, pa.field("b", pa.int64()))
    first.commit()
    second.rollback()
    late = wh.begin()
    stale = wh.begin()
    late.commit()
    with wh.begin() as t:
        t.add_column(TABLE, pa.field("c", pa.int64()))
    with pytest.raises(SerializationError):  # its snapshot predates the committed change: it conflicts
        stale.add_column(TABLE, pa.field("d", pa.int64()))
    assert wh.schema(TABLE).names == ["id", "item", "day", "a", "c"]


def test_rollback_leaves_the_schema_unchanged(wh: Warehouse, table: int) -> None:
    t = wh.begin()
    t.add_column(TABLE, pa.field("discount", pa.float64()))
    t.append(TABLE, orders([3], discount=[1.0]))
    t.rollback()
    assert wh.schema(TABLE).names == ["id", "item", "day"]
    assert ids_of(wh.read(TABLE)) == [1, 2]
    with wh.begin() as t:  # the table can change again
        t.add_column(TABLE, pa.field("discount", pa.int64()))
    assert wh.schema(TABLE).field("discount").type == pa.int64()


def test_a_keyed_retry_replaces_the_earlier_attempts_change(wh: Warehouse, table: int) -> None:
    t = wh.begin()
    t.add_column(TABLE, pa.field("discount", pa.float64()), key="ddl")
    t.add_column(TABLE, pa.field("rebate", pa.float64()), key="ddl")  # the retry: the first attempt withdrawn
    assert t.read(TABLE).column_names == ["id", "item", "day", "rebate"]
    t.append(TABLE, orders([3], rebate=[2.0]))
    t.commit()
    assert wh.schema(TABLE).names == ["id", "item", "day", "rebate"]
    assert [r["rebate"] for r in rows(wh.read(TABLE))] == [None, None, 2.0]


@pytest.mark.parametrize(("change", "error"), [
    (lambda t: t.drop_column(TABLE, "nope"), SchemaMismatchError),
    (lambda t: t.rename_column(TABLE, "nope", "x"), SchemaMismatchError),
    (lambda t: t.alter_column(TABLE, "id", pa.int16()), SchemaMismatchError),  # a narrowing
    (lambda t: t.alter_column(TABLE, "id", "int64"), SchemaMismatchError),
    (lambda t: t.drop_column(TABLE, "day"), SchemaMismatchError),  # a partition column
    (lambda t: t.rename_column(TABLE, "day", "date"), SchemaMismatchError),
    (lambda t: t.add_column(TABLE, pa.field("id", pa.int64())), SchemaMismatchError),  # exists
    (lambda t: t.add_column(TABLE, pa.field("n", pa.int64(), nullable=False)), SchemaMismatchError),  # no default
    (lambda t: t.add_column(TABLE, "n"), SchemaMismatchError),
    (lambda t: t.add_column("shop.missing", pa.field("n", pa.int64())), TableNotFoundError),
    (lambda t: t.rename_column(TABLE, "item", "a/b"), InvalidNameError),
    (lambda t: t.set_nullable(TABLE, "item", "no"), InvalidNameError),
])
def test_bad_input_is_refused_before_anything_is_staged(wh: Warehouse, table: int,
                                                        change: Callable[[object], None], error: type) -> None:
    t = wh.begin()
    with pytest.raises(error):
        change(t)
    assert t.state == "active"  # still usable: nothing was staged
    t.append(TABLE, orders([3]))
    t.commit()
    assert wh.schema(TABLE).names == ["id", "item", "day"]
    assert ids_of(wh.read(TABLE)) == [1, 2, 3]


def test_forbidding_nulls_checks_the_rows(wh: Warehouse, table: int) -> None:
    with wh.begin() as t:
        t.set_nullable(TABLE, "item", False)
    assert not wh.schema(TABLE).field("item").nullable
    with wh.begin() as t:
        t.set_nullable(TABLE, "item", True)
        t.append(TABLE, pa.table({"id": pa.array([3], pa.int32()), "item": pa.array([None], pa.string()),
                                  "day": ["d1"]}))
    t = wh.begin()
    with pytest.raises(SchemaMismatchError, match="holds 1 null"):
        t.set_nullable(TABLE, "item", False)
    t.rollback()


def test_update_and_delete_rewrite_old_parts_under_the_new_version(wh: Warehouse, table: int) -> None:
    with wh.begin() as t:
        t.rename_column(TABLE, "item", "product")
        t.add_column(TABLE, pa.field("qty", pa.int64()))
    with wh.begin() as t:
        assert t.update(TABLE, pc.field("id") == 1, {"qty": 5}) == 1
        assert t.delete(TABLE, pc.field("id") == 2) == 1
    assert rows(wh.read(TABLE)) == [{"id": 1, "product": "i1", "day": "d1", "qty": 5}]


def test_compaction_merges_parts_of_one_version_only(wh: Warehouse, table: int) -> None:
    with wh.begin() as t:
        t.append(TABLE, orders([3]))
    with wh.begin() as t:
        t.add_column(TABLE, pa.field("qty", pa.int64()))
    for i in (4, 5):
        with wh.begin() as t:
            t.append(TABLE, orders([i], qty=[i]))
    before = rows(wh.read(TABLE))
    wh.compact(TABLE)
    assert rows(wh.read(TABLE)) == before


def test_a_catalog_of_schema_version_6_is_used_as_it_is_and_refuses_changes(catalog_url: str, tmp_path: Path) -> None:
    engine = sa.create_engine(catalog_url)
    with engine.begin() as conn:
        command.upgrade(migrate.config(conn), "schema_v6")
        meta_records.warehouse_id(conn)
    engine.dispose()
    root = str(tmp_path / "root")
    with Warehouse.open(catalog=catalog_url, root=root) as wh:
        wh.create_table(TABLE, SCHEMA, ["day"])
        with wh.begin() as t:
            t.append(TABLE, orders([1, 2]))
        t = wh.begin()
        with pytest.raises(CatalogUpgradeRequiredError, match=r"needs catalog schema version 7.*airflow-txn upgrade"):
            t.add_column(TABLE, pa.field("n", pa.int64()))
        t.append(TABLE, orders([3]))
        t.commit()  # still usable
        assert ids_of(wh.read(TABLE)) == [1, 2, 3]
        assert wh.schema(TABLE, csn=wh.readable_csn()).names == ["id", "item", "day"]
    with Warehouse.open(catalog=catalog_url, root=root, upgrade=True) as wh:  # version 1 backfilled at CSN 1
        assert wh.schema(TABLE, csn=1).names == ["id", "item", "day"]
        with wh.begin() as t:
            t.add_column(TABLE, pa.field("n", pa.int64()))
        assert [r["n"] for r in rows(wh.read(TABLE))] == [None, None, None]
        assert ids_of(wh.read(TABLE, csn=2)) == [1, 2]


CHANGES: dict[str, tuple[Callable[[Any], None], bool]] = {
    "add_column": (lambda t: t.add_column(TABLE, pa.field("n", pa.int64())), True),
    "alter_column": (lambda t: t.alter_column(TABLE, "id", pa.int64()), True),
    "rename_column": (lambda t: t.rename_column(TABLE, "item", "product"), False),
    "drop_column": (lambda t: t.drop_column(TABLE, "item"), False),
    "forbid_nulls": (lambda t: t.set_nullable(TABLE, "item", False), False),
}
WRITES: dict[str, Callable[[Any], object]] = {
    "append": lambda t: t.append(TABLE, orders([3])),
    "overwrite": lambda t: t.overwrite(TABLE, orders([3]), partitions=[{"day": "d1"}]),
    "update": lambda t: t.update(TABLE, pc.field("id") == 1, {"item": "x"}),
}


@pytest.mark.parametrize("change", list(CHANGES))
@pytest.mark.parametrize("write", list(WRITES))
@pytest.mark.parametrize("change_commits_first", [True, False])
def test_histories_of_a_change_and_a_concurrent_write(wh: Warehouse, table: int, change: str, write: str,
                                                      change_commits_first: bool) -> None:
    """D27 point 4: a compatible change and a concurrent write both commit; an incompatible one and a concurrent
    write: the first to commit wins, the other fails with SerializationError naming the table."""
    make, compatible = CHANGES[change]
    changer, writer = wh.begin(), wh.begin()
    make(changer)
    WRITES[write](writer)
    first, second = (changer, writer) if change_commits_first else (writer, changer)
    first.commit()
    if compatible:
        second.commit()
        assert changer.state == writer.state == "committed"
    else:
        with pytest.raises(SerializationError, match=r"table shop\.orders"):
            second.commit()
        assert second.state == "rolled_back"
    wh.read(TABLE)  # every committed part reads under the table's newest schema


def test_a_commit_record_left_unapplied_is_rolled_forward_with_its_changes(wh: Warehouse, table: int) -> None:
    """The changes are stamped by the commit's apply with the parts, so recovery covers them: a committer that
    stopped right after its record (only the record step run) leaves them for anyone to apply."""
    from airflow_txn.core import commit

    if wh.runtime.oracle.external_log is not None:
        pytest.skip("the record step alone is the SQL oracle's (ZooKeeper's records are applied by the mirror)")
    wh.create_table("shop.items", pa.schema([("id", pa.int64())]))
    t = wh.begin()
    t.add_column(TABLE, pa.field("discount", pa.float64()))
    t.append(TABLE, orders([3], discount=[0.5]))
    t.rename_column("shop.items", "id", "item_id")  # a change alone in its table: the record names it too
    csn, wrote = commit._record(wh.runtime, t.tid)
    assert wrote and wh.readable_csn() == csn - 1
    assert wh.schema(TABLE, csn=csn - 1).names == ["id", "item", "day"]
    wh.recover()
    assert wh.readable_csn() == csn
    assert wh.schema(TABLE, csn=csn).names == ["id", "item", "day", "discount"]
    assert wh.schema("shop.items").names == ["item_id"]  # txn_tables' cache follows the apply
    assert [r["discount"] for r in rows(wh.read(TABLE))] == [None, None, 0.5]
    assert wh.last_commit_csn("shop.items") == csn


# -- creating a table inside a transaction ---------------------------------------------------------------------
NEW = "shop.returns"
RETURNS = pa.schema([("id", pa.int64()), ("day", pa.string())])


def returns(ids: list[int]) -> pa.Table:
    return pa.table({"id": ids, "day": ["d1"] * len(ids)}, schema=RETURNS)


def test_a_table_created_in_a_transaction_appears_with_its_rows_at_the_commit(wh: Warehouse, table: int) -> None:
    t = wh.begin()
    t.create_table(NEW, RETURNS, ["day"])
    t.append(NEW, returns([1, 2]))
    t.append(TABLE, orders([3]))
    assert ids_of(t.read(NEW)) == [1, 2]
    assert NEW not in wh.tables()
    with pytest.raises(TableNotFoundError):
        wh.read(NEW)
    other = wh.begin()
    with pytest.raises(TableNotFoundError):
        other.append(NEW, returns([9]))
    with pytest.raises(SerializationError, match="being created"):
        other.create_table(NEW, RETURNS)
    other.rollback()
    csn = t.commit()
    assert NEW in wh.tables()
    assert ids_of(wh.read(NEW)) == [1, 2] and wh.schema(NEW).names == ["id", "day"]
    assert wh.partition_by(NEW) == ("day",)
    with pytest.raises(TableNotFoundError):
        wh.read(NEW, csn=csn - 1)  # not there before its commit
    with pytest.raises(TableNotFoundError):
        wh.schema(NEW, csn=csn - 1)
    with wh.begin() as t2:
        t2.append(NEW, returns([3]))
        t2.add_column(NEW, pa.field("note", pa.string()))
    assert ids_of(wh.read(NEW)) == [1, 2, 3]
    with pytest.raises(TableExistsError):
        wh.begin().create_table(NEW, RETURNS)


def test_a_rolled_back_creation_leaves_no_table_and_frees_the_name(wh: Warehouse, table: int) -> None:
    t = wh.begin()
    t.create_table(NEW, RETURNS)
    t.append(NEW, returns([1]))
    t.rollback()
    assert NEW not in wh.tables()
    with pytest.raises(TableNotFoundError):
        wh.read(NEW)
    for name in wh.tables():  # every listed table reads
        wh.read(name)
    with wh.begin() as t:  # the name is free again, inside a transaction ...
        t.create_table(NEW, pa.schema([("id", pa.int32())]))
        t.append(NEW, pa.table({"id": pa.array([5], pa.int32())}))
    assert wh.read(NEW).to_pylist() == [{"id": 5}]
    t = wh.begin()
    t.create_table("shop.other", RETURNS)
    t.rollback()
    wh.create_table("shop.other", RETURNS)  # ... and outside one
    assert "shop.other" in wh.tables() and wh.read("shop.other").num_rows == 0


def test_a_keyed_retry_replaces_the_earlier_attempts_creation(wh: Warehouse, table: int) -> None:
    t = wh.begin()
    t.create_table(NEW, RETURNS, key="make")
    t.create_table(NEW, pa.schema([("id", pa.int32())]), key="make")  # the retry
    t.commit()
    assert wh.schema(NEW).names == ["id"] and wh.schema(NEW).field("id").type == pa.int32()


def test_a_dropped_table_is_gone_from_its_commit_older_snapshots_still_read_it(wh: Warehouse, table: int) -> None:
    t = wh.begin()
    t.drop_table(TABLE)
    with pytest.raises(TableNotFoundError):
        t.read(TABLE)
    with pytest.raises(TableNotFoundError):
        t.append(TABLE, orders([3]))
    assert ids_of(wh.read(TABLE)) == [1, 2]  # others still see it
    csn = t.commit()
    assert TABLE not in wh.tables()
    with pytest.raises(TableNotFoundError):
        wh.read(TABLE)
    with pytest.raises(TableNotFoundError):
        wh.schema(TABLE)
    assert ids_of(wh.read(TABLE, csn=table)) == [1, 2]  # time travel
    assert wh.schema(TABLE, csn=csn - 1).names == ["id", "item", "day"]
    with wh.begin() as t:  # the name is free: a new, empty table
        t.create_table(TABLE, pa.schema([("id", pa.int64()), ("day", pa.string())]), ["day"])
    assert wh.read(TABLE).num_rows == 0 and wh.schema(TABLE).names == ["id", "day"]
    assert ids_of(wh.read(TABLE, csn=table)) == [1, 2]
    with wh.begin() as t:
        t.drop_table(TABLE)
    wh.create_table(TABLE, SCHEMA, ["day"])  # outside a transaction too (a transaction of its own)
    assert wh.read(TABLE).num_rows == 0 and TABLE in wh.tables()


def test_dropping_a_table_conflicts_with_a_concurrent_writer_first_committer_wins(wh: Warehouse, table: int) -> None:
    drop, load = wh.begin(), wh.begin()
    drop.drop_table(TABLE)
    load.append(TABLE, orders([3]))
    drop.commit()
    with pytest.raises(SerializationError, match=r"shop\.orders.*dropped table"):
        load.commit()
    with pytest.raises(TableNotFoundError):
        wh.read(TABLE)


def test_a_rolled_back_drop_leaves_the_table(wh: Warehouse, table: int) -> None:
    t = wh.begin()
    t.drop_table(TABLE)
    t.rollback()
    assert TABLE in wh.tables() and ids_of(wh.read(TABLE)) == [1, 2]
    with wh.begin() as t:
        t.append(TABLE, orders([3]))
    assert ids_of(wh.read(TABLE)) == [1, 2, 3]


def test_merge_matches_old_parts_by_column_id_after_columns_swapped_names(wh: Warehouse) -> None:
    """MERGE prunes parts by their files' key-column statistics: for a part written before a rename, the key is
    the column of that id, not the file's column of that name (after a -> c and b -> a, an old file's `a` is
    today's `c`). The old part's row must be matched and updated, not missed and inserted again."""
    wh.create_table("shop.swap", pa.schema([("k", pa.int64()), ("a", pa.int64()), ("b", pa.int64())]))
    with wh.begin() as t:
        t.append("shop.swap", pa.table({"k": [1], "a": [100], "b": [5]}))
    with wh.begin() as t:
        t.rename_column("shop.swap", "a", "c")
        t.rename_column("shop.swap", "b", "a")
    assert rows_by_k(wh.read("shop.swap")) == [{"k": 1, "c": 100, "a": 5}]
    with wh.begin() as t:
        counts = t.merge("shop.swap", pa.table({"k": [9], "c": [7], "a": [5]}), on=["a"])
    assert (counts["updated"], counts["inserted"]) == (1, 0), counts
    assert rows_by_k(wh.read("shop.swap")) == [{"k": 9, "c": 7, "a": 5}]


def rows_by_k(table: pa.Table) -> list[dict[str, object]]:
    return sorted(table.to_pylist(), key=lambda r: str(r["k"]))
def test_a_column_id_is_never_given_twice_not_even_after_a_withdrawn_change(wh: Warehouse, table: int) -> None:
    """Key `a` adds a column; `a`'s retry adds another: its id is a new one, as after a rolled-back change."""
    t = wh.begin()
    t.add_column(TABLE, pa.field("discount", pa.float64()), key="a")
    t.add_column(TABLE, pa.field("rebate", pa.float64()), key="a")  # the retry of `a`
    t.commit()
    assert [column_id(f) for f in wh.schema(TABLE)] == [1, 2, 3, 5]
    rolled = wh.begin()
    rolled.add_column(TABLE, pa.field("x", pa.int64()))
    rolled.rollback()
    with wh.begin() as t:
        t.add_column(TABLE, pa.field("y", pa.int64()))
    assert column_id(wh.schema(TABLE).field("y")) == 7


def test_a_retried_change_withdraws_the_writes_built_on_it(wh: Warehouse, table: int) -> None:
    """Invariant 7: key `b` loaded rows under the column key `a` added; `a`'s retry withdraws `b`'s rows too, and `b`
    must run again before the commit."""
    from airflow_txn.errors import InvalidatedKeysError

    t = wh.begin()
    t.add_column(TABLE, pa.field("discount", pa.float64()), key="a")
    t.append(TABLE, orders([3], discount=[0.5]), key="b")
    t.add_column(TABLE, pa.field("discount", pa.float64()), key="a")  # the retry of `a`
    assert ids_of(t.read(TABLE)) == [1, 2]  # `b`'s rows were withdrawn with it
    with pytest.raises(InvalidatedKeysError, match="'b'"):
        t.commit()
    t.append(TABLE, orders([3], discount=[0.25]), key="b")  # `b` runs again
    t.commit()
    assert [r["discount"] for r in rows(wh.read(TABLE))] == [None, None, 0.25]


RENAMED = "sales.orders"


def test_a_renamed_table_has_its_new_name_from_the_commit_older_snapshots_read_the_old(wh: Warehouse, table: int,
                                                                                      root: Path) -> None:
    t = wh.begin()
    t.rename_table(TABLE, RENAMED)
    assert ids_of(t.read(RENAMED)) == [1, 2]
    with pytest.raises(TableNotFoundError):
        t.read(TABLE)
    t.append(RENAMED, orders([3]))
    assert ids_of(wh.read(TABLE)) == [1, 2]  # others still see the old name
    with pytest.raises(TableNotFoundError):
        wh.read(RENAMED)
    assert TABLE in wh.tables() and RENAMED not in wh.tables()
    other = wh.begin()
    assert ids_of(other.read(TABLE)) == [1, 2]
    with pytest.raises(TableNotFoundError):
        other.read(RENAMED)
    other.rollback()
    csn = t.commit()
    assert RENAMED in wh.tables() and TABLE not in wh.tables()
    assert ids_of(wh.read(RENAMED)) == [1, 2, 3] and wh.partition_by(RENAMED) == ("day",)
    with pytest.raises(TableNotFoundError):
        wh.read(TABLE)
    assert ids_of(wh.read(TABLE, csn=csn - 1)) == [1, 2]  # time travel: the old name
    assert wh.schema(TABLE, csn=csn - 1).names == ["id", "item", "day"]
    with pytest.raises(TableNotFoundError):
        wh.read(RENAMED, csn=csn - 1)
    if isinstance(root, Path):
        assert (root / "shop" / "orders").is_dir() and not (root / "sales").exists()  # no file moved
    with wh.begin() as t2:
        t2.append(RENAMED, orders([4]))
    assert ids_of(wh.read(RENAMED)) == [1, 2, 3, 4]
    wh.create_table(TABLE, SCHEMA, ["day"])  # the old name is free again: a new, empty table
    assert wh.read(TABLE).num_rows == 0 and ids_of(wh.read(RENAMED)) == [1, 2, 3, 4]
    assert ids_of(wh.read(TABLE, csn=csn - 1)) == [1, 2]


def test_renaming_conflicts_with_a_concurrent_writer_first_committer_wins(wh: Warehouse, table: int) -> None:
    rename, load = wh.begin(), wh.begin()
    rename.rename_table(TABLE, RENAMED)
    load.append(TABLE, orders([3]))
    rename.commit()
    with pytest.raises(SerializationError, match=r"renamed table shop\.orders to sales\.orders"):
        load.commit()
    assert ids_of(wh.read(RENAMED)) == [1, 2]
    rename, load = wh.begin(), wh.begin()
    rename.rename_table(RENAMED, TABLE)
    load.append(RENAMED, orders([3]))
    load.commit()
    with pytest.raises(SerializationError, match="renamed table"):
        rename.commit()
    assert ids_of(wh.read(RENAMED)) == [1, 2, 3]


def test_the_new_name_must_be_free(wh: Warehouse, table: int) -> None:
    wh.create_table(NEW, RETURNS)
    with pytest.raises(TableExistsError, match=r"shop\.returns"):
        wh.begin().rename_table(TABLE, NEW)
    first, second = wh.begin(), wh.begin()
    first.rename_table(TABLE, RENAMED)
    with pytest.raises(SerializationError, match=r"sales\.orders"):  # a concurrent rename to the same name
        second.rename_table(NEW, RENAMED)
    creator = wh.begin()
    with pytest.raises(SerializationError, match=r"sales\.orders"):  # a concurrent creation of the name
        creator.create_table(RENAMED, RETURNS)
    with pytest.raises(TableExistsError):  # nor may it take the old name, still the table's
        wh.begin().rename_table(NEW, TABLE)
    first.commit()
    second.rollback()
    creator.rollback()
    t = wh.begin()
    t.create_table("shop.made", RETURNS)
    t.rename_table(NEW, "shop.other")
    with pytest.raises(TableExistsError):  # a name created in the same transaction
        t.rename_table("shop.other", "shop.made")
    t.rollback()
    with wh.begin() as t:
        t.create_table("shop.made", RETURNS)
        t.rename_table(NEW, "shop.other")
        t.rename_table("shop.other", "shop.last")  # renamed twice: one commit
    assert set(wh.tables()) >= {RENAMED, "shop.made", "shop.last"} and not {NEW, "shop.other"} & set(wh.tables())


def test_a_rolled_back_or_retried_rename_is_withdrawn(wh: Warehouse, table: int) -> None:
    t = wh.begin()
    t.rename_table(TABLE, RENAMED)
    t.rollback()
    assert TABLE in wh.tables() and RENAMED not in wh.tables() and ids_of(wh.read(TABLE)) == [1, 2]
    with wh.begin() as t:  # the new name was freed
        t.create_table(RENAMED, RETURNS)
    t = wh.begin()
    t.rename_table(TABLE, "shop.first", key="rename")
    t.rename_table(TABLE, "shop.second", key="rename")  # the retry replaces the first attempt
    t.commit()
    assert ids_of(wh.read("shop.second")) == [1, 2]
    assert "shop.first" not in wh.tables() and TABLE not in wh.tables()
    wh.create_table("shop.first", RETURNS)  # never taken


@pytest.mark.parametrize(("old", "new", "error"), [
    (TABLE, TABLE, InvalidNameError),
    (TABLE, "no_namespace", InvalidNameError),
    (TABLE, 7, InvalidNameError),
    ("shop.missing", RENAMED, TableNotFoundError),
])
def test_a_bad_rename_is_refused_before_anything_is_staged(wh: Warehouse, table: int, old: str, new: Any,
                                                          error: type[Exception]) -> None:
    t = wh.begin()
    with pytest.raises(error):
        t.rename_table(old, new)
    t.rollback()
    assert TABLE in wh.tables() and RENAMED not in wh.tables()


def test_create_table_exist_ok_accepts_the_schema_the_table_had_at_any_committed_version(wh: Warehouse,
                                                                                         table: int) -> None:
    """A DAG creating its table idempotently (exist_ok=True) with the schema it was created with keeps working after
    the table was changed, as one updated to the newest schema does; another schema or partitioning is refused."""
    with wh.begin() as t:
        t.add_column(TABLE, pa.field("note", pa.string()))
    wh.create_table(TABLE, SCHEMA, ["day"], exist_ok=True)  # as created
    wh.create_table(TABLE, pa.schema([*SCHEMA, pa.field("note", pa.string())]), ["day"], exist_ok=True)  # newest
    with pytest.raises(TableExistsError, match="different schema"):
        wh.create_table(TABLE, pa.schema([("id", pa.int64())]), exist_ok=True)
    with pytest.raises(TableExistsError, match="different schema"):
        wh.create_table(TABLE, SCHEMA, [], exist_ok=True)
    with pytest.raises(TableExistsError, match="exists already"):
        wh.create_table(TABLE, SCHEMA, ["day"])
    t = wh.begin()
    t.add_column(TABLE, pa.field("extra", pa.int64()))  # staged, not committed: not a schema the table had
    with pytest.raises(TableExistsError, match="different schema"):
        wh.create_table(TABLE, pa.schema([*SCHEMA, pa.field("note", pa.string()), pa.field("extra", pa.int64())]),
                        ["day"], exist_ok=True)
    t.rollback()
    assert wh.schema(TABLE).names == ["id", "item", "day", "note"]


def test_a_transactions_manifest_lists_its_tables_as_it_sees_them(wh: Warehouse, table: int) -> None:
    """t.manifest() of every table: a table the transaction renamed under its new name, one it created, not one it
    dropped (its own view, as its reads have it)."""
    wh.create_table("shop.gone", SCHEMA, ["day"])
    t = wh.begin()
    t.rename_table(TABLE, "shop.sales")
    t.create_table("shop.fresh", SCHEMA, ["day"])
    t.append("shop.fresh", orders([5]))
    t.drop_table("shop.gone")
    seen = t.manifest()
    assert sorted(seen) == ["shop.fresh", "shop.sales"], sorted(seen)
    t.rollback()


def test_a_renamed_tables_old_name_names_nothing_now(wh: Warehouse, table: int) -> None:
    """After a committed rename the old name is for time travel only: today's questions about it (its partitioning,
    its schema) raise TableNotFoundError; the new name answers them."""
    with wh.begin() as t:
        t.rename_table(TABLE, "shop.sales")
    with pytest.raises(TableNotFoundError):
        wh.partition_by(TABLE)
    with pytest.raises(TableNotFoundError):
        wh.schema(TABLE)
    assert wh.partition_by("shop.sales") == ("day",)
    assert wh.schema(TABLE, csn=table).names == SCHEMA.names
    assert wh.partition_by(TABLE, csn=table) == ("day",)  # at an older snapshot the old name still names it
