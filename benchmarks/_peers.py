"""The contenders of the side-by-side rows, each on its own directory of one temp dir, same machine.

airflow_txn   an embedded warehouse: SQLite catalog file (WAL), local storage root, SQL CSN oracle
floor         what any implementation must do at least: pyarrow Parquet files + one SQLite
              transaction by hand, with the catalog's own durability settings (WAL, synchronous=NORMAL)
delta-rs      `deltalake` tables on the local filesystem (its defaults: a checkpoint every 100 commits)
pyiceberg     `pyiceberg` SqlCatalog on a SQLite file, warehouse on the local filesystem

The peers come from the `bench` extra (pip install -e '.[bench]'); nothing here is imported by the
package. Peer imports stay inside the functions so a row runs without them and says so.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from airflow_txn import Warehouse


def warehouse(base: Path) -> Warehouse:
    """A new warehouse under `base`, created (opening alone creates nothing: docs/DESIGN.md D17)."""
    wh = Warehouse.open(catalog=f"sqlite:///{base / 'catalog.db'}", root=str(base / "warehouse"), oracle="sql")
    wh.init()
    return wh


class Floor:
    """Parquet files written straight into a directory per table, and one SQLite transaction listing them."""

    def __init__(self, base: Path) -> None:
        base.mkdir(parents=True, exist_ok=True)
        self.base = base
        self.db = sqlite3.connect(base / "floor.db", isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute("CREATE TABLE IF NOT EXISTS files (tbl TEXT, path TEXT, row_count INTEGER, csn INTEGER)")
        self.csn = 0

    def commit(self, tables: dict[str, pa.Table]) -> None:
        """Write one Parquet file per table, then record all of them in one SQLite transaction."""
        rows = []
        for name, data in tables.items():
            directory = self.base / name
            directory.mkdir(exist_ok=True)
            path = directory / f"{uuid.uuid4().hex}.parquet"
            pq.write_table(data, path)
            rows.append((name, str(path), data.num_rows))
        self.csn += 1
        self.db.execute("BEGIN IMMEDIATE")
        self.db.executemany("INSERT INTO files VALUES (?, ?, ?, ?)", [(*r, self.csn) for r in rows])
        self.db.execute("COMMIT")

    def close(self) -> None:
        self.db.close()


class ProtocolMinimum:
    """airflow_txn's protocol reduced to what it cannot do without, by hand with sqlite3: the transaction row
    before any file; per staging call a part directory, its sidecar, the Parquet file and ONE catalog
    transaction registering the part (staging calls come from other processes: each must be durable by
    itself); the commit as ONE catalog transaction (record, CSN stamps, state). 2 + tables catalog
    transactions where the floor has one."""

    def __init__(self, base: Path) -> None:
        base.mkdir(parents=True, exist_ok=True)
        self.base = base
        self.db = sqlite3.connect(base / "protocol.db", isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.executescript(
            "CREATE TABLE txns (tid TEXT PRIMARY KEY, state TEXT, csn INTEGER);"
            "CREATE TABLE parts (id INTEGER PRIMARY KEY, tbl TEXT, path TEXT, tid TEXT, csn INTEGER);"
            "CREATE INDEX parts_tid ON parts (tid);"
            "CREATE TABLE log (csn INTEGER PRIMARY KEY, tid TEXT);"
            "CREATE TABLE counter (value INTEGER); INSERT INTO counter VALUES (1);")

    def _write(self, sql: str, *args: Any) -> Any:
        self.db.execute("BEGIN IMMEDIATE")
        try:
            cursor = self.db.execute(sql, *args)
            result = cursor.fetchone()
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        return result

    def _write_part(self, tid: str, name: str, data: pa.Table) -> Path:
        """A part directory with its sidecar and its Parquet file; returns the directory."""
        part = self.base / name / f"p-{uuid.uuid4().hex}"
        part.mkdir(parents=True)
        (part / "_sidecar.json").write_text(json.dumps({"tid": tid, "table": name}))
        pq.write_table(data, part / "part-00000.parquet")
        return part

    def commit(self, tables: dict[str, pa.Table]) -> None:
        tid = uuid.uuid4().hex
        self._write("INSERT INTO txns VALUES (?, 'active', NULL)", (tid,))
        files = []
        for name, data in tables.items():
            part = self._write_part(tid, name, data)
            files.append(part / "part-00000.parquet")
            self.db.execute("BEGIN IMMEDIATE")
            assert self.db.execute("SELECT state FROM txns WHERE tid = ?", (tid,)).fetchone() == ("active",)
            self.db.execute("INSERT INTO parts (tbl, path, tid) VALUES (?, ?, ?)", (name, str(part), tid))
            self.db.execute("COMMIT")
        assert all(f.is_file() for f in files)
        self.db.execute("BEGIN IMMEDIATE")
        assert self.db.execute("SELECT state FROM txns WHERE tid = ?", (tid,)).fetchone() == ("active",)
        (csn,) = self.db.execute("UPDATE counter SET value = value + 1 RETURNING value").fetchone()
        self.db.execute("INSERT INTO log VALUES (?, ?)", (csn, tid))
        self.db.execute("UPDATE parts SET csn = ? WHERE tid = ?", (csn, tid))
        self.db.execute("UPDATE txns SET state = 'committed', csn = ? WHERE tid = ?", (csn, tid))
        self.db.execute("COMMIT")

    def close(self) -> None:
        self.db.close()


class ProtocolMinimumCore(ProtocolMinimum):
    """The same protocol minimum, statement for statement, through the stack the catalog is built on: SQLAlchemy
    Core in the catalog's own write transactions (airflow_txn.catalog.Catalog.write: pooled connections, BEGIN
    IMMEDIATE), with every statement built once and bound per call (SQLAlchemy's best case). What it costs over
    the sqlite3 version is the floor that the stack alone puts under any implementation of the protocol."""

    def __init__(self, base: Path) -> None:
        from sqlalchemy import Column, Integer, MetaData, String, Table, bindparam, insert, select, update

        from airflow_txn.catalog import Catalog

        super().__init__(base)  # the schema, created by sqlite3; SQLAlchemy works on the same file
        self.db.close()
        self.catalog = Catalog(f"sqlite:///{base / 'protocol.db'}")
        self.catalog.initialize()  # Catalog.write() needs an airflow_txn catalog there (its tables stay unused)
        meta = MetaData()
        txns = Table("txns", meta, Column("tid", String, primary_key=True), Column("state", String),
                     Column("csn", Integer))
        parts = Table("parts", meta, Column("id", Integer, primary_key=True), Column("tbl", String),
                      Column("path", String), Column("tid", String), Column("csn", Integer))
        log = Table("log", meta, Column("csn", Integer, primary_key=True), Column("tid", String))
        counter = Table("counter", meta, Column("value", Integer))
        self.begin_txn = insert(txns).values(tid=bindparam("tid"), state="active")
        self.state = select(txns.c.state).where(txns.c.tid == bindparam("tid"))
        self.add_part = insert(parts).values(tbl=bindparam("tbl"), path=bindparam("path"), tid=bindparam("tid"))
        self.next_csn = update(counter).values(value=counter.c.value + 1).returning(counter.c.value)
        self.record = insert(log).values(csn=bindparam("csn"), tid=bindparam("tid"))
        self.stamp = update(parts).where(parts.c.tid == bindparam("t")).values(csn=bindparam("c"))
        self.flip = update(txns).where(txns.c.tid == bindparam("t")).values(state="committed", csn=bindparam("c"))

    def commit(self, tables: dict[str, pa.Table]) -> None:
        tid = uuid.uuid4().hex
        with self.catalog.write() as conn:
            conn.execute(self.begin_txn, {"tid": tid})
        files = []
        for name, data in tables.items():
            part = self._write_part(tid, name, data)
            files.append(part / "part-00000.parquet")
            with self.catalog.write() as conn:
                assert conn.execute(self.state, {"tid": tid}).scalar_one() == "active"
                conn.execute(self.add_part, {"tbl": name, "path": str(part), "tid": tid})
        assert all(f.is_file() for f in files)
        with self.catalog.write() as conn:
            assert conn.execute(self.state, {"tid": tid}).scalar_one() == "active"
            csn = conn.execute(self.next_csn).scalar_one()
            conn.execute(self.record, {"csn": csn, "tid": tid})
            conn.execute(self.stamp, {"c": csn, "t": tid})
            conn.execute(self.flip, {"c": csn, "t": tid})

    def close(self) -> None:
        self.catalog.dispose()


def delta_append(path: Path, data: pa.Table, checkpoints: bool = True) -> None:
    """One delta-rs append commit (`write_deltalake(mode="append")`, the table opened from its path)."""
    from deltalake import PostCommitHookProperties, write_deltalake

    hooks = None if checkpoints else PostCommitHookProperties(create_checkpoint=False)
    write_deltalake(str(path), data, mode="append", post_commithook_properties=hooks)


def iceberg_catalog(base: Path) -> Any:
    from pyiceberg.catalog.sql import SqlCatalog

    base.mkdir(parents=True, exist_ok=True)
    catalog = SqlCatalog("bench", uri=f"sqlite:///{base / 'iceberg.db'}", warehouse=f"file://{base / 'data'}")
    catalog.create_namespace_if_not_exists("bench")
    return catalog


def iceberg_table(catalog: Any, name: str, schema: pa.Schema, partition_by: str | None = None) -> Any:
    table = catalog.create_table(f"bench.{name}", schema=schema)
    if partition_by is not None:
        with table.update_spec() as spec:
            spec.add_identity(partition_by)
        table = catalog.load_table(f"bench.{name}")
    return table
