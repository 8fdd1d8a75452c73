"""Warehouse.dataset and Warehouse.duckdb (core/datasets.py): lazy reads of exactly one snapshot, on every
catalog and root of the `wh` fixture (SQLite, PostgreSQL, ZooKeeper, S3)."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pytest

from airflow_txn import Warehouse
from airflow_txn.errors import SnapshotTooOldError, TableNotFoundError, TableNotInTagError, TagNotFoundError
from tests.helpers import accounts, events, ids, make_tables


def commit(wh: Warehouse, **tables: pa.Table) -> int:
    t = wh.begin()
    for name, data in tables.items():
        t.append(name.replace("__", "."), data)
    return t.commit()


def test_a_dataset_is_exactly_the_snapshot_it_was_planned_at(wh: Warehouse) -> None:
    make_tables(wh)
    first = commit(wh, sales__events=pa.concat_tables([events([1, 2], day="2024-01-01"),
                                                      events([3], day="2024-01-02")]))
    t = wh.begin()
    t.overwrite("sales.events", events([4], day="2024-01-01"), partitions=[{"day": "2024-01-01"}])
    t.append("sales.events", events([5], day="2024-01-03"))
    t.commit()
    staged = wh.begin()
    staged.append("sales.events", events([99]))  # staged: in no snapshot
    latest = wh.dataset("sales.events")
    old = wh.dataset("sales.events", csn=first)
    assert isinstance(latest, pads.Dataset) and latest.schema == wh.schema("sales.events")
    assert ids(latest.to_table()) == [3, 4, 5] and ids(old.to_table()) == [1, 2, 3]
    assert ids(wh.read("sales.events")) == ids(latest.to_table())
    day_one = latest.to_table(filter=pc.field("day") == "2024-01-01", columns=["id", "day"])
    assert day_one.to_pylist() == [{"id": 4, "day": "2024-01-01"}]
    assert len(list(latest.get_fragments(filter=pc.field("day") == "2024-01-02"))) == 1  # files skipped by day
    wh.tag("t1", csn=first)
    assert ids(wh.dataset("sales.events", tag="t1").to_table()) == [1, 2, 3]
    assert wh.dataset("sales.accounts").to_table().num_rows == 0  # no parts: an empty dataset of its schema
    staged.rollback()


def test_dataset_errors_are_the_reads_errors(wh: Warehouse) -> None:
    make_tables(wh)
    first = commit(wh, sales__accounts=accounts({1: 1}))
    commit(wh, sales__accounts=accounts({2: 2}))
    wh.vacuum(retention_seconds=0)
    with pytest.raises(SnapshotTooOldError):
        wh.dataset("sales.accounts", csn=first)
    with pytest.raises(TableNotFoundError):
        wh.dataset("sales.nope")
    with pytest.raises(TagNotFoundError):
        wh.dataset("sales.accounts", tag="nope")
    wh.tag("events-only", tables=["sales.events"])
    with pytest.raises(TableNotInTagError):
        wh.dataset("sales.accounts", tag="events-only")


def test_duckdb_views_read_one_consistent_snapshot_of_every_table(wh: Warehouse) -> None:
    duckdb = pytest.importorskip("duckdb")
    make_tables(wh)
    first = commit(wh, sales__events=events([1, 2]), sales__accounts=accounts({1: 10}))
    commit(wh, sales__events=events([3], day="2024-01-02"), sales__accounts=accounts({2: 20}))
    con = duckdb.connect()
    assert sorted(wh.duckdb(con, csn=first)) == ["sales.accounts", "sales.events"]
    assert con.execute("SELECT count(*) FROM sales.events").fetchall() == [(2,)]
    assert con.execute("SELECT sum(balance) FROM sales.accounts").fetchall() == [(10,)]
    wh.duckdb(con, tables=["sales.events"])  # the latest snapshot replaces the view
    assert con.execute("SELECT max(id) FROM sales.events WHERE day = '2024-01-02'").fetchall() == [(3,)]
    wh.tag("first", csn=first, tables=["sales.accounts"])
    assert wh.duckdb(con, tag="first") == ["sales.accounts"]
    assert con.execute("SELECT id FROM sales.accounts").fetchall() == [(1,)]


def test_typed_partition_values_and_nulls_read_as_the_core_reads_them(wh: Warehouse) -> None:
    schema = pa.schema([("id", pa.int64()), ("at", pa.timestamp("ms", "UTC")), ("n", pa.int16())])
    wh.create_table("s.typed", schema, partition_by=["at", "n"])
    at = dt.datetime(2024, 3, 1, 12, 30, 45, 500000, tzinfo=dt.UTC)
    data = pa.Table.from_pylist([{"id": 1, "at": at, "n": -3}, {"id": 2, "at": None, "n": None}], schema)
    commit(wh, s__typed=data)
    got = wh.dataset("s.typed").to_table().sort_by("id")
    assert got.equals(wh.read("s.typed").sort_by("id"))
    assert got.to_pylist() == data.to_pylist()
