"""Snapshot manifests: exactly the visible files at a CSN, idempotent, and readable by DuckDB alone."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pytest

from airflow_txn import Warehouse
from airflow_txn.core.manifests import MANIFEST_DIR
from airflow_txn.errors import TxnError
from airflow_txn.storage.location import normalize_root, resolve
from tests.helpers import accounts, events, make_tables, storage_files

METRICS = pa.schema([("region", pa.string()), ("year", pa.int64()), ("id", pa.int64()), ("amount", pa.float64())])


def parquet_files(root: Path | str, prefix: str) -> set[str]:
    """Where a manifest names the Parquet files below `<root>/<prefix>`: resolved absolute paths on a local
    root, `s3://bucket/key` URIs on an object store."""
    found = {f for f in storage_files(root) if f.startswith(prefix) and f.endswith(".parquet")}
    if isinstance(root, str):
        return {f"{root}/{f}" for f in found}
    return {str((root / f).resolve()) for f in found}


def read_uri(uri: str) -> bytes:
    """A file a manifest report names: a local path or an object-store URI."""
    if "://" not in uri:
        return Path(uri).read_bytes()
    where = resolve(normalize_root(uri), {})
    with where.filesystem.open_input_stream(where.base) as stream:
        return bytes(stream.read())


def size_of(uri: str) -> int:
    if "://" not in uri:
        return Path(uri).stat().st_size
    where = resolve(normalize_root(uri), {})
    return int(where.filesystem.get_file_info(where.base).size or 0)


def directory_files(directory: str) -> dict[str, bytes]:
    """{name: content} of the files of a manifest directory (local path or object-store URI)."""
    if "://" not in directory:
        return {p.name: p.read_bytes() for p in Path(directory).iterdir()}
    where = resolve(normalize_root(directory), {})
    listed = where.filesystem.get_file_info(pafs.FileSelector(where.base))
    return {info.base_name: read_uri(f"{where.scheme}://{info.path}") for info in listed}


def manifest(result: dict[str, Any], table: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(read_uri(result["tables"][table]))
    return loaded


def listed_files(result: dict[str, Any], table: str) -> set[str]:
    return {f["path"] for part in manifest(result, table)["parts"] for f in part["files"]}


def test_manifest_lists_exactly_the_visible_files(wh: Warehouse, root: Path | str) -> None:
    make_tables(wh)
    with wh.begin() as t:
        t.append("sales.events", events([1, 2], day="2024-01-01"))
        t.append("sales.events", events([3], day="2024-01-02"))
        t.append("sales.accounts", accounts({1: 10, 2: 20}))
    first = wh.readable_csn()
    events_1 = parquet_files(root, "sales/events/")
    accounts_1 = parquet_files(root, "sales/accounts/")
    with wh.begin() as t:
        t.overwrite("sales.events", events([7], day="2024-02-01"))
    events_2 = parquet_files(root, "sales/events/") - events_1

    now = wh.write_manifest()
    assert now["csn"] == wh.readable_csn() == first + 1
    if isinstance(root, str):
        assert now["directory"] == f"{root}/{MANIFEST_DIR}/csn-{first + 1}"
    else:
        assert Path(now["directory"]) == (root / MANIFEST_DIR / f"csn-{first + 1}").resolve()
    assert listed_files(now, "sales.events") == events_2 and len(events_2) == 1
    assert listed_files(now, "sales.accounts") == accounts_1
    old = wh.write_manifest(first)
    assert listed_files(old, "sales.events") == events_1 and len(events_1) == 2
    assert listed_files(old, "sales.accounts") == accounts_1

    body = manifest(old, "sales.events")
    assert body["csn"] == first and body["table"] == "sales.events" and body["partition_by"] == ["day"]
    assert body["schema"] == str(wh.schema("sales.events"))
    assert sorted(p["partition"]["day"] for p in body["parts"]) == ["2024-01-01", "2024-01-02"]
    assert body["row_count"] == sum(p["row_count"] for p in body["parts"]) == 3
    assert all(f["size_bytes"] == size_of(f["path"]) for p in body["parts"] for f in p["files"])
    index = json.loads(read_uri(old["index"]))
    assert index["csn"] == first
    assert [e["table"] for e in index["tables"]] == ["sales.accounts", "sales.events"]


def test_uncommitted_parts_are_never_listed(wh: Warehouse, root: Path | str) -> None:
    make_tables(wh)
    with wh.begin() as t:
        t.append("sales.events", events([1]))
    committed = parquet_files(root, "sales/events/")
    t = wh.begin()
    t.append("sales.events", events([2]))
    t.append("sales.accounts", accounts({1: 1}))
    assert parquet_files(root, "sales/events/") != committed  # the open transaction's part is on disk
    result = wh.write_manifest()
    assert listed_files(result, "sales.events") == committed
    assert listed_files(result, "sales.accounts") == set()
    t.rollback()


def test_writing_twice_gives_identical_files(wh: Warehouse) -> None:
    make_tables(wh)
    with wh.begin() as t:
        t.append("sales.events", events([1, 2]))
    csn = wh.readable_csn()
    with wh.begin() as t:
        t.append("sales.events", events([3]))
    first = wh.write_manifest(csn)
    before = directory_files(first["directory"])
    second = wh.write_manifest(csn, tables=["sales.events", "sales.accounts"])
    assert second == first
    after = directory_files(second["directory"])
    assert after == before and set(before) == {"index.json", "sales.accounts.json", "sales.events.json"}


def test_csn_above_the_watermark_fails_like_read(wh: Warehouse) -> None:
    make_tables(wh)
    ahead = wh.readable_csn() + 5
    with pytest.raises(TxnError) as read_error:
        wh.read("sales.events", ahead)
    with pytest.raises(TxnError) as manifest_error:
        wh.write_manifest(ahead)
    assert type(manifest_error.value) is type(read_error.value)
    assert str(manifest_error.value) == str(read_error.value)


def test_manifest_only_names_the_tables_asked_for(wh: Warehouse) -> None:
    make_tables(wh)
    result = wh.write_manifest(tables=["sales.events"])
    assert set(result["tables"]) == {"sales.events"}
    assert [e["table"] for e in json.loads(read_uri(result["index"]))["tables"]] == ["sales.events"]


def test_vacuum_keeps_the_manifest_of_a_snapshot_still_readable(wh: Warehouse) -> None:
    """The manifest of the watermark (at the horizon, not below it) survives vacuum with its files."""
    make_tables(wh)
    with wh.begin() as t:
        t.append("sales.events", events([1]))
    result = wh.write_manifest()
    wh.vacuum(retention_seconds=0)
    wh.recover()
    assert read_uri(result["index"]) and listed_files(result, "sales.events")


_DUCKDB_TYPES = {"int64": "BIGINT", "int32": "INTEGER", "string": "VARCHAR", "bool": "BOOLEAN", "date32[day]": "DATE"}


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def duckdb_sql(body: dict[str, Any]) -> str:
    """A query over the manifest alone: one SELECT per part, partition columns added as typed literals."""
    types = {c["name"]: c["type"] for c in body["columns"]}
    selects = []
    for part in body["parts"]:
        files = "[" + ", ".join(_quote(f["path"]) for f in part["files"]) + "]"
        columns = []
        for col in types:
            if col in body["partition_by"]:
                value = part["partition"][col]
                literal = "NULL" if value is None else _quote(value)
                columns.append(f"CAST({literal} AS {_DUCKDB_TYPES[types[col]]}) AS {col}")
            else:
                columns.append(col)
        selects.append(f"SELECT {', '.join(columns)} FROM read_parquet({files})")
    return " UNION ALL ".join(selects)


@pytest.mark.local_root  # duckdb reads s3:// only with its httpfs extension, downloaded at run time
def test_duckdb_reads_each_table_from_the_manifest_alone(wh: Warehouse) -> None:
    duckdb = pytest.importorskip("duckdb")
    make_tables(wh)
    wh.create_table("sales.metrics", METRICS, partition_by=["region", "year"])
    metrics = pa.table({"region": ["eu", "eu", "us", "it's"], "year": [2023, 2024, 2024, 2024],
                        "id": [1, 2, 3, 4], "amount": [1.5, 2.5, 3.5, 4.5]}, schema=METRICS)
    with wh.begin() as t:
        t.append("sales.events", events([1, 2], day="2024-01-01", value=2.0))
        t.append("sales.events", events([3], day="2024-01-02"))
        t.append("sales.accounts", accounts({1: 10, 2: 20}))
        t.append("sales.metrics", metrics)
    older = wh.readable_csn()
    with wh.begin() as t:
        t.append("sales.events", events([4], day="2024-01-03"))
        t.append("sales.accounts", accounts({3: 30}))
        replacement = pa.table({"region": ["eu"], "year": [2024], "id": [9], "amount": [9.5]}, schema=METRICS)
        t.overwrite("sales.metrics", replacement, partitions=[{"region": "eu", "year": 2024}])
    con = duckdb.connect()
    try:
        for csn in (older, wh.readable_csn()):
            result = wh.write_manifest(csn)
            for table in ("sales.events", "sales.accounts", "sales.metrics"):
                body = manifest(result, table)
                assert body["parts"], f"{table} has parts at CSN {csn}"
                rows = con.execute(duckdb_sql(body)).fetchall()
                expected = [tuple(r.values()) for r in wh.read(table, csn).to_pylist()]
                assert sorted(rows) == sorted(expected), (table, csn)
    finally:
        con.close()


def test_every_manifest_lists_what_the_read_planner_plans(wh: Warehouse, monkeypatch: pytest.MonkeyPatch) -> None:
    """One place decides what a manifest lists (issue 31): each table of `write_manifest` at a CSN and at a tag,
    and of `Transaction.manifest` in the transaction's view (its read recorded there), is planned by reading.plan."""
    from airflow_txn.core import reading

    planned: list[tuple[str, str]] = []
    real = reading.plan

    def plan(rt: Any, table: str, csn: int | None = None, view: Any = None, tag: str | None = None,
             partitions: Any = None) -> reading.Planned:
        planned.append((table, "tag" if tag is not None else "view" if view is not None else "csn"))
        return real(rt, table, csn=csn, view=view, tag=tag, partitions=partitions)

    monkeypatch.setattr(reading, "plan", plan)
    make_tables(wh)
    with wh.begin() as t:
        t.append("sales.events", events([1]))
        t.append("sales.accounts", accounts({1: 10}))
    wh.tag("both")
    wh.write_manifest()
    assert sorted(planned) == [("sales.accounts", "csn"), ("sales.events", "csn")]
    planned.clear()
    wh.write_manifest(tag="both", tables=["sales.events"])
    assert planned == [("sales.events", "tag")]
    planned.clear()
    t = wh.begin()
    t.append("sales.events", events([2]))
    manifest = t.manifest(["sales.events"])
    assert planned == [("sales.events", "view")]
    assert manifest["sales.events"]["row_count"] == 2 and manifest["sales.events"]["tid"] == t.tid
    t.rollback()


def test_a_part_written_under_an_older_schema_names_the_file_column_of_each_column(wh: Warehouse) -> None:
    """A manifest reader reads files by column name: a part whose files name a column otherwise (renamed), store
    another type (widened) or lack a defaulted column carries `columns`, {column: its name in the files, or null};
    parts read right by name carry none (docs/MANIFESTS.md)."""
    make_tables(wh)
    with wh.begin() as t:
        t.append("sales.events", events([1, 2]))
    with wh.begin() as t:
        t.rename_column("sales.events", "value", "amount")
        t.add_column("sales.events", pa.field("qty", pa.int64()), default=3)
        t.add_column("sales.events", pa.field("note", pa.string()))
        t.append("sales.events", pa.table({"id": [3], "day": ["2024-01-02"], "amount": [2.0], "qty": [4],
                                           "note": ["n"]}))
    with wh.begin() as t:
        t.add_column("sales.accounts", pa.field("owner", pa.string()))  # read right by name: no `columns`
    body = manifest(wh.write_manifest(), "sales.events")
    by_day = {p["partition"]["day"]: p for p in body["parts"]}
    assert by_day["2024-01-01"]["columns"] == {"id": "id", "day": "day", "amount": "value", "qty": None,
                                               "note": None}
    assert "columns" not in by_day["2024-01-02"]
    assert all("columns" not in p for p in manifest(wh.write_manifest(), "sales.accounts")["parts"])
