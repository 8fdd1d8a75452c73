"""Iceberg publishing (airflow_txn/publish, docs/DESIGN.md D26): pyiceberg reads every committed CSN of every
table exactly as `wh.read(table, csn=...)` does, after appends, partition overwrites, copy-on-write deletes and
updates, rollbacks, multi-table commits, compaction, vacuum and tags; on SQLite and PostgreSQL catalogs."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from airflow_txn import Warehouse
from airflow_txn.errors import InvalidArgumentError, PublishError, SnapshotTooOldError, TableNotFoundError
from airflow_txn.publish.iceberg import CSN_KEY, KIND_KEY
from tests.helpers import accounts, events, make_tables
from tests.publish.tables import (
    commit_every_kind_of_change,
    commit_every_kind_of_schema_change,
    committed_csns,
    open_create_and_rename,
    rows,
)

pytest.importorskip("pyiceberg")

def iceberg_rows(wh: Warehouse, table: str, snapshot_id: int, csn: int | None = None) -> list[dict[str, Any]]:
    """The rows pyiceberg reads at the snapshot, its columns exactly the table's at `csn` (None: now), in order."""
    scanned = wh.iceberg_catalog().load_table(table).scan(snapshot_id=snapshot_id).to_arrow()
    assert scanned.column_names == wh.schema(table, csn=csn).names, (table, csn, scanned.column_names)
    return rows(scanned)


def check_every_csn(wh: Warehouse, csns: Sequence[int] | None = None) -> int:
    """Publish, then read every committed CSN of every table through pyiceberg at the snapshot `published`
    names and compare all rows with wh.read; returns how many (CSN, table) pairs were compared."""
    wh.publish()
    compared = 0
    for csn in committed_csns(wh) if csns is None else csns:
        published = wh.published(csn)
        for table in wh.tables():
            try:
                expected = rows(wh.read(table, csn=csn))
            except TableNotFoundError:  # dropped at csn (or not created yet)
                assert table not in published, (table, csn)
                continue
            last = wh.last_commit_csn(table, at=csn)
            if last is None:
                assert table not in published and expected == []
                continue
            found = published[table]
            assert found["csn"] == last, (table, csn)
            snapshot = wh.iceberg_catalog().load_table(table).snapshot_by_id(found["iceberg_snapshot_id"])
            assert snapshot is not None and snapshot.summary is not None
            assert snapshot.summary.additional_properties[CSN_KEY] == str(last)
            assert iceberg_rows(wh, table, found["iceberg_snapshot_id"], csn) == expected, (table, csn)
            compared += 1
    return compared


def summaries(wh: Warehouse, table: str) -> list[dict[str, str]]:
    loaded = wh.iceberg_catalog().load_table(table)
    return [dict(s.summary.additional_properties) for s in loaded.snapshots() if s.summary is not None]


def test_every_committed_csn_reads_the_same_through_pyiceberg(pub: Warehouse) -> None:
    commit_every_kind_of_change(pub)
    assert check_every_csn(pub) == 18  # 6 commits x 3 written tables
    kinds = [s[KIND_KEY] for s in summaries(pub, "shop.orders")]
    assert kinds == ["commit"] * 4  # one snapshot per commit of the table; the rollback published nothing
    latest = pub.published()["shop.orders"]["iceberg_snapshot_id"]
    assert 99 not in [r["id"] for r in iceberg_rows(pub, "shop.orders", latest)]
    loaded = pub.iceberg_catalog().load_table("shop.orders")
    assert [f.name for f in loaded.spec().fields] == ["day", "shop"]
    assert loaded.scan(row_filter="day = '2024-01-03'").to_arrow().num_rows == 2  # partition pruning by identity


def field_ids(schema: pa.Schema) -> dict[str, int]:
    return {f.name: int(f.metadata[b"PARQUET:field_id"]) for f in schema}


def test_schema_changes_publish_and_every_csn_reads_under_its_own_schema(pub: Warehouse) -> None:
    """Added, renamed and dropped columns, a name reused by another column, widenings, a table dropped and created
    again: pyiceberg reads every CSN (its snapshot's own schema: time travel) exactly as wh.read, column names
    included, and the Iceberg field ids are the column ids the part files carry."""
    commit_every_kind_of_schema_change(pub)
    check_every_csn(pub)
    loaded = pub.iceberg_catalog().load_table("shop.items")
    ours = field_ids(pub.schema("shop.items"))
    # the table created again continues its column ids (never reused within a table: docs/DESIGN.md, D27)
    assert {f.name: f.field_id for f in loaded.schema().fields} == ours == {"label": 9, "id": 10, "n": 11}
    assert [f.name for f in loaded.spec().fields] == ["n"]  # the new table's partitioning
    mapping = json.loads(loaded.properties["schema.name-mapping.default"])
    names = {m["field-id"]: m["names"] for m in mapping}
    # every name a column had, but a name another column had first stays that one's: `qty -> note` leaves "note" to
    # column 5, and the table created again leaves "id" to column 1 (files without ids are the oldest ones)
    assert names == {1: ["id"], 2: ["day"], 3: ["qty"], 4: ["price"], 5: ["note", "memo"], 6: ["size"], 7: ["color"],
                     8: ["weight"], 9: ["label"], 11: ["n"]}
    kinds = [s[KIND_KEY] for s in summaries(pub, "shop.items")]
    assert kinds == ["commit"] * len(kinds) and len(kinds) == 13  # a change without rows is a snapshot too


def test_nested_columns_keep_their_ids_across_schema_changes(pub: Warehouse) -> None:
    point = pa.struct([("x", pa.int32()), ("y", pa.int32())])
    pub.create_table("shop.n", pa.schema([("id", pa.int64()), ("at", point), ("tags", pa.list_(pa.string()))]))
    with pub.begin() as t:
        t.append("shop.n", pa.table({"id": [1], "at": [{"x": 1, "y": 2}], "tags": [["a"]]},
                                    schema=pa.schema([("id", pa.int64()), ("at", point),
                                                      ("tags", pa.list_(pa.string()))])))
    with pub.begin() as t:
        t.rename_column("shop.n", "at", "where")
        t.add_column("shop.n", pa.field("n", pa.int64()))
    with pub.begin() as t:
        t.append("shop.n", pa.table({"id": [2], "where": [{"x": 3, "y": 4}], "tags": [None], "n": [5]},
                                    schema=pa.schema([("id", pa.int64()), ("where", point),
                                                      ("tags", pa.list_(pa.string())), ("n", pa.int64())])))
    check_every_csn(pub)
    loaded = pub.iceberg_catalog().load_table("shop.n")
    assert loaded.schema().find_field("where.y").field_id == 5 and loaded.schema().find_field("n").field_id == 7


def test_a_schema_change_and_its_commit_are_one_iceberg_commit(pub: Warehouse) -> None:
    pub.create_table("shop.t", pa.schema([("a", pa.int32())]))
    with pub.begin() as t:
        t.append("shop.t", pa.table({"a": pa.array([1], pa.int32())}))
    pub.publish()
    before = pub.iceberg_catalog().load_table("shop.t")
    with pub.begin() as t:
        t.add_column("shop.t", pa.field("b", pa.string()))
        t.append("shop.t", pa.table({"a": pa.array([2], pa.int32()), "b": ["x"]}))
    pub.publish()
    after = pub.iceberg_catalog().load_table("shop.t")
    assert len(after.metadata.snapshot_log) == len(before.metadata.snapshot_log) + 1
    assert len(after.metadata.metadata_log) == len(before.metadata.metadata_log) + 1  # one metadata file: one commit
    current = after.current_snapshot()
    assert current is not None and current.schema_id == after.metadata.current_schema_id != before.schema().schema_id
    assert after.metadata.last_column_id == 2


def test_files_without_field_ids_read_through_the_name_mapping(pub: Warehouse) -> None:
    """Part files written before columns had ids: Iceberg readers match them by the name mapping, where a name
    reused after a rename stays the column that had it first; a file the mapping would misread is refused."""
    commit_every_kind_of_schema_change(pub)
    first = sorted(Path(pub.runtime.storage.path("shop/items")).rglob("*.parquet"))
    old = [p for p in first if b"qty" in pq.read_schema(p).to_string().encode()]
    assert old
    for path in old:  # as written before ids: the same rows, no field ids
        table = pq.read_table(path)
        pq.write_table(table.cast(pa.schema([f.remove_metadata() for f in table.schema],
                                            metadata=table.schema.metadata)), path)
        assert b"PARQUET:field_id" not in pq.read_schema(path).to_string(show_field_metadata=True).encode()
    check_every_csn(pub)


def test_a_file_without_ids_the_name_mapping_would_misread_is_refused(pub: Warehouse) -> None:
    pub.create_table("shop.t", pa.schema([("a", pa.int64()), ("b", pa.int64())]))
    with pub.begin() as t:
        t.rename_column("shop.t", "a", "c")
    with pub.begin() as t:
        t.rename_column("shop.t", "b", "a")
    with pub.begin() as t:
        t.append("shop.t", pa.table({"c": [1], "a": [2]}))
    [path] = Path(pub.runtime.storage.path("shop/t")).rglob("*.parquet")
    table = pq.read_table(path)
    pq.write_table(table.cast(pa.schema([f.remove_metadata() for f in table.schema])), path)
    with pytest.raises(PublishError, match=r"shop\.t: the file .* has no Parquet field ids and its column\(s\) "
                                           r"\['a'\]"):
        pub.publish()


def test_a_type_change_iceberg_cannot_read_fails_that_table_alone(pub: Warehouse) -> None:
    make_tables(pub)
    pub.create_table("shop.d", pa.schema([("id", pa.int64()), ("on", pa.date32())]))
    with pub.begin() as t:
        t.append("shop.d", pa.table({"id": [1], "on": [dt.date(2024, 1, 1)]}))
    pub.publish()
    with pub.begin() as t:
        t.alter_column("shop.d", "on", pa.timestamp("us"))
    with pub.begin() as t:
        t.append("sales.events", events([1]))
    with pytest.raises(PublishError, match=r"shop\.d .*column\(s\) on \(date -> timestamp\)") as raised:
        pub.publish()
    assert "sales.events" not in str(raised.value)
    assert pub.published(tables=["sales.events"])["sales.events"]["csn"] == pub.readable_csn()


def test_a_table_published_with_other_ids_asks_to_be_republished(pub: Warehouse) -> None:
    """A table published before the Iceberg ids were the column ids (stand-in: its Iceberg schema's ids swapped):
    publishing refuses it, naming the columns and `republish`, which rebuilds it with the column ids."""
    from pyiceberg.schema import Schema
    from pyiceberg.table.update import AddSchemaUpdate, SetCurrentSchemaUpdate
    from pyiceberg.types import LongType, NestedField, StringType

    pub.create_table("shop.t", pa.schema([("a", pa.int64()), ("b", pa.string())]))
    with pub.begin() as t:
        t.append("shop.t", pa.table({"a": [1], "b": ["x"]}))
    pub.publish()
    table = pub.iceberg_catalog().load_table("shop.t")
    swapped = Schema(NestedField(2, "a", LongType(), required=False), NestedField(1, "b", StringType(), required=False),
                     schema_id=1)
    with table.transaction() as tx:
        tx._apply((AddSchemaUpdate(schema=swapped), SetCurrentSchemaUpdate.model_validate({"schema-id": -1})))
    with pub.begin() as t:
        t.append("shop.t", pa.table({"a": [2], "b": ["y"]}))
    with pytest.raises(PublishError,
                       match=r"shop\.t gives column\(s\) \['a', 'b'\] other field ids .*republish shop\.t"):
        pub.publish()
    pub.republish("shop.t")
    check_every_csn(pub)


def test_publishing_is_idempotent_and_safe_from_two_handles(open_pub: Callable[..., Warehouse]) -> None:
    one, two = open_pub(), open_pub()
    make_tables(one)
    for i in range(3):
        with one.begin() as t:
            t.append("sales.events", events([i]))
    first = one.publish()
    assert first["errors"] == {} and first["csn"] == one.readable_csn()
    again, other = one.publish(), two.publish()
    assert again["tables"]["sales.events"]["snapshots"] == 0 and other["tables"]["sales.events"]["snapshots"] == 0
    assert len(summaries(one, "sales.events")) == 3
    assert one.published() == two.published()


def test_a_publisher_that_lost_the_race_appends_nothing_twice(pub: Warehouse) -> None:
    from pyiceberg.exceptions import CommitFailedException

    from airflow_txn.catalog import table_registry
    from airflow_txn.publish.iceberg import IcebergPublisher

    pub.publisher.request = lambda: None  # type: ignore[method-assign]  # no background run: the race is staged here
    make_tables(pub)
    with pub.begin() as t:
        t.append("sales.events", events([1]))
    pub.publish()
    with pub.begin() as t:
        t.append("sales.events", events([2]))
    stale = pub.iceberg_catalog().load_table("sales.events")  # another publisher read the table here...
    pub.publish()  # ...and this one published CSN 3 first
    with pub.runtime.catalog.read() as conn:
        info = table_registry.get(conn, "sales.events")
    loser = IcebergPublisher(pub.runtime, pub.iceberg_catalog(), pub.warehouse_id)
    with pytest.raises(CommitFailedException):  # refused, never rebased onto the winner's snapshot
        loser._catch_up(stale, info, pub.readable_csn())
    assert loser.publish_table(info, pub.readable_csn()).snapshots == 0  # reloaded: the work is done
    assert len(pub.iceberg_catalog().load_table("sales.events").inspect.files()) == 2
    check_every_csn(pub)


def test_a_commit_is_published_in_the_background(pub: Warehouse) -> None:
    make_tables(pub)
    with pub.begin() as t:
        t.append("sales.events", events([1, 2]))
    csn = pub.last_commit_csn("sales.events")
    deadline = time.monotonic() + 60
    while True:  # no call of publish: the commit woke the background publisher
        loaded = pub.iceberg_catalog().load_table("sales.events") if pub.iceberg_catalog().table_exists(
            "sales.events") else None
        if loaded is not None and loaded.properties.get(CSN_KEY) == str(csn):
            break
        assert time.monotonic() < deadline, pub.publisher.last_error
        time.sleep(0.05)
    assert [r["id"] for r in rows(loaded.scan().to_arrow())] == [1, 2]


def test_closing_the_warehouse_lets_the_commits_publishing_finish(open_pub: Callable[..., Warehouse],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_txn.publish import publisher

    monkeypatch.setattr(publisher, "STOP_SECONDS", 300.0)  # this test waits for the run, however slow the machine
    pub = open_pub()
    make_tables(pub)
    with pub.begin() as t:
        t.append("sales.events", events([1]))
    csn = pub.readable_csn()
    pub.close()  # a task that commits and exits at once
    reader = open_pub()
    assert reader.iceberg_catalog().load_table("sales.events").properties[CSN_KEY] == str(csn)


def test_compaction_is_published_under_the_same_csn_and_survives_vacuum(pub: Warehouse) -> None:
    make_tables(pub)
    for i in range(4):
        with pub.begin() as t:
            t.append("sales.events", events([i]))
    assert pub.publisher.wait_idle()  # the commits' background runs are over: the runs below count alone
    before = pub.publish()["tables"]["sales.events"]
    report = pub.compact("sales.events")
    assert report["merged"] >= 1
    after = pub.publish()["tables"]["sales.events"]
    assert after["snapshots"] == 1 and after["published_csn"] == before["published_csn"]
    assert [s[KIND_KEY] for s in summaries(pub, "sales.events")][-1] == "refresh"
    assert pub.publish()["tables"]["sales.events"]["snapshots"] == 0  # compared once per change of the merges
    assert check_every_csn(pub) == 4  # the newest snapshot of the last CSN holds the merged part
    pub.vacuum(retention_seconds=0)  # deletes the merged-away sources
    latest = pub.published()["sales.events"]
    assert iceberg_rows(pub, "sales.events", latest["iceberg_snapshot_id"]) == rows(pub.read("sales.events"))
    loaded = pub.iceberg_catalog().load_table("sales.events")
    assert len(loaded.inspect.files()) == 1


def test_history_vacuum_purged_is_caught_up_in_one_snapshot(open_pub: Callable[..., Warehouse]) -> None:
    plain = open_pub(publish="off")
    make_tables(plain)
    for i in range(3):
        with plain.begin() as t:
            t.overwrite("sales.events", events([i, i + 10]))
    with plain.begin() as t:
        t.append("sales.accounts", accounts({1: 1}))
    plain.vacuum(retention_seconds=0)  # the overwritten versions' files are gone
    pub = open_pub()
    done = pub.publish()
    assert done["errors"] == {} and done["tables"]["sales.events"]["snapshots"] == 1
    assert [s[KIND_KEY] for s in summaries(pub, "sales.events")] == ["catch-up"]
    latest = pub.published()["sales.events"]
    assert iceberg_rows(pub, "sales.events", latest["iceberg_snapshot_id"]) == rows(pub.read("sales.events"))
    first = min(committed_csns(pub))
    with pytest.raises(SnapshotTooOldError, match="retention horizon"):  # as wh.read at that CSN
        pub.published(first)
    with pub.begin() as t:  # and from there on, commit by commit
        t.append("sales.events", events([50]))
    check_every_csn(pub, [pub.readable_csn()])


def test_tags_become_iceberg_tags_of_the_tables_they_hold(pub: Warehouse) -> None:
    make_tables(pub)
    with pub.begin() as t:
        t.append("sales.events", events([1]))
        t.append("sales.accounts", accounts({1: 1}))
    pub.tag("month-end", tables=["sales.events"])
    with pub.begin() as t:
        t.append("sales.events", events([2]))
    pub.publish()
    events_table = pub.iceberg_catalog().load_table("sales.events")
    ref = events_table.metadata.refs["month-end"]
    assert iceberg_rows(pub, "sales.events", ref.snapshot_id) == rows(pub.read("sales.events", tag="month-end"))
    assert pub.published(tag="month-end")["sales.events"]["iceberg_snapshot_id"] == ref.snapshot_id
    assert "month-end" not in pub.iceberg_catalog().load_table("sales.accounts").metadata.refs
    pub.untag("month-end")
    pub.publish()
    assert "month-end" not in pub.iceberg_catalog().load_table("sales.events").metadata.refs


def test_a_tag_keeps_reading_after_a_merge_of_what_it_sees_and_vacuum(pub: Warehouse) -> None:
    make_tables(pub)
    for i in range(3):
        with pub.begin() as t:
            t.append("sales.events", events([i]))
    pub.tag("before-merge", tables=["sales.events"])
    with pub.begin() as t:
        t.append("sales.events", events([10], day="2024-01-02"))
    assert pub.publisher.wait_idle()  # no background run after the one below: the compaction is its to publish
    pub.publish()
    tagged = pub.iceberg_catalog().load_table("sales.events").metadata.refs["before-merge"].snapshot_id
    assert pub.compact("sales.events")["merged"] == 1  # merges the three parts the tag sees
    done = pub.publish()
    assert done["tables"]["sales.events"]["tags"] == ["before-merge"]
    pub.vacuum(retention_seconds=0)  # the merged-away sources go: the tag pins the merged part, not them
    loaded = pub.iceberg_catalog().load_table("sales.events")
    moved = loaded.metadata.refs["before-merge"].snapshot_id
    assert moved != tagged and not any(name.startswith("airflow-txn-tag-") for name in loaded.metadata.refs)
    assert iceberg_rows(pub, "sales.events", moved) == rows(pub.read("sales.events", tag="before-merge"))
    assert pub.published(tag="before-merge")["sales.events"]["iceberg_snapshot_id"] == moved
    assert pub.publish()["tables"]["sales.events"]["tags"] == []  # checked once per change of the merges


def test_a_tags_snapshot_after_a_merge_reads_under_the_tags_schema(pub: Warehouse) -> None:
    """The tag's new snapshot (same CSN, merged files) is made after the schema changed: it keeps the tagged
    snapshot's schema, while the table's current schema stays the newest."""
    make_tables(pub)
    for i in range(3):
        with pub.begin() as t:
            t.append("sales.events", events([i]))
    pub.tag("before", tables=["sales.events"])
    with pub.begin() as t:
        t.rename_column("sales.events", "value", "amount")
        t.add_column("sales.events", pa.field("extra", pa.string()))
    assert pub.publisher.wait_idle()
    pub.publish()
    assert pub.compact("sales.events")["merged"] == 1
    assert pub.publish()["tables"]["sales.events"]["tags"] == ["before"]
    pub.vacuum(retention_seconds=0)
    loaded = pub.iceberg_catalog().load_table("sales.events")
    moved = loaded.metadata.refs["before"].snapshot_id
    scanned = loaded.scan(snapshot_id=moved).to_arrow()
    assert scanned.column_names == pub.schema("sales.events", tag="before").names == ["id", "day", "value"]
    assert rows(scanned) == rows(pub.read("sales.events", tag="before"))
    assert loaded.schema().find_field("amount").field_id == field_ids(pub.schema("sales.events"))["amount"]
    check_every_csn(pub, [pub.readable_csn()])


def test_snapshots_below_the_retention_horizon_expire_and_every_readable_one_still_reads(pub: Warehouse) -> None:
    """Once vacuum raised a table's horizon (and deleted the files only older versions used), its Iceberg
    snapshots older than the one at the horizon are expired, metadata only; a tagged one stays, and every
    snapshot left reads exactly what wh.read reads at its CSN."""
    make_tables(pub)
    for i in range(4):
        with pub.begin() as t:
            t.overwrite("sales.events", events([i, i + 10]))
    pub.tag("second", csn=committed_csns(pub)[1], tables=["sales.events"])
    with pub.begin() as t:
        t.overwrite("sales.events", events([7]))
    assert pub.publisher.wait_idle()
    assert pub.publish()["tables"]["sales.events"]["expired"] == 0  # no horizon yet: every snapshot is readable
    before = pub.iceberg_catalog().load_table("sales.events")
    assert len(before.snapshots()) == 5
    pub.vacuum(retention_seconds=0)
    horizon = pub.retention("sales.events")["horizon"]
    done = pub.publish()["tables"]["sales.events"]
    after = pub.iceberg_catalog().load_table("sales.events")
    left = {int(s.summary.additional_properties[CSN_KEY]) for s in after.snapshots() if s.summary is not None}
    tagged = pub.tag_info("second")["csn"]
    assert done["expired"] == 3 and left == {tagged, max(committed_csns(pub))}, (done, left, horizon)
    assert after.metadata.refs["second"].snapshot_id in {s.snapshot_id for s in after.snapshots()}
    for snapshot in after.snapshots():  # every file a snapshot left names still exists: each reads
        csn = int(snapshot.summary.additional_properties[CSN_KEY]) if snapshot.summary else 0
        expected = rows(pub.read("sales.events", tag="second" if csn == tagged else None))
        assert iceberg_rows(pub, "sales.events", snapshot.snapshot_id) == expected
    assert pub.publish()["tables"]["sales.events"]["expired"] == 0  # idempotent


def test_republish_rebuilds_a_table_from_its_oldest_readable_commit(pub: Warehouse) -> None:
    make_tables(pub)
    for i in range(3):
        with pub.begin() as t:
            t.append("sales.events", events([i]))
    pub.publish()
    old = pub.published()["sales.events"]["iceberg_snapshot_id"]
    done = pub.republish("sales.events")
    assert done["tables"]["sales.events"]["snapshots"] == 3
    assert pub.published()["sales.events"]["iceberg_snapshot_id"] != old
    check_every_csn(pub)


def test_publishing_settings_are_checked_before_anything_is_opened(catalog_url: str, tmp_path: Any,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    root = str(tmp_path / "w")
    with pytest.raises(InvalidArgumentError, match="unknown format 'hudi'"):
        Warehouse.open(catalog=catalog_url, root=root, publish="hudi")
    with Warehouse.open(catalog=catalog_url, root=root, publish="Iceberg, delta,iceberg") as wh:
        assert wh.config.publish == ("iceberg", "delta")
    with pytest.raises(InvalidArgumentError, match="JSON object"):
        Warehouse.open(catalog=catalog_url, root=root, iceberg_catalog="{not json")
    monkeypatch.setenv("AIRFLOW_TXN_PUBLISH", "iceberg")
    with Warehouse.open(catalog=catalog_url, root=root) as wh:
        assert wh.config.publish == ("iceberg",)
    monkeypatch.delenv("AIRFLOW_TXN_PUBLISH")
    with Warehouse.open(catalog=catalog_url, root=root) as wh:
        wh.init()
        assert wh.config.publish == ()
        with pytest.raises(InvalidArgumentError, match="publishing is off"):
            wh.publish()


def test_a_table_iceberg_cannot_hold_fails_alone(pub: Warehouse) -> None:
    make_tables(pub)
    pub.create_table("odd.nanos", pa.schema([("at", pa.timestamp("ns"))]))  # Iceberg v2 has microseconds only
    with pub.begin() as t:
        t.append("sales.events", events([1]))
        t.append("odd.nanos", pa.table({"at": pa.array([1000], pa.timestamp("ns"))}))  # whole microseconds
    with pytest.raises(PublishError, match=r"odd\.nanos") as raised:
        pub.publish()
    assert "sales.events" not in str(raised.value) and "unsupported type: timestamp[ns]" in str(raised.value)
    assert pub.published(tables=["sales.events"])["sales.events"]["csn"] == pub.readable_csn()
    with pytest.raises(PublishError, match=r"not published at CSN 2: odd\.nanos"):
        pub.published()  # never a stale snapshot for a table that could not be published


def test_a_uint64_table_is_refused_not_published_wrong(pub: Warehouse) -> None:
    """Iceberg's long is signed: pyiceberg accepted a uint64 column, and 2^64-1 would have read back wrong."""
    pub.create_table("odd.big", pa.schema([("n", pa.uint64())]))
    with pub.begin() as t:
        t.append("odd.big", pa.table({"n": pa.array([2**64 - 1], pa.uint64())}))
    with pytest.raises(PublishError, match=r"odd\.big .*uint64"):
        pub.publish()


def test_another_warehouses_iceberg_table_is_never_written(catalog_url: str, tmp_path: Any) -> None:
    one = Warehouse.open(catalog=catalog_url, root=str(tmp_path / "w"), publish="iceberg")
    make_tables(one)
    with one.begin() as t:
        t.append("sales.events", events([1]))
    one.publish()
    one.close()
    other_catalog = f"sqlite:///{tmp_path / 'other.db'}"
    shared = {"type": "sql", "uri": catalog_url}  # another warehouse pointed at the first one's Iceberg catalog
    other = Warehouse.open(catalog=other_catalog, root=str(tmp_path / "w2"), publish="iceberg",
                           iceberg_catalog=shared)
    make_tables(other)
    with other.begin() as t:
        t.append("sales.events", events([2]))
    with pytest.raises(PublishError, match="not published by this warehouse"):
        other.publish()
    other.close()


@pytest.mark.s3
@pytest.mark.parametrize("settings", ["environment", "storage_options"])
def test_an_s3_root_is_published_and_read_through_pyiceberg(s3_root: str, tmp_path: Any, settings: str,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The root on a real S3-compatible server, its settings in the AWS_* environment or in storage_options
    alone: the Iceberg metadata goes below the root, the data files are the part objects themselves, and the
    Iceberg FileIO reaches them with the root's settings."""
    options: dict[str, str] | None = None
    if settings == "storage_options":
        options = {"endpoint_url": os.environ["AWS_ENDPOINT_URL"], "region": os.environ["AWS_REGION"],
                   "access_key_id": os.environ["AWS_ACCESS_KEY_ID"],
                   "secret_access_key": os.environ["AWS_SECRET_ACCESS_KEY"]}
        for name in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION",
                     "AWS_DEFAULT_REGION"):
            monkeypatch.delenv(name)
    with Warehouse.open(catalog=f"sqlite:///{tmp_path / 'c.db'}", root=s3_root, publish="iceberg",
                        storage_options=options) as wh:
        make_tables(wh)
        with wh.begin() as t:
            t.append("sales.events", pa.concat_tables([events([1, 2]), events([3], day="2024-01-02")]))
        with wh.begin() as t:
            t.delete("sales.events", pc.field("id") == 2)
        wh.compact("sales.events")
        assert check_every_csn(wh) == 2
        location = wh.iceberg_catalog().load_table("sales.events").metadata.location
        assert location == f"{s3_root}/.iceberg/sales/events"


def test_the_command_line_publishes_republishes_and_names_snapshots(pub: Warehouse,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    from airflow_txn.cli import main

    make_tables(pub)
    with pub.begin() as t:
        t.append("sales.events", events([1]))
    first = pub.readable_csn()
    with pub.begin() as t:
        t.append("sales.events", events([2]))
    where = ["--catalog", pub.config.catalog_url, "--root", pub.config.root, "--json"]
    assert pub.publisher.wait_idle()  # this handle's background runs never interleave with the CLI's below
    capsys.readouterr()
    assert main(["publish", *where]) == 0
    assert json.loads(capsys.readouterr().out)["csn"] == pub.readable_csn()
    assert main(["published", "--csn", str(first), *where]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown == [{"table": "sales.events", **pub.published(first)["sales.events"]}]
    assert main(["publish", "--republish", "--table", "sales.events", *where]) == 0
    assert json.loads(capsys.readouterr().out)["sales.events"]["sales.events"]["snapshots"] == 2
    assert main(["publish", "--republish", *where]) == 2  # which tables: a usage error
    check_every_csn(pub)


CRASH_AFTER_COMMIT = """
import os, sys
import pyarrow as pa
from airflow_txn import Warehouse
wh = Warehouse.open(catalog=sys.argv[1], root=sys.argv[2], publish="iceberg")
wh.publisher.request = lambda: None  # the background run never starts: as if the process died at once
t = wh.begin()
t.append("sales.events", pa.table({"id": [7], "day": ["2024-01-01"], "value": [1.0]},
                                  schema=wh.schema("sales.events")))
print(t.commit(), flush=True)
os._exit(0)  # dies right after its commit stands, before anything was published
"""


def test_a_process_that_dies_after_its_commit_is_caught_up_by_the_next_publisher(pub: Warehouse) -> None:
    make_tables(pub)
    with pub.begin() as t:
        t.append("sales.events", events([1]))
    pub.publish()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    done = subprocess.run([sys.executable, "-c", CRASH_AFTER_COMMIT, pub.config.catalog_url, pub.config.root],
                          capture_output=True, text=True, timeout=120, check=False, env=env)
    assert done.returncode == 0, done.stderr
    csn = int(done.stdout.strip())
    loaded = pub.iceberg_catalog().load_table("sales.events")
    assert loaded.properties[CSN_KEY] != str(csn)  # the crash left publishing behind
    assert pub.published(csn)["sales.events"]["csn"] == csn  # whoever finds it behind catches it up
    check_every_csn(pub)


def test_publishing_reports_its_lag_and_doctor_says_when_it_is_behind(open_pub: Callable[..., Warehouse],
                                                                      monkeypatch: pytest.MonkeyPatch,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    from airflow_txn.cli import main
    from airflow_txn.telemetry import metrics

    plain = open_pub(publish="off")
    make_tables(plain)
    with plain.begin() as t:
        t.append("sales.events", events([1]))
    where = ["--catalog", plain.config.catalog_url, "--root", plain.config.root, "--json"]

    def publishing_check() -> dict[str, str]:
        capsys.readouterr()
        main([*where, "doctor"])
        checks = json.loads(capsys.readouterr().out)["checks"]
        return next(c for c in checks if c["name"] == "publishing")

    assert publishing_check()["detail"].startswith("off")
    monkeypatch.setenv("AIRFLOW_TXN_PUBLISH", "iceberg")
    first = publishing_check()
    assert first["status"] == "warn"  # the Iceberg catalog was never created: doctor does not create it
    pub = open_pub()
    recording = metrics.RecordingSink()
    previous = metrics.set_sink(recording)
    try:
        pub.publish()
        with plain.begin() as t:  # committed where nothing publishes
            t.append("sales.events", events([2]))
        behind = publishing_check()
        assert behind["status"] == "warn" and "sales.events (published up to CSN 2, last commit 3)" in behind["detail"]
        pub.publish()
    finally:
        metrics.set_sink(previous)
    assert publishing_check()["status"] == "ok"
    lags = [s for s in recording.samples if s.name == metrics.PUBLISH_LAG]
    assert len(lags) == 2 and all(s.value >= 0 and s.tags == {"format": "iceberg"} for s in lags)


def test_an_engines_write_dir_parts_are_published_file_by_file(pub: Warehouse) -> None:
    """Spark's native writer leaves a write dir whose partition leaves are parts of several files each (D8);
    a stand-in engine writes them through the adapter, as airflow_txn.spark does."""
    from airflow_txn.core import adapter
    from airflow_txn.model.partitioning import normalize_partitions

    make_tables(pub)
    with pub.begin() as t:
        t.append("sales.events", events([1]))
    with pub.begin() as t:
        plan = adapter.open_write(t, "sales.events", adapter.APPEND, what="engine append")
        write_dir = plan.new_write_dir(writer="test-engine")
        written = []
        for day, batches in (("2024-01-01", [[10, 11], [12]]), ("2024-01-02", [[20], [21]])):
            [partition] = normalize_partitions([{"day": day}], plan.table.schema, plan.table.partition_by)
            leaf = write_dir.location / f"day={day}"
            leaf.mkdir()
            names = []
            for i, batch in enumerate(batches):
                pq.write_table(events(batch, day=day).drop_columns(["day"]), leaf / f"part-{i}.parquet")
                names.append(f"part-{i}.parquet")
            size = sum((leaf / name).stat().st_size for name in names)
            written.append((partition, adapter.WrittenPart(f"{write_dir.relative}/day={day}", tuple(names),
                                                           sum(len(b) for b in batches), size)))
        plan.commit(written, pub)
    with pub.begin() as t:  # copy-on-write over a part of two files
        t.delete("sales.events", pc.field("id") == 11)
    assert check_every_csn(pub) == 3
    files = pub.iceberg_catalog().load_table("sales.events").inspect.files()
    assert sum(1 for path in files["file_path"].to_pylist() if "/w-" in path) == 2  # 2024-01-02's two files


@pytest.mark.zookeeper
def test_commits_of_the_zookeeper_oracle_are_published(pg_schema_url: str, zk_oracle: str, tmp_path: Any) -> None:
    """With the ZooKeeper oracle the commit log's records are mirrored into the catalog; publishing reads the
    watermark and the table commits as every reader does."""
    with Warehouse.open(catalog=pg_schema_url, root=str(tmp_path / "w"), publish="iceberg") as wh:
        assert wh.config.oracle.startswith("zookeeper://")
        make_tables(wh)
        with wh.begin() as t:
            t.append("sales.events", events([1, 2]))
            t.append("sales.accounts", accounts({1: 1}))
        with wh.begin() as t:
            t.delete("sales.events", pc.field("id") == 1)
        assert check_every_csn(wh) == 4


def test_one_run_publishes_many_commits_each_as_its_own_snapshot(open_pub: Callable[..., Warehouse]) -> None:
    """A catch-up run over several commits removes, in a later snapshot, files an earlier snapshot of the same run
    added (the run keeps the table's files in memory between its snapshots)."""
    plain = open_pub(publish="off")
    make_tables(plain)
    with plain.begin() as t:
        t.append("sales.events", events([1, 2]))
    with plain.begin() as t:
        t.append("sales.events", events([3], day="2024-01-02"))
    with plain.begin() as t:
        t.delete("sales.events", pc.field("id") == 1)  # rewrites the first commit's file
    with plain.begin() as t:
        t.overwrite("sales.events", events([4], day="2024-01-02"), partitions=[{"day": "2024-01-02"}])
    pub = open_pub()
    assert pub.publish()["tables"]["sales.events"]["snapshots"] == 4
    assert check_every_csn(pub) == 4


def test_bad_input_is_refused_before_anything_is_published(pub: Warehouse) -> None:
    from airflow_txn.errors import TableNotFoundError

    make_tables(pub)
    with pub.begin() as t:
        t.append("sales.events", events([1]))
    pub.publish()
    before = summaries(pub, "sales.events")
    with pytest.raises(TableNotFoundError):
        pub.republish("sales.nope")  # nothing dropped
    with pytest.raises(TableNotFoundError):
        pub.publish(tables=["sales.events", "sales.nope"])
    with pytest.raises(InvalidArgumentError):
        pub.published(csn="2")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="not both"):
        pub.published(csn=2, tag="x")
    assert summaries(pub, "sales.events") == before


def test_without_pyiceberg_the_error_names_the_extra(tmp_path: Any) -> None:
    from tests.helpers import import_error_without

    setup = (f"from airflow_txn import Warehouse\n"
             f"wh = Warehouse.open(catalog='sqlite:///{tmp_path}/c.db', root='{tmp_path}/w', publish='iceberg')")
    said = import_error_without("pyiceberg", setup, "wh.iceberg_catalog()")
    assert "pip install 'airflow-txn[iceberg]'" in said


def test_the_steady_state_publishes_each_commits_changes_without_listing_the_table(
        pub: Warehouse, monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_txn.catalog import part_records

    pub.publisher.request = lambda: None  # type: ignore[method-assign]  # every run below is this test's
    make_tables(pub)
    with pub.begin() as t:
        t.append("sales.events", pa.concat_tables([events([1, 2]), events([3], day="2024-01-02")]))
    pub.publish()
    with pub.begin() as t:
        t.append("sales.events", events([4]))
    with pub.begin() as t:
        t.update("sales.events", pc.field("id") == 3, {"value": 9.0})
    with pub.begin() as t:
        t.overwrite("sales.events", events([5]), partitions=[{"day": "2024-01-01"}])
    listed: list[int] = []
    real = part_records.visible_parts
    monkeypatch.setattr(part_records, "visible_parts", lambda *a, **k: listed.append(1) or real(*a, **k))
    assert pub.publish()["tables"]["sales.events"]["snapshots"] == 3
    assert listed == []  # found by the CSNs that created and removed parts, not by listing every visible part
    monkeypatch.undo()
    assert check_every_csn(pub) == 4


def test_a_namespace_and_table_another_publisher_creates_at_the_same_moment_are_used(
        pub: Warehouse, monkeypatch: pytest.MonkeyPatch) -> None:
    """The SQL catalog reports the loser of a creation race as an IntegrityError (not pyiceberg's "already
    exists"): the publisher then uses what the winner made."""
    from sqlalchemy.exc import IntegrityError

    pub.publisher.request = lambda: None  # type: ignore[method-assign]
    make_tables(pub)
    with pub.begin() as t:
        t.append("sales.events", events([1]))
    catalog = pub.iceberg_catalog()
    create_namespace, create_table = catalog.create_namespace, catalog.create_table

    def lost(made: Any) -> Callable[..., Any]:
        def racing(*args: Any, **kwargs: Any) -> Any:
            made(*args, **kwargs)  # the winner's
            raise IntegrityError("INSERT INTO iceberg_...", {}, Exception("UNIQUE constraint failed"))
        return racing

    monkeypatch.setattr(catalog, "create_namespace", lost(create_namespace))
    monkeypatch.setattr(catalog, "create_table", lost(create_table))
    assert pub.publish()["errors"] == {}
    monkeypatch.undo()
    check_every_csn(pub)


def test_a_tag_from_before_a_rename_stays_on_the_renamed_tables_iceberg_table(pub: Warehouse) -> None:
    """A tag lists its tables by the names they had at its CSN (docs/DESIGN.md D27): the published table of a table
    renamed since keeps the tag's Iceberg tag (matched by table id, not by name); a name reused by another table does
    not take it; `publish(tables=[...])` resolves names as they are now."""
    make_tables(pub)
    with pub.begin() as t:
        t.append("sales.events", events([1]))
    pub.tag("before", tables=["sales.events"])
    pub.publish()
    assert "before" in pub.iceberg_catalog().load_table("sales.events").metadata.refs
    with pub.begin() as t:
        t.rename_table("sales.events", "sales.clicks")
    with pub.begin() as t:
        t.append("sales.clicks", events([2]))
    with pytest.raises(TableNotFoundError):
        pub.publish(tables=["sales.events"])  # the old name names nothing now
    pub.publish(tables=["sales.clicks"])
    pub.publish()
    clicks = pub.iceberg_catalog().load_table("sales.clicks")
    assert "before" in clicks.metadata.refs
    assert iceberg_rows(pub, "sales.clicks", clicks.metadata.refs["before"].snapshot_id) == rows(
        pub.read("sales.events", tag="before"))


def test_publishing_every_table_leaves_out_what_an_open_transaction_created_or_renamed(pub: Warehouse) -> None:
    """`wh.publish()` of every table publishes the tables readers list, by the names they have now: not one an open
    transaction is creating (no Iceberg table for a name that may never exist), not a staged rename's new name."""
    open_txn = open_create_and_rename(pub)
    report = pub.publish()
    assert set(report["tables"]) == {"sales.events"}, report
    names = {".".join(identifier) for identifier in pub.iceberg_catalog().list_tables("sales")}
    assert names == {"sales.events"}
    open_txn.rollback()
    assert set(pub.publish()["tables"]) == {"sales.events"}
