"""Opening a warehouse whose catalog is current is a read: it checks the schema version in a read
transaction and takes the catalog's write lock (SQLite's database lock, PostgreSQL's schema advisory
lock) only when the catalog must be created or upgraded, so a reader never queues behind a writer."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
import pytest
from sqlalchemy import create_engine, select, text

from airflow_txn import Warehouse
from airflow_txn.catalog import database, schema
from airflow_txn.errors import TxnError


@contextmanager
def _hold_catalog_lock(url: str) -> Iterator[None]:
    """Hold, from a second connection, the lock a catalog writer (or schema creator) holds: SQLite's
    database write lock (`BEGIN IMMEDIATE`), PostgreSQL's schema-initialisation advisory lock."""
    if url.startswith("sqlite"):
        holder = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        return
    engine = create_engine(url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": database._PG_INIT_LOCK})
        try:
            yield
        finally:
            conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": database._PG_INIT_LOCK})
    engine.dispose()


def _no_endless_wait(url: str) -> str:
    """On PostgreSQL, a lock wait that fails after 20 s instead of hanging the suite (the unfixed open
    waits on the advisory lock); SQLite's own busy timeout already ends the wait."""
    if url.startswith("sqlite"):
        return url
    return url.replace("options=-c", "options=-clock_timeout%3D20000%20-c", 1)


def test_a_read_only_open_does_not_wait_for_a_writer(catalog_url: str, root: Path) -> None:
    """issue 16, case 8: Warehouse.open on a current catalog runs no write transaction, so opening and
    reading succeed while another connection holds the catalog's write lock."""
    with Warehouse.open(catalog=catalog_url, root=str(root)) as first:  # creates the catalog
        first.create_table("ns.t", pa.schema([("id", pa.int64())]))
    with _hold_catalog_lock(catalog_url), Warehouse.open(catalog=_no_endless_wait(catalog_url),
                                                         root=str(root)) as wh:
        assert wh.tables() == ["ns.t"]
        assert wh.readable_csn() >= 1
        assert wh.transactions() == []


def test_an_older_catalog_is_upgraded_only_on_request(tmp_path: Path) -> None:
    """issue 16, case 8, and D23: a catalog below the current index version is used as it is on open (no write);
    `upgrade=True` sends it through the (locking) upgrade, which records the new version."""
    url = f"sqlite:///{tmp_path / 'catalog.db'}"
    with Warehouse.open(catalog=url, root=str(tmp_path / "root")) as wh:
        wh.init()
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(schema.meta.update().where(schema.meta.c.key == "index_version").values(value="1"))
    Warehouse.open(catalog=url, root=str(tmp_path / "root")).close()
    with engine.connect() as conn:
        assert conn.execute(select(schema.meta.c.value).where(schema.meta.c.key == "index_version")).scalar() == "1"
    Warehouse.open(catalog=url, root=str(tmp_path / "root"), upgrade=True).close()
    with engine.connect() as conn:
        found = conn.execute(select(schema.meta.c.value).where(schema.meta.c.key == "index_version")).scalar_one()
    engine.dispose()
    assert int(found) == schema.INDEX_VERSION


def test_a_newer_catalog_is_refused_without_a_write(tmp_path: Path) -> None:
    """issue 16, case 8: the version check stays: a catalog newer than this package may use is refused."""
    url = f"sqlite:///{tmp_path / 'catalog.db'}"
    with Warehouse.open(catalog=url, root=str(tmp_path / "root")) as wh:
        wh.init()
    engine = create_engine(url)
    with engine.begin() as conn:
        newer = str(schema.SCHEMA_VERSION + 1)
        conn.execute(schema.meta.update().where(schema.meta.c.key == "schema_version").values(value=newer))
        conn.execute(schema.meta.update().where(schema.meta.c.key == "min_client_version").values(value=newer))
    engine.dispose()
    with pytest.raises(TxnError, match="newer than this airflow-txn"):
        Warehouse.open(catalog=url, root=str(tmp_path / "root"))
