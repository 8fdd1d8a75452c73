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
    return Warehouse.open(catalog=f"sqlite:///{base / 'catalog.db'}", root=str(base / "warehouse"), oracle="sql")


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

    def commit(self, tables: dict[str, pa.Table]) -> None:
        tid = uuid.uuid4().hex
        self._write("INSERT INTO txns VALUES (?, 'active', NULL)", (tid,))
        files = []
        for name, data in tables.items():
            part = self.base / name / f"p-{uuid.uuid4().hex}"
            part.mkdir(parents=True)
            (part / "_sidecar.json").write_text(json.dumps({"tid": tid, "table": name}))
            pq.write_table(data, part / "part-00000.parquet")
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
