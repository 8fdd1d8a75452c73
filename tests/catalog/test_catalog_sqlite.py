"""The SQLite catalog's transactions: `write()` holds the database lock from its start, `read()` is one
snapshot, and neither leaves a statement outside its transaction.

The BEGIN is emitted by Catalog.write/read themselves (no `begin` event listener: docs/BENCHMARKS.md, B1),
so these check, with a second plain sqlite3 connection, that the lock and the snapshot are really there.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pyarrow as pa
import pytest
from sqlalchemy import select, update

from airflow_txn import Warehouse
from airflow_txn.catalog import Catalog, schema
from airflow_txn.errors import CatalogReadOnlyError, WarehouseNotFoundError

_c = schema.counters.c
_GATE = schema.COUNTER_SNAPSHOT_GATE


@pytest.fixture
def catalog(tmp_path: Path) -> Catalog:
    cat = Catalog(f"sqlite:///{tmp_path / 'catalog.db'}")
    cat.initialize()
    yield cat
    cat.dispose()


def _other(catalog: Catalog) -> sqlite3.Connection:
    """A second connection that gives up at once when the database is locked."""
    assert catalog.engine.url.database
    return sqlite3.connect(catalog.engine.url.database, timeout=0, isolation_level=None)


def _gate(catalog: Catalog) -> int:
    with catalog.read() as conn:
        return int(conn.execute(select(_c.value).where(_c.name == _GATE)).scalar_one())


def test_write_holds_the_database_lock_before_its_first_statement(catalog: Catalog) -> None:
    other = _other(catalog)
    try:
        with catalog.write(), pytest.raises(sqlite3.OperationalError, match="locked"):
            other.execute("BEGIN IMMEDIATE")
        other.execute("BEGIN IMMEDIATE")  # free again once write() ended
        other.execute("COMMIT")
    finally:
        other.close()


def test_read_takes_no_write_lock(catalog: Catalog) -> None:
    other = _other(catalog)
    try:
        with catalog.read() as conn:
            conn.execute(select(_c.value)).all()
            other.execute("BEGIN IMMEDIATE")
            other.execute("COMMIT")
    finally:
        other.close()


def test_read_is_one_snapshot(catalog: Catalog) -> None:
    before = _gate(catalog)
    other = _other(catalog)
    try:
        with catalog.read() as conn:
            first = conn.execute(select(_c.value).where(_c.name == _GATE)).scalar_one()
            other.execute("UPDATE txn_counters SET value = value + 5 WHERE name = ?", (_GATE,))
            second = conn.execute(select(_c.value).where(_c.name == _GATE)).scalar_one()
        assert first == second == before  # in autocommit the second read would see the update
    finally:
        other.close()
    assert _gate(catalog) == before + 5


def test_write_is_undone_whole_when_it_raises(catalog: Catalog) -> None:
    before = _gate(catalog)
    with pytest.raises(RuntimeError, match="boom"), catalog.write() as conn:
        conn.execute(update(schema.counters).where(_c.name == _GATE).values(value=_c.value + 1))
        conn.execute(update(schema.counters).where(_c.name == _GATE).values(value=_c.value + 1))
        raise RuntimeError("boom")
    assert _gate(catalog) == before


def test_write_commits_on_a_clean_exit(catalog: Catalog) -> None:
    before = _gate(catalog)
    with catalog.write() as conn:
        conn.execute(update(schema.counters).where(_c.name == _GATE).values(value=_c.value + 1))
    assert _gate(catalog) == before + 1


# -- a SQLite catalog named by a URI filename (`sqlite:///file:PATH?uri=true`, SQLAlchemy's form for SQLite's URI
# options such as mode=ro) -------------------------------------------------------------------------------------------
def _uri_url(path: Path, query: str = "") -> str:
    return f"sqlite:///file:{path}?uri=true{query}"


def test_a_uri_catalog_is_the_file_it_names_and_nothing_lands_in_the_working_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A URI-form URL is the file after `file:`: created there, found there once it exists (not taken for a missing
    catalog), and no directory named `file:` appears where the process runs."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    path = tmp_path / "sub" / "c.db"
    with Warehouse.open(catalog=_uri_url(path), root=tmp_path / "wh") as wh:
        assert not wh.exists()
        wh.create_table("ns.t", pa.schema([("id", pa.int64())]))
        with wh.begin() as t:
            t.append("ns.t", pa.table({"id": [1, 2]}))
    assert path.is_file()
    with Warehouse.open(catalog=_uri_url(path), root=tmp_path / "wh") as again:
        assert again.exists()
        assert again.tables() == ["ns.t"]
        assert again.read("ns.t").num_rows == 2
    assert list(cwd.iterdir()) == []


def test_a_read_only_uri_catalog_reads_and_refuses_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`mode=ro`: the catalog is read as it is, and a write is CatalogReadOnlyError (not a missing warehouse, and
    nothing created beside it or in the working directory)."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    path = tmp_path / "c.db"
    with Warehouse.open(catalog=f"sqlite:///{path}", root=tmp_path / "wh") as wh:
        wh.create_table("ns.t", pa.schema([("id", pa.int64())]))
        with wh.begin() as t:
            t.append("ns.t", pa.table({"id": [1, 2, 3]}))
    with Warehouse.open(catalog=_uri_url(path, "&mode=ro"), root=tmp_path / "wh") as ro:
        assert ro.tables() == ["ns.t"]
        assert ro.read("ns.t").num_rows == 3
        with pytest.raises(CatalogReadOnlyError):
            ro.begin()
    assert list(cwd.iterdir()) == []


def test_a_missing_read_only_uri_catalog_is_a_missing_warehouse(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with Warehouse.open(catalog=_uri_url(tmp_path / "none.db", "&mode=ro"), root=tmp_path / "wh") as wh, \
            pytest.raises(WarehouseNotFoundError):
        wh.tables()
    assert sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.mark.parametrize(("url", "expected"), [
    ("sqlite:////tmp/a/c.db", "/tmp/a/c.db"),
    ("sqlite:///file:/tmp/a/c.db?uri=true", "/tmp/a/c.db"),
    ("sqlite:///file:///tmp/a/c.db?mode=ro&uri=true", "/tmp/a/c.db"),
    ("sqlite:///file://localhost/tmp/a/c.db?uri=1", "/tmp/a/c.db"),
    ("sqlite:///file:/tmp/a%20b/c.db?uri=true", "/tmp/a b/c.db"),
    ("sqlite:///file::memory:?cache=shared&uri=true", None),
    ("sqlite:///file:shared?mode=memory&cache=shared&uri=true", None),
    ("sqlite://", None),
    ("sqlite:///file:/tmp/a/c.db", "file:/tmp/a/c.db"),  # no uri=true: SQLite opens a file of that (relative) name
])
def test_the_file_a_sqlite_url_names(url: str, expected: str | None) -> None:
    from airflow_txn.catalog.database import _sqlite_file

    found = _sqlite_file(url)
    assert (None if found is None else str(found)) == expected
