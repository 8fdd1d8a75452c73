"""Named snapshots (tags, catalog schema version 5): a tag names a CSN of a set of tables; reads at it (the
Warehouse, a Transaction, the CLI) see exactly that snapshot; bad input is refused with a typed error before
anything changes; vacuum keeps every file a tag sees whatever the retention, and frees them once untagged; a
catalog of schema version 4 is upgraded with its rows kept."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from airflow_txn import Warehouse
from airflow_txn.catalog import Catalog, migrate, schema, table_registry
from airflow_txn.cli import exit_codes, main
from airflow_txn.errors import (
    InvalidArgumentError,
    InvalidNameError,
    SnapshotTooOldError,
    TableNotFoundError,
    TableNotInTagError,
    TagExistsError,
    TagNotFoundError,
)
from airflow_txn.model.names import parse_table_name
from tests.helpers import EVENTS, accounts, commit_writes, events, ids, make_tables, storage_files

EV, AC = "sales.events", "sales.accounts"


def test_a_tag_reads_its_snapshot_of_the_tables_it_holds(wh: Warehouse) -> None:
    make_tables(wh)
    first = commit_writes(wh, ("append", EV, events([1, 2])), ("append", AC, accounts({1: 10})))
    commit_writes(wh, ("overwrite", EV, events([7])), ("append", AC, accounts({2: 20})))
    month_end = wh.tag("month-end-2024-01", csn=first, tables=[EV], note="after the backfill")
    assert month_end == {"name": "month-end-2024-01", "csn": first, "tables": [EV],
                         "created_at": month_end["created_at"], "note": "after the backfill"}
    latest = wh.tag("latest")  # default: the readable watermark, every table
    assert (latest["csn"], latest["tables"]) == (wh.readable_csn(), [AC, EV])
    assert [t["name"] for t in wh.tags()] == ["latest", "month-end-2024-01"]  # newest CSN first
    assert wh.tag_info("month-end-2024-01") == month_end

    assert ids(wh.read(EV, tag="month-end-2024-01")) == [1, 2]
    assert ids(wh.read(EV, tag="latest")) == [7] and ids(wh.read(AC, tag="latest")) == [1, 2]
    with pytest.raises(TableNotInTagError, match=r"does not hold table sales\.accounts") as caught:
        wh.read(AC, tag="month-end-2024-01")
    assert isinstance(caught.value, TableNotFoundError) and caught.value.tag == "month-end-2024-01"

    t = wh.begin()  # a transaction reads a tag as it is, beside its own view
    t.append(EV, events([8]))
    assert ids(t.read(EV, tag="month-end-2024-01")) == [1, 2] and ids(t.read(EV)) == [7, 8]
    t.rollback()

    assert wh.untag("month-end-2024-01") == month_end
    with pytest.raises(TagNotFoundError, match="month-end-2024-01"):
        wh.read(EV, tag="month-end-2024-01")
    wh.tag("month-end-2024-01", csn=first, tables=[EV])  # the name is free again
    assert ids(wh.read(EV, tag="month-end-2024-01")) == [1, 2]


def test_bad_tag_input_is_refused_before_anything_changes(wh: Warehouse) -> None:
    make_tables(wh)
    csn = commit_writes(wh, ("append", EV, events([1])))
    wh.tag("kept", csn=csn)
    before = wh.tags()
    refused: list[tuple[type[Exception], str, Any]] = [
        (InvalidNameError, "invalid tag name", lambda: wh.tag("month end")),
        (InvalidNameError, "invalid tag name", lambda: wh.tag("../x")),
        (InvalidNameError, "invalid tag name", lambda: wh.tag("x" * 129)),
        (TagExistsError, "'kept' exists already", lambda: wh.tag("kept")),
        (InvalidArgumentError, "above the readable watermark", lambda: wh.tag("future", csn=csn + 5)),
        (InvalidArgumentError, "csn must be an integer", lambda: wh.tag("neg", csn=-1)),
        (TableNotFoundError, "sales.nope", lambda: wh.tag("t1", tables=[EV, "sales.nope"])),
        (InvalidNameError, "list of table names", lambda: wh.tag("t2", tables=EV)),
        (InvalidArgumentError, "at least one table", lambda: wh.tag("t3", tables=[])),
        (InvalidArgumentError, "note", lambda: wh.tag("t4", note="a\x00b")),
        (InvalidArgumentError, "not several", lambda: wh.read(EV, csn=csn, tag="kept")),
        (TagNotFoundError, "no tag 'nope'", lambda: wh.read(EV, tag="nope")),
        (TagNotFoundError, "no tag 'nope'", lambda: wh.untag("nope")),
    ]
    for error, message, call in refused:
        with pytest.raises(error, match=message):
            call()
    assert wh.tags() == before  # nothing was tagged, nothing untagged


def test_vacuum_keeps_what_a_tag_sees_whatever_the_retention_and_untag_frees_it(wh: Warehouse,
                                                                                root: Path | str) -> None:
    make_tables(wh)
    first = commit_writes(wh, ("append", EV, events([1, 2])), ("append", AC, accounts({1: 10})))
    t = wh.begin()
    t.overwrite(EV, events([3]))
    t.overwrite(AC, accounts({2: 20}))
    t.commit()
    wh.tag("month-end", csn=first, tables=[EV])  # holds the events, not the accounts
    files_before = storage_files(root)

    report = wh.vacuum(retention_seconds=0)
    assert report["horizon"] > first and report["tagged_parts_kept"] == 1
    assert report["parts_removed"] == 1  # the accounts' first part: no tag holds that table
    assert ids(wh.read(EV, tag="month-end")) == [1, 2]  # past the horizon, readable by its tag
    with pytest.raises(SnapshotTooOldError):
        wh.read(EV, csn=first)  # a plain read at that CSN is not (the tag pins its parts, not the CSN)
    with pytest.raises(SnapshotTooOldError, match="retention horizon"):
        wh.tag("too-late", csn=first, tables=[EV])  # files of other versions may be gone: refused
    assert wh.vacuum(retention_seconds=0)["parts_removed"] == 0  # and again: still kept

    wh.untag("month-end")
    report = wh.vacuum(retention_seconds=0)
    assert (report["parts_removed"], report["tagged_parts_kept"]) == (1, 0)
    assert len(files_before - storage_files(root)) >= 2  # both replaced versions' files are gone now
    assert ids(wh.read(EV)) == [3] and ids(wh.read(AC)) == [2]


def test_airflow_txn_tag_tags_untag_and_read_at_a_tag(wh: Warehouse, catalog_url: str, root: Path | str,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    make_tables(wh)
    first = commit_writes(wh, ("append", EV, events([1, 2])))
    commit_writes(wh, ("append", EV, events([3])))
    opts = ["--catalog", catalog_url, "--root", str(root)]

    def run_json(*args: str, code: int = exit_codes.OK) -> Any:
        assert main([*opts, *args, "--json"]) == code
        return json.loads(capsys.readouterr().out)

    made = run_json("tag", "month-end", "--csn", str(first), "--table", EV)
    assert (made["name"], made["csn"], made["tables"]) == ("month-end", first, [EV])
    assert [t["name"] for t in run_json("tags")] == ["month-end"]
    assert sorted(r["id"] for r in run_json("read", EV, "--tag", "month-end")["rows"]) == [1, 2]
    assert "already" in run_json("tag", "month-end", code=exit_codes.ERROR)["error"]["message"]
    assert main([*opts, "tags"]) == exit_codes.OK
    assert "month-end" in capsys.readouterr().out
    assert run_json("untag", "month-end")["name"] == "month-end"
    assert run_json("tags") == []
    assert run_json("untag", "month-end", code=exit_codes.NOT_FOUND)["error"]["type"] == "TagNotFoundError"


def test_a_schema_version_4_catalog_gets_tags_with_its_rows_kept(catalog_url: str, tmp_path: Path) -> None:
    """A catalog Alembic left at schema_v4, holding a table: opening it with upgrade=True runs schema_v5 (and later
    revisions); the table is kept and can be tagged."""
    from alembic import command

    catalog = Catalog(catalog_url)
    with catalog.engine.begin() as conn:
        command.upgrade(migrate.config(conn), "schema_v4")
        assert not sa.inspect(conn).has_table("txn_tags")
        table_registry.create(conn, parse_table_name(EV), EVENTS, ["day"])
    catalog.dispose()
    with Warehouse.open(catalog=catalog_url, root=str(tmp_path / "root"), upgrade=True) as wh:
        with wh.runtime.catalog.read() as conn:
            assert migrate.read_versions(conn).revision == migrate.HEAD
            version = conn.execute(sa.select(schema.meta.c.value).where(schema.meta.c.key == "schema_version"))
            assert version.scalar() == str(schema.SCHEMA_VERSION)
        assert wh.tables() == [EV]
        commit_writes(wh, ("append", EV, events([1])))
        wh.tag("after-upgrade")
        assert ids(wh.read(EV, tag="after-upgrade")) == [1]
