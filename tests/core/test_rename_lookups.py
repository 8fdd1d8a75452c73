"""Names after a table was renamed, dropped or created again (issue 32, docs/DESIGN.md D27): every operation that
takes a table name resolves it as reads do (`versions.table_at` at the snapshot it works at), so a renamed table's
old name names nothing today (TableNotFoundError) and its new name names it, while time travel to before the rename
still reads the old name; a name is free once its table was dropped or its creation rolled back. On SQLite and
PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
import sqlalchemy as sa

from airflow_txn import Warehouse
from airflow_txn.cli import exit_codes, main
from airflow_txn.core import adapter, reading, vacuum
from airflow_txn.errors import SerializationError, SnapshotTooOldError, TableExistsError, TableNotFoundError
from airflow_txn.model.csn import ROLLBACK_CSN
from airflow_txn.model.evolution import column_id

TABLE = "shop.orders"
NEW = "shop.sales"
SCHEMA = pa.schema([("id", pa.int32()), ("item", pa.string()), ("day", pa.string())])


def orders(ids: list[int], day: str = "d1") -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int32()), "item": [f"i{i}" for i in ids], "day": [day] * len(ids)})


def ids_of(table: pa.Table) -> list[int]:
    return sorted(table.column("id").to_pylist())


@pytest.fixture
def renamed(wh: Warehouse) -> tuple[int, int]:
    """shop.orders (rows 1, 2 in two parts) renamed to shop.sales: (the CSN before the rename, the rename's)."""
    wh.create_table(TABLE, SCHEMA, ["day"])
    with wh.begin() as t:
        t.append(TABLE, orders([1]))
    t = wh.begin()
    t.append(TABLE, orders([2]))
    before = t.commit()
    with wh.begin() as t:
        t.rename_table(TABLE, NEW)
    return before, wh.readable_csn()


def test_retention_refuses_the_old_name_and_takes_the_new(wh: Warehouse, renamed: tuple[int, int]) -> None:
    with pytest.raises(TableNotFoundError):
        wh.set_retention(TABLE, versions=3)
    with pytest.raises(TableNotFoundError):
        wh.retention(TABLE)
    assert wh.set_retention(NEW, versions=3)["table"] == NEW
    assert wh.retention(NEW)["versions"] == 3


def test_tags_resolve_a_name_at_the_tags_csn(wh: Warehouse, renamed: tuple[int, int]) -> None:
    before, _ = renamed
    with pytest.raises(TableNotFoundError):
        wh.tag("now_old", tables=[TABLE])
    assert wh.tag("now", tables=[NEW])["tables"] == [NEW]
    assert ids_of(wh.read(NEW, tag="now")) == [1, 2]
    with pytest.raises(TableNotFoundError):
        wh.read(TABLE, tag="now")
    wh.tag("then", csn=before, tables=[TABLE])  # time travel: the old name at a CSN before the rename
    assert ids_of(wh.read(TABLE, tag="then")) == [1, 2]
    assert wh.schema(TABLE, tag="then").names == SCHEMA.names
    with pytest.raises(TableNotFoundError):
        wh.read(NEW, tag="then")
    with pytest.raises(TableNotFoundError):
        wh.tag("then_new", csn=before, tables=[NEW])


def test_table_stats_refuse_the_old_name_today_and_read_it_at_an_older_csn(wh: Warehouse,
                                                                           renamed: tuple[int, int]) -> None:
    before, _ = renamed
    with pytest.raises(TableNotFoundError):
        wh.table_stats(TABLE)
    stats = wh.table_stats(NEW)
    assert stats["table"] == NEW and stats["rows"] == 2
    old = wh.table_stats(TABLE, csn=before)
    assert old["table"] == TABLE and old["rows"] == 2
    with pytest.raises(TableNotFoundError):
        wh.table_stats(NEW, csn=before)
    wh.tag("then", csn=before, tables=[TABLE])
    assert wh.table_stats(TABLE, tag="then")["table"] == TABLE


def test_the_adapter_refuses_the_old_name(wh: Warehouse, renamed: tuple[int, int]) -> None:
    with pytest.raises(TableNotFoundError):
        adapter.stored_table(wh, TABLE)
    assert adapter.stored_table(wh, NEW).name == NEW
    if wh.runtime.storage.local is not None:
        with pytest.raises(TableNotFoundError):
            adapter.table_view(wh, TABLE)
        assert str(adapter.table_view(wh, NEW).name) == NEW


def test_compaction_refuses_the_old_name_and_merges_the_new(wh: Warehouse, renamed: tuple[int, int]) -> None:
    with pytest.raises(TableNotFoundError):
        wh.compact(TABLE)
    report = wh.compact(NEW)
    assert report["table"] == NEW and report["merged"] == 1 and report["parts_after"] == 1
    assert ids_of(wh.read(NEW)) == [1, 2]


def test_the_cli_refuses_the_old_name(wh: Warehouse, renamed: tuple[int, int], catalog_url: str,
                                      root: Path | str, capsys: pytest.CaptureFixture[str]) -> None:
    opts = ["--catalog", catalog_url, "--root", str(root)]
    for command in (["retention", TABLE], ["compact", TABLE], ["read", TABLE], ["schema", TABLE],
                    ["tag", "x", "--table", TABLE]):
        rc = main([*opts, *command, "--json"])
        out, _ = capsys.readouterr()
        assert rc == exit_codes.NOT_FOUND, (command, out)
        assert json.loads(out)["error"]["type"] == "TableNotFoundError", (command, out)
    assert main([*opts, "retention", NEW, "--versions", "2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["table"] == NEW


# -- a name is free once its table was dropped or its creation rolled back -------------------------------------------
GONE = "shop.gone"


@pytest.fixture
def dropped(wh: Warehouse, renamed: tuple[int, int]) -> int:
    """shop.gone (row 7) dropped, beside shop.sales (rows 1, 2): the CSN before the drop."""
    wh.create_table(GONE, SCHEMA, ["day"])
    t = wh.begin()
    t.append(GONE, orders([7]))
    before = t.commit()
    with wh.begin() as t:
        t.drop_table(GONE)
    return before


def test_a_rename_takes_a_dropped_tables_name_time_travel_still_reads_the_dropped_one(
        wh: Warehouse, renamed: tuple[int, int], dropped: int) -> None:
    with wh.begin() as t:
        t.rename_table(NEW, GONE)
    assert ids_of(wh.read(GONE)) == [1, 2] and wh.tables().count(GONE) == 1 and NEW not in wh.tables()
    assert ids_of(wh.read(GONE, csn=dropped)) == [7]  # time travel to before the drop: the dropped table
    assert wh.table_stats(GONE, csn=dropped)["rows"] == 1 and wh.table_stats(GONE)["rows"] == 2
    assert ids_of(wh.read(TABLE, csn=renamed[0])) == [1, 2]
    wh.tag("then", csn=dropped, tables=[GONE])
    assert ids_of(wh.read(GONE, tag="then")) == [7]
    with wh.begin() as t:
        t.append(GONE, orders([3]))
    wh.vacuum(retention_seconds=3600)
    assert ids_of(wh.read(GONE)) == [1, 2, 3] and ids_of(wh.read(GONE, csn=dropped)) == [7]
    with pytest.raises(TableExistsError):
        wh.create_table(GONE, SCHEMA, ["day"])
    wh.create_table(GONE, SCHEMA, ["day"], exist_ok=True)


def test_a_rolled_back_rename_to_a_dropped_name_leaves_it_free(wh: Warehouse, renamed: tuple[int, int],
                                                              dropped: int) -> None:
    t = wh.begin()
    t.rename_table(NEW, GONE)
    t.rollback()
    assert NEW in wh.tables() and GONE not in wh.tables()
    wh.create_table(GONE, SCHEMA, ["day"])  # free: a new, empty table
    assert wh.read(GONE).num_rows == 0 and ids_of(wh.read(GONE, csn=dropped)) == [7]
    assert ids_of(wh.read(NEW)) == [1, 2]


def test_a_create_table_and_a_rename_to_one_dropped_name_first_wins(wh: Warehouse, renamed: tuple[int, int],
                                                                    dropped: int) -> None:
    creator = wh.begin()
    creator.create_table(GONE, SCHEMA, ["day"])
    with pytest.raises(SerializationError, match=r"shop\.gone"):
        wh.begin().rename_table(NEW, GONE)
    creator.rollback()
    renamer = wh.begin()
    renamer.rename_table(NEW, GONE)
    with pytest.raises(SerializationError, match=r"shop\.gone"):
        wh.begin().create_table(GONE, SCHEMA, ["day"])
    renamer.commit()
    with pytest.raises(TableExistsError):
        wh.begin().create_table(GONE, SCHEMA, ["day"])


def test_a_writer_of_a_dropped_table_rolls_back_after_its_name_was_taken(wh: Warehouse,
                                                                        renamed: tuple[int, int]) -> None:
    wh.create_table(GONE, SCHEMA, ["day"])
    late = wh.begin()
    late.append(GONE, orders([9]))
    with wh.begin() as t:
        t.drop_table(GONE)
    with wh.begin() as t:
        t.rename_table(NEW, GONE)
    with pytest.raises(SerializationError, match=r"shop\.gone"):
        late.commit()  # the drop conflicts with it
    late.rollback()
    assert ids_of(wh.read(GONE)) == [1, 2] and wh.tables().count(GONE) == 1


def test_a_rename_takes_the_name_of_a_table_whose_creation_rolled_back(wh: Warehouse,
                                                                       renamed: tuple[int, int]) -> None:
    t = wh.begin()
    t.create_table(GONE, SCHEMA, ["day"])
    t.append(GONE, orders([5]))
    t.rollback()
    with wh.begin() as t:
        t.rename_table(NEW, GONE)
    assert ids_of(wh.read(GONE)) == [1, 2] and GONE in wh.tables()
    wh.vacuum(retention_seconds=0)  # the rolled-back table's files go; the renamed table's stay
    assert ids_of(wh.read(GONE)) == [1, 2]


def test_a_table_created_under_a_name_a_rename_gave_up_has_a_directory_of_its_own(wh: Warehouse,
                                                                                 renamed: tuple[int, int]) -> None:
    """Two tables never share a directory: vacuum lists each table's directory for orphans, and would take the other
    table's files for its own orphans (it deleted the renamed table's committed files)."""
    wh.create_table(TABLE, SCHEMA, ["day"])  # the name shop.sales gave up
    with wh.begin() as t:
        t.append(TABLE, orders([4]))
    with wh.begin() as t:
        t.append(NEW, orders([3]))
    wh.vacuum(retention_seconds=0)
    assert ids_of(wh.read(NEW)) == [1, 2, 3] and ids_of(wh.read(TABLE)) == [4]
    with wh.runtime.catalog.read() as conn:
        directories = conn.execute(sa.text("SELECT directory FROM txn_tables")).scalars().all()
    assert len(set(directories)) == len(directories), directories


# -- column ids are never reused within a table (docs/DESIGN.md, D27 point 2) ---------------------------------------
def test_a_table_created_again_continues_its_column_ids(wh: Warehouse, renamed: tuple[int, int]) -> None:
    with wh.begin() as t:
        t.add_column(NEW, pa.field("note", pa.string()))  # id 4
    with wh.begin() as t:
        t.drop_table(NEW)
    with wh.begin() as t:  # the same table row, its next life: ids above every id it ever gave
        t.create_table(NEW, pa.schema([("label", pa.string()), ("day", pa.string())]), ["day"])
        t.append(NEW, pa.table({"label": ["a"], "day": ["d1"]}))
    assert [column_id(f) for f in wh.schema(NEW)] == [5, 6]
    assert wh.read(NEW).to_pylist() == [{"label": "a", "day": "d1"}]
    with wh.begin() as t:
        t.drop_table(NEW)
    wh.create_table(NEW, SCHEMA, ["day"])  # outside a transaction (a transaction of its own): the same
    assert [column_id(f) for f in wh.schema(NEW)] == [7, 8, 9]
    t = wh.begin()
    t.create_table(GONE, SCHEMA, ["day"])
    t.rollback()
    wh.create_table(GONE, SCHEMA, ["day"])  # a row whose creation rolled back: its ids were given, too
    assert [column_id(f) for f in wh.schema(GONE)] == [4, 5, 6]
    wh.create_table("shop.fresh", SCHEMA, ["day"])  # a new table numbers from 1
    assert [column_id(f) for f in wh.schema("shop.fresh")] == [1, 2, 3]


# -- vacuum purges rolled-back versions ------------------------------------------------------------------------------
def _rolled_back_versions(wh: Warehouse) -> int:
    with wh.runtime.catalog.read() as conn:
        return int(conn.execute(sa.text("SELECT count(*) FROM txn_table_versions WHERE creation_csn = :r"),
                                {"r": ROLLBACK_CSN}).scalar_one())


def test_vacuum_purges_rolled_back_versions_in_batches(wh: Warehouse, renamed: tuple[int, int]) -> None:
    t = wh.begin()
    t.create_table(GONE, SCHEMA, ["day"])
    t.append(GONE, orders([5]))
    t.add_column(NEW, pa.field("note", pa.string()))
    t.rollback()
    keyed = wh.begin()
    keyed.add_column(NEW, pa.field("first", pa.string()), key="k")
    keyed.add_column(NEW, pa.field("second", pa.string()), key="k")  # the retry withdraws the first attempt's
    wh.create_table("shop.other", SCHEMA, ["day"])
    running = wh.begin()
    running.add_column("shop.other", pa.field("third", pa.string()), key="r")
    running.add_column("shop.other", pa.field("third", pa.string()), key="r")  # withdrawn, its transaction runs
    assert _rolled_back_versions(wh) == 4
    dry = wh.vacuum(retention_seconds=0, dry_run=True)  # the rolled-back table's version still has its part then
    assert dry["rows_purged"]["table_versions"] == 1 and _rolled_back_versions(wh) == 4
    report = vacuum.vacuum(wh.runtime, 0, batch=1)  # parts first, then the versions, one per catalog transaction
    assert report["rows_purged"]["table_versions"] == 2
    assert _rolled_back_versions(wh) == 2  # those of running transactions stay until they end
    keyed.commit()
    running.rollback()
    assert vacuum.vacuum(wh.runtime, 0, batch=2)["rows_purged"]["table_versions"] == 3
    assert _rolled_back_versions(wh) == 0
    assert wh.schema(NEW).names == [*SCHEMA.names, "second"] and ids_of(wh.read(NEW)) == [1, 2]
    assert [column_id(f) for f in wh.schema(NEW)][-1] == 6  # ids given by purged versions are not given again
    wh.create_table(GONE, SCHEMA, ["day"])  # the name whose creation rolled back is free
    assert GONE in wh.tables() and wh.read(GONE).num_rows == 0


# -- a name another table holds today, looked up at an older CSN -----------------------------------------------------
@pytest.fixture
def reused(wh: Warehouse, renamed: tuple[int, int]) -> int:
    """shop.orders renamed to shop.sales (rows 1, 2), then a new shop.orders (row 4): the CSN of its commit."""
    wh.create_table(TABLE, SCHEMA, ["day"])  # the name shop.sales gave up: a new table
    with wh.begin() as t:
        t.append(TABLE, orders([4]))
    return wh.readable_csn()


def test_a_read_at_an_older_csn_checks_the_horizon_of_the_table_the_name_meant_there(
        wh: Warehouse, renamed: tuple[int, int], reused: int) -> None:
    before, _ = renamed
    wh.set_retention(NEW, versions=100)  # shop.sales keeps its history; the new shop.orders follows the global one
    wh.vacuum(retention_seconds=0)
    assert wh.retention(TABLE)["horizon"] > before >= wh.retention(NEW)["horizon"]
    assert ids_of(wh.read(TABLE, csn=before)) == [1, 2]  # the name meant shop.sales there: its horizon
    assert wh.last_commit_csn(TABLE, at=before) == before


def test_a_read_below_the_horizon_of_the_table_the_name_meant_is_refused(wh: Warehouse, renamed: tuple[int, int],
                                                                         reused: int) -> None:
    before, _ = renamed
    wh.set_retention(TABLE, versions=100)  # the new shop.orders keeps its history; shop.sales follows the global one
    with wh.begin() as t:
        t.delete(NEW, pc.field("id") >= 0)  # every part shop.sales had at `before` removed
    planned = reading.plan(wh.runtime, TABLE, csn=before)  # planned, then vacuum removes its files
    wh.vacuum(retention_seconds=0)
    with pytest.raises(SnapshotTooOldError):
        reading.read_planned(wh.runtime, planned)  # not the missing file: shop.sales' horizon is past it
    with pytest.raises(SnapshotTooOldError):
        wh.read(TABLE, csn=before)


def test_last_commit_csn_resolves_the_name_at_its_snapshot(wh: Warehouse, renamed: tuple[int, int]) -> None:
    before, rename = renamed
    with pytest.raises(TableNotFoundError):
        wh.last_commit_csn(TABLE)
    assert wh.last_commit_csn(NEW) == rename
    assert wh.last_commit_csn(TABLE, at=before) == before
    assert wh.last_commit_csn(NEW, at=before) == before  # no table had the name there: the one it names today
    wh.create_table(TABLE, SCHEMA, ["day"])  # the name shop.sales gave up: a new table
    with wh.begin() as t:
        t.append(TABLE, orders([4]))
    assert wh.last_commit_csn(TABLE) == wh.readable_csn()
    assert wh.last_commit_csn(TABLE, at=before) == before  # shop.sales' commit, as a read there sees it


def test_a_tag_lists_the_names_its_tables_had_at_its_csn(wh: Warehouse, renamed: tuple[int, int],
                                                         dropped: int) -> None:
    before, _ = renamed
    wh.tag("then", csn=before, tables=[TABLE])
    wh.tag("every", csn=before)  # every table there by its name there: shop.sales as shop.orders
    wh.tag("gone", csn=dropped, tables=[GONE, NEW])
    with wh.begin() as t:
        t.rename_table(NEW, GONE)  # the dropped shop.gone gives its name up (its row's name becomes ~<id>)
    assert wh.tag_info("then")["tables"] == [TABLE]
    assert wh.tag_info("every")["tables"] == [GONE, TABLE]  # shop.gone: made by create_table, at CSN 1
    assert wh.tag_info("gone")["tables"] == [GONE, NEW]
    assert {t["name"]: t["tables"] for t in wh.tags()} == {"then": [TABLE], "every": [GONE, TABLE],
                                                           "gone": [GONE, NEW]}
    assert ids_of(wh.read(GONE, tag="gone")) == [7] and ids_of(wh.read(NEW, tag="gone")) == [1, 2]
    report = wh.write_manifest(tag="gone")  # every table the tag holds, by the names they had there
    assert sorted(report["tables"]) == [GONE, NEW]
    assert sorted(wh.write_manifest(csn=before)["tables"]) == [GONE, TABLE]  # every table at that CSN


def _manifest_dirs(wh: Warehouse) -> list[str]:
    return sorted(name for name, is_file, _ in wh.runtime.storage.root_entries(".manifests") if not is_file)


def test_vacuum_keeps_a_manifest_that_lists_a_renamed_tables_old_name(wh: Warehouse,
                                                                      renamed: tuple[int, int]) -> None:
    before, _ = renamed
    wh.write_manifest(csn=before)
    with wh.begin() as t:
        t.append(NEW, orders([3]))
    assert wh.vacuum(retention_seconds=3600)["manifests_removed"] == 0  # shop.sales' horizon is below `before`
    assert _manifest_dirs(wh) == [f"csn-{before}"]
    wh.create_table(TABLE, SCHEMA, ["day"])  # the name shop.sales gave up: a new table, with a horizon of its own
    with wh.begin() as t:
        t.append(TABLE, orders([4]))
    wh.set_retention(NEW, versions=100)  # shop.sales keeps its history; the new shop.orders' horizon passes `before`
    report = wh.vacuum(retention_seconds=0)
    assert report["manifests_removed"] == 0 and _manifest_dirs(wh) == [f"csn-{before}"]
    assert wh.retention(TABLE)["horizon"] > before
    wh.set_retention(NEW)  # cleared: now shop.sales' horizon passes `before` too, and its manifest goes
    assert wh.vacuum(retention_seconds=0)["manifests_removed"] == 1 and _manifest_dirs(wh) == []


def test_duckdb_views_of_an_older_csn_or_tag_take_the_names_there(wh: Warehouse, renamed: tuple[int, int]) -> None:
    duckdb = pytest.importorskip("duckdb")
    before, _ = renamed
    con = duckdb.connect()
    assert wh.duckdb(con, csn=before) == [TABLE]  # every table at that CSN, by its name there
    assert sorted(con.execute(f"SELECT id FROM {TABLE}").fetchall()) == [(1,), (2,)]
    wh.tag("then", csn=before)
    assert wh.duckdb(duckdb.connect(), tag="then") == [TABLE]
    assert wh.duckdb(duckdb.connect()) == [NEW]
