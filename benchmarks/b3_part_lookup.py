"""B3: visible-part lookup for one table at a latest / mid / early snapshot, 1,000,000 parts in 100 tables.

    .venv/bin/python benchmarks/b3_part_lookup.py [--quick] [--parts N] [--pg URL] [--no-pg]

Builds a benchmark-only catalog (a SQLite file in a temp dir, and a dedicated PostgreSQL database
created and dropped here) with the project's own schema (`Catalog.initialize`), then bulk-loads the
part rows of a synthetic history straight into `txn_parts` (executemany on SQLite, COPY on
PostgreSQL): commits touch one random table each; most append 1-3 parts, one in twenty replaces
every visible part of its table (a compaction: removal CSN stamped on the old parts), 2 % of the
transactions roll back (RollbackCSN). So each table holds ~10,000 parts of history of which a few
dozen are visible at any snapshot, and the latest, mid (50 % of the CSNs) and early (10 %) snapshots
see different sets. Nothing is vacuumed: the history stays in the catalog, as within a long
retention window.

Timed: the engine's lookup, `part_records.visible_parts(conn, table_id, None, snapshot)` in a
`catalog.read()` transaction, exactly as `wh.read()` calls it, for one table at a time (rotating
over 10 tables). Peer: the same call on a copy of the catalog whose `txn_parts` indexes were
dropped (primary key kept). Each repetition runs a burst of lookups on our catalog and one on the
copy, interleaved. PostgreSQL tables are ANALYZEd after loading (autovacuum would do it); SQLite is
not (the engine never runs ANALYZE, so its planner works from the schema alone, as in production).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sqlite3
import statistics
import time
from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text

from airflow_txn.catalog import Catalog, part_records, table_registry
from airflow_txn.model.csn import ROLLBACK_CSN
from airflow_txn.model.names import parse_table_name
from benchmarks import _bench

ID = "B3"
NOTES = """\
**Before / after (engine fixes of this row).** 1,000,000 parts, the same catalogs, the engine at
commit 556bf63 (old index, old query) against the one with these changes, in alternating processes, 300
lookups each, median (p95) in ms; load average about 6 (a first run at load 8 gave 1.5-2.5 times
these "before" numbers and the same "after" ones):

| lookup | SQLite before | SQLite after | PostgreSQL before | PostgreSQL after |
|---|---|---|---|---|
| latest snapshot | 15.61 (31.9) | 0.33 (4.7) | 5.09 (12.4) | 0.67 (3.9) |
| mid snapshot | 5.78 (13.9) | 0.57 (4.8) | 24.80 (58.1) | 0.66 (3.0) |
| early snapshot | 2.77 (8.1) | 0.84 (4.9) | 2.26 (8.4) | 0.79 (3.3) |

In a transaction (a tid given: `t.read`, and every overwrite/delete/update statement) SQLite went
from 15-21 ms to 0.2-1.5 ms per lookup at this size.

What the profiles and plans showed, and the fixes:
1. Index `(table_id, creation_csn)`: at the latest snapshot `creation_csn <= S` matches every part
   the table ever had (10,000 here), each fetched from the table to test `removal_csn`. Replaced by
   `(table_id, removal_csn, creation_csn)`: live parts are the `removal_csn IS NULL` range, parts
   removed after the snapshot the `removal_csn > S` range, and `creation_csn <= S` is tested inside
   the index. Existing catalogs get it from `Catalog.initialize` (schema.INDEX_VERSION, a txn_meta
   row; the old index is dropped); 0.6 s on a 1,000,000-part catalog.
2. In a transaction, `creation_tid = T OR committed(S)` made SQLite read every part of the table;
   the rule now runs as a UNION ALL of two disjoint branches (`visibility.visible_branches`, each with
   its own index; a property test checks they make exactly the rule).
3. Rows were built attribute by attribute (about 11 us a row) and the statement was rebuilt on
   every call: positional rows, file lists decoded once per distinct list, the statement built once
   with bound parameters (2-3 times less Python per lookup).
4. SQLite opened a new connection (and a cold page cache) per lookup: fixed by the connection pool
   (B1's change), which is most of the 37 ms "before" at the latest snapshot.

**Physical limit.** The lookup scans the index entries of the parts removed after the snapshot
(latest: none; mid: half the table's history; early: 90 %), about 9,000 entries per table at the
early snapshot here: 0.5-0.9 ms on SQLite, which has no statistics to choose another index.
PostgreSQL's planner combines both ranges (bitmap OR). On PostgreSQL a lookup costs two round
trips (the pool's pre-ping and the query; reads run in autocommit, no BEGIN/COMMIT): on this
shared 2-CPU machine each round trip waits for a CPU, which is the spread between the median and
the p95.
"""
TABLES = 100
PG_ADMIN = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
TARGET_MS = 1.0
MEASURE = "visible-part lookup of one table"
GATE = 0.5  # --quick fails if a lookup costs half a scan of the catalog: an index no longer used
PEER = "same lookup, project indexes dropped"
COLUMNS = ("table_id", "partition_key", "path", "files", "row_count", "size_bytes", "creation_tid", "creation_csn",
           "removal_tid", "removal_csn", "stage_key", "stage_attempt", "removal_key", "removal_attempt", "created_at")


# -- the synthetic history ---------------------------------------------------------------------------
class History:
    """Parts in creation order (column arrays; 0 = NULL for CSNs and tids), and the CSNs to look at."""

    def __init__(self, parts: int, tables: int = TABLES, seed: int = 7) -> None:
        rng = random.Random(seed)
        self.table = array("i")
        self.creation_csn = array("q")
        self.creation_txn = array("q")
        self.removal_csn = array("q")
        self.removal_txn = array("q")
        visible: list[list[int]] = [[] for _ in range(tables)]
        csn, txn = 1, 0
        while len(self.table) < parts:
            t = rng.randrange(tables)
            txn += 1
            roll = rng.random()
            if roll < 0.02:  # a rolled-back transaction: its parts carry RollbackCSN
                self._add(t, ROLLBACK_CSN, txn, rng.randint(1, 3))
                continue
            csn += 1
            count = rng.randint(1, 3)
            if roll < 0.07 and visible[t]:  # compaction: replace every visible part of the table
                for i in visible[t]:
                    self.removal_csn[i], self.removal_txn[i] = csn, txn
                visible[t] = []
                count = rng.randint(1, 2)
            start = len(self.table)
            self._add(t, csn, txn, count)
            visible[t].extend(range(start, start + count))
        self.last_csn = csn
        self.snapshots = {"latest": csn, "mid": 1 + (csn - 1) // 2, "early": 1 + (csn - 1) // 10}

    def _add(self, table: int, csn: int, txn: int, count: int) -> None:
        for _ in range(count):
            self.table.append(table)
            self.creation_csn.append(csn)
            self.creation_txn.append(txn)
            self.removal_csn.append(0)
            self.removal_txn.append(0)

    def __len__(self) -> int:
        return len(self.table)

    def rows(self, table_ids: list[int]) -> Iterator[tuple[Any, ...]]:
        """Catalog rows in COLUMNS order."""
        now = time.time()
        files = '["part-00000.parquet"]'
        for i in range(len(self.table)):
            rtxn = self.removal_txn[i]
            yield (table_ids[self.table[i]], "{}", f"p-{i:032x}", files, 1000, 65536,
                   f"{self.creation_csn[i] if self.creation_csn[i] != ROLLBACK_CSN else 1}-{self.creation_txn[i]}"
                   "-9f1c0a2b4d5e6f70", self.creation_csn[i],
                   f"{self.removal_csn[i]}-{rtxn}-9f1c0a2b4d5e6f70" if rtxn else None,
                   self.removal_csn[i] or None, None, None, None, None, now)

    def visible_count(self, table: int, snapshot: int) -> int:
        return sum(1 for i in range(len(self.table)) if self.table[i] == table and self.creation_csn[i] <= snapshot
                   and not (self.removal_csn[i] and self.removal_csn[i] <= snapshot))


# -- catalogs ----------------------------------------------------------------------------------------
def _create_tables(catalog: Catalog) -> list[int]:
    import pyarrow as pa

    schema = pa.schema([("id", pa.int64())])
    with catalog.write() as conn:
        return [table_registry.create(conn, parse_table_name(f"bench.t{n:03d}"), schema, []).id
                for n in range(TABLES)]


def _load_sqlite(path: Path, history: History) -> list[int]:
    catalog = Catalog(f"sqlite:///{path}")
    catalog.initialize()
    table_ids = _create_tables(catalog)
    catalog.dispose()
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA synchronous=OFF")
    db.execute("BEGIN")
    columns, marks = ", ".join(COLUMNS), ", ".join("?" * len(COLUMNS))  # constants of this file
    db.executemany(f"INSERT INTO txn_parts ({columns}) VALUES ({marks})", history.rows(table_ids))  # noqa: S608
    db.execute("COMMIT")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    return table_ids


def _drop_sqlite_indexes(path: Path) -> list[str]:
    db = sqlite3.connect(path, isolation_level=None)
    names = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'txn_parts' "
                                      "AND sql IS NOT NULL")]
    for name in names:
        db.execute(f'DROP INDEX "{name}"')
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    return names


def _pg_url(base: str, database: str) -> str:
    return base.rsplit("/", 1)[0] + "/" + database


def _pg_admin(base: str, *statements: str) -> None:
    engine = create_engine(_pg_url(base, "postgres"), isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        for stmt in statements:
            conn.execute(text(stmt))
    engine.dispose()


def _load_pg(url: str, history: History) -> list[int]:
    catalog = Catalog(url)
    catalog.initialize()
    table_ids = _create_tables(catalog)
    raw = catalog.engine.raw_connection()
    try:
        cur = raw.cursor()
        with cur.copy(f"COPY txn_parts ({', '.join(COLUMNS)}) FROM STDIN") as copy:  # type: ignore[attr-defined]
            for row in history.rows(table_ids):
                copy.write_row(row)
        raw.commit()
        cur.execute("ANALYZE")
        raw.commit()
    finally:
        raw.close()
        catalog.dispose()
    return table_ids


def _drop_pg_indexes(url: str) -> list[str]:
    engine = create_engine(url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        names = [str(r[0]) for r in conn.execute(text(
            "SELECT indexname FROM pg_indexes WHERE tablename = 'txn_parts' AND indexname NOT LIKE '%pkey'"))]
        for name in names:
            conn.execute(text(f'DROP INDEX "{name}"'))
        conn.execute(text("ANALYZE txn_parts"))
    engine.dispose()
    return names


def explain(catalog: Catalog, table_id: int, snapshot: int) -> str:
    """The plan of the engine's lookup, as the catalog's database shows it."""
    from sqlalchemy import select

    from airflow_txn.catalog import schema
    from airflow_txn.catalog.visibility_sql import visible_clause

    p = schema.parts.c
    stmt = select(schema.parts).where(p.table_id == table_id, visible_clause(None, snapshot)).order_by(p.id)
    sql = str(stmt.compile(catalog.engine, compile_kwargs={"literal_binds": True}))
    prefix = "EXPLAIN QUERY PLAN " if catalog.dialect == "sqlite" else "EXPLAIN (ANALYZE, BUFFERS) "
    with catalog.read() as conn:
        return "\n".join(" | ".join(str(c) for c in r) for r in conn.execute(text(prefix + sql)))


# -- timing ------------------------------------------------------------------------------------------
def lookup(catalog: Catalog, table_id: int, snapshot: int) -> int:
    """The engine's lookup, as reading.read does it; returns how many parts are visible."""
    with catalog.read() as conn:
        return len(part_records.visible_parts(conn, table_id, None, snapshot))


def measure(ours: Catalog, peer: Catalog, table_ids: list[int], snapshots: dict[str, int], reps: int,
            burst: int) -> dict[str, dict[str, Any]]:
    """Per snapshot, `reps` repetitions of: `burst` lookups on our catalog and one on the peer (who goes
    first alternates), each lookup on the next of 10 tables."""
    probe = table_ids[:: max(1, len(table_ids) // 10)][:10]
    out: dict[str, dict[str, Any]] = {}
    for name, snapshot in snapshots.items():
        for catalog in (ours, peer):  # warm-up: connections, caches, compiled statements
            lookup(catalog, probe[0], snapshot)
        mine: list[float] = []
        theirs: list[float] = []
        counts: list[int] = []
        turn = 0
        for rep in range(reps):
            with _bench.quiet_gc():
                for side in ("ours", "peer") if rep % 2 == 0 else ("peer", "ours"):
                    if side == "peer":
                        theirs.append(_bench.timed(lambda: lookup(peer, probe[rep % len(probe)], snapshot)))  # noqa: B023
                        continue
                    for _ in range(burst):
                        table_id = probe[turn % len(probe)]
                        turn += 1
                        with _bench.Timer() as timer:
                            counts.append(lookup(ours, table_id, snapshot))
                        mine.append(timer.seconds)
        out[name] = {"ours": mine, "peer": theirs, "visible": statistics.median(counts), "snapshot": snapshot}
    return out


def _rows(backend: str, results: dict[str, dict[str, Any]], parts: int, load_s: float, dropped: list[str],
          plan: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    load = os.getloadavg()[0]
    for name, r in results.items():
        measure = f"{MEASURE}, {name} snapshot, {backend}"
        rows.append(_bench.result(
            ID, measure, _bench.OURS, r["ours"], target=TARGET_MS, target_on="median_ms",
            note=f"{parts:,} parts in {TABLES} tables, CSN {r['snapshot']:,}, {r['visible']:.0f} parts visible "
                 f"(median over 10 tables); load average {load:.1f}; catalog filled in {load_s:.0f} s"
                 + (f"; plan: {plan}" if name == "latest" else "")))
        rows.append(_bench.result(
            ID, measure, PEER, r["peer"], ratio=_bench.ratio(r["ours"], r["peer"]), ratio_of="airflow_txn / this",
            gate=GATE, note=f"dropped {', '.join(dropped)} (primary key kept)"))
    return rows


def _plan_summary(plan: str) -> str:
    keep = [line.strip() for line in plan.splitlines() if "SEARCH" in line or "SCAN" in line or "Index" in line]
    return "; ".join(keep[:3])


def bench_sqlite(history: History, work: Path, reps: int, burst: int) -> list[dict[str, Any]]:
    start = time.perf_counter()
    path = work / "b3.db"
    table_ids = _load_sqlite(path, history)
    load_s = time.perf_counter() - start
    shutil.copy(path, work / "b3_noidx.db")
    dropped = _drop_sqlite_indexes(work / "b3_noidx.db")
    ours, peer = Catalog(f"sqlite:///{path}"), Catalog(f"sqlite:///{work / 'b3_noidx.db'}")
    try:
        plan = explain(ours, table_ids[0], history.snapshots["latest"])
        results = measure(ours, peer, table_ids, history.snapshots, reps, burst)
    finally:
        ours.dispose()
        peer.dispose()
    return _rows("SQLite", results, len(history), load_s, dropped, _plan_summary(plan))


def bench_pg(history: History, admin_url: str, reps: int, burst: int) -> list[dict[str, Any]]:
    db, copy = f"airflow_txn_bench_b3_{os.getpid()}", f"airflow_txn_bench_b3_{os.getpid()}_noidx"
    _pg_admin(admin_url, f"DROP DATABASE IF EXISTS {copy}", f"DROP DATABASE IF EXISTS {db}", f"CREATE DATABASE {db}")
    ours = peer = None
    try:
        start = time.perf_counter()
        table_ids = _load_pg(_pg_url(admin_url, db), history)
        load_s = time.perf_counter() - start
        _pg_admin(admin_url, f"CREATE DATABASE {copy} TEMPLATE {db}")
        dropped = _drop_pg_indexes(_pg_url(admin_url, copy))
        ours, peer = Catalog(_pg_url(admin_url, db)), Catalog(_pg_url(admin_url, copy))
        plan = explain(ours, table_ids[0], history.snapshots["latest"])
        results = measure(ours, peer, table_ids, history.snapshots, reps, burst)
    finally:
        for catalog in (ours, peer):
            if catalog is not None:
                catalog.dispose()
        _pg_admin(admin_url, f"DROP DATABASE IF EXISTS {copy}", f"DROP DATABASE IF EXISTS {db}")
    return _rows("PostgreSQL", results, len(history), load_s, dropped, _plan_summary(plan))


def _pg_reachable(admin_url: str) -> str | None:
    try:
        _pg_admin(admin_url, "SELECT 1")
    except Exception as exc:  # any failure to connect: the row says why it did not run
        return f"PostgreSQL at {admin_url} unreachable: {type(exc).__name__}"
    return None


def run(quick: bool, parts: int | None = None, pg_url: str | None = None) -> list[dict[str, Any]]:
    parts = parts or (100_000 if quick else 1_000_000)
    reps, burst = (6, 10) if quick else (20, 25)
    admin = pg_url or os.environ.get("AIRFLOW_TXN_BENCH_PG", PG_ADMIN)
    history = History(parts)
    rows: list[dict[str, Any]] = []
    with _bench.scratch("b3-") as tmp:
        rows += bench_sqlite(history, tmp, reps, burst)
    why = _pg_reachable(admin)
    if why is None:
        rows += bench_pg(history, admin, reps, burst)
    else:
        for name in history.snapshots:
            rows.append(_bench.not_run(ID, f"{MEASURE}, {name} snapshot, PostgreSQL", _bench.OURS, why,
                                       target=TARGET_MS, target_on="median_ms"))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--parts", type=int, default=None)
    parser.add_argument("--pg", default=None, help="an admin URL of the PostgreSQL server (database postgres)")
    args = parser.parse_args()
    for row in run(args.quick, args.parts, args.pg):
        print(row)


if __name__ == "__main__":
    main()
