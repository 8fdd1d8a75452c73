"""B15: changing tables. (a) Adding a column to 3 tables of 1,000 parts each and committing; (b) reading a table whose
parts span 5 schema versions against the same rows written under one.

(a) `with wh.begin() as t: t.add_column(table, field)` for each of 3 tables, then the commit (begin to the end of
    commit: three versions staged, one commit record, applied and readable). Each table holds 1,000 parts (one
    partitioned append of 1,000 days, 5 columns). Every repetition adds another column (and drops it afterwards, off
    the clock, so the tables keep their width; they gain two versions per repetition). Metadata only: no part is read or
    rewritten (docs/DESIGN.md, D27), so the same transaction on 3 tables of ONE part each is timed beside it, the
    two in a rotation of their own (the ratio shows that the parts do not matter); then again with the others. On
    SQLite (target <= 10 ms median) and on PostgreSQL (reported; a database created and dropped here on the server of
    $AIRFLOW_TXN_BENCH_PG, default the local one).
    Peers, on ONE table of 1,000 data files each (neither can change two tables in one commit; their tables keep
    every column added):
        delta-rs   `DeltaTable(path).alter.add_columns([Field(...)])`
        pyiceberg  `table.update_schema().add_column(...).commit()` (SqlCatalog on SQLite)
(b) `wh.read(table)` of a table of 100 parts (20,000 rows each) written under 5 versions, 20 parts per version:
    v1 (id, day, qty int32, price, item); v2 adds `discount` (nullable); v3 renames `item` to `product`; v4 widens
    `qty` to int64; v5 adds `note` with a default. Every older part is read under v5 by column id (nulls, the
    default, the cast, the new name). Against `wh.read` of a table created with v5's schema holding the same rows in
    the same 100 parts. Target: 5 versions / 1 version <= 1.1.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from itertools import count
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from airflow_txn import Warehouse
from benchmarks import _bench, _peers

ROW = "B15"
ADD = "add a column to 3 tables of 1,000 parts, commit"
READ = "read a table of 100 parts written under 5 schema versions"
TARGET_MS = 10.0
TARGET_READ = 1.1
TABLES = ("b15.orders", "b15.items", "b15.customers")
SMALL = tuple(f"{name}_small" for name in TABLES)
SQLITE = f"{_bench.OURS}, SQLite"
SQLITE_SMALL = f"{_bench.OURS}, SQLite, tables of 1 part"
PG = f"{_bench.OURS}, PostgreSQL"
EVOLVED = f"{_bench.OURS}, 5 versions"
FLAT = f"{_bench.OURS}, 1 version"
BASE = pa.schema([("id", pa.int64()), ("day", pa.int32()), ("qty", pa.int32()), ("price", pa.float64()),
                  ("item", pa.string())])
GATE_PARTS = 3.0
"""--quick fails when the change on tables of many parts costs 3 times the same change on tables of one part: a
change that reads or rewrites parts (1,000 times the work) instead of staging a schema version."""
CPU: dict[str, list[float]] = {}
"""CPU seconds of each timed call, by contender (the wall time suffers more from other load than the CPU time)."""
CPU_OWN = (SQLITE, SQLITE_SMALL, PG)  # contenders that record their own CPU time (their untimed drop left out)


def run(quick: bool) -> list[dict[str, Any]]:
    return _add_rows(quick) + _read_rows(quick)


# -- (a) adding a column --------------------------------------------------------------------------------------------
def parts_data(days: int, rows_per_day: int = 2) -> pa.Table:
    ids = np.arange(days * rows_per_day, dtype=np.int64)
    return pa.table({"id": ids, "day": pa.array(ids % days, pa.int32()), "qty": pa.array(ids % 7, pa.int32()),
                     "price": pa.array(ids * 0.5, pa.float64()), "item": pa.array([f"i{i}" for i in ids])})


def _add_rows(quick: bool) -> list[dict[str, Any]]:
    # quick: 12 repetitions (was 20): medians of 12 interleaved changes; the gated ratio (100 parts / 1 part) sits
    # near 1.1 against a gate of 3, a change that read or rewrote the parts would cost 100x the work
    parts, reps = (100, 12) if quick else (1_000, 60)
    measure = ADD if not quick else ADD.replace("1,000", f"{parts:,}")
    data, small = parts_data(parts), parts_data(1)
    columns = count()
    skipped: dict[str, str] = {}
    with _bench.scratch("b15-") as base, _postgres(skipped) as pg_catalog:
        sqlite = _peers.warehouse(base / "sqlite")
        warehouses = [sqlite]
        contenders = {SQLITE: _adder(SQLITE, sqlite, TABLES, data, columns),
                      SQLITE_SMALL: _adder(SQLITE_SMALL, sqlite, SMALL, small, columns)}
        if pg_catalog is not None:
            pg = Warehouse.open(catalog=pg_catalog, root=str(base / "pg"), oracle="sql")
            pg.init()
            warehouses.append(pg)
            contenders[PG] = _adder(PG, pg, TABLES, data, columns)
        contenders.update(_peer_adders(base, data, skipped))
        try:
            # ours against the same change on tables of one part, in a rotation of their own (a contender timed
            # right after delta-rs or pyiceberg, whose threads outlive their call, is slowed by them); then ours
            # again with PostgreSQL and the peers
            own = {name: contenders.pop(name) for name in (SQLITE, SQLITE_SMALL)}
            samples = _bench.interleave(own, reps=reps, warmup=2)
            cpu = {name: _cpu(name, reps) for name in own}
            contenders[SQLITE] = own[SQLITE]
            mixed = _bench.interleave({name: fn if name in CPU_OWN else _with_cpu(name, fn)
                                       for name, fn in contenders.items()}, reps=reps, warmup=1)
            work = _catalog_work(sqlite, columns)
            width = len(sqlite.schema(TABLES[0]))
        finally:
            for wh in warehouses:
                wh.close()
    ours = samples[SQLITE]
    rows = [_bench.result(ROW, measure, SQLITE, ours, target=TARGET_MS, target_on="median_ms",
                          note=f"{work}; {cpu[SQLITE]}; tables of {width} columns"),
            _bench.result(ROW, measure, SQLITE_SMALL, samples[SQLITE_SMALL],
                          ratio=_bench.ratio(ours, samples[SQLITE_SMALL]), ratio_of=f"{SQLITE} / this", gate=GATE_PARTS,
                          note=f"the same transaction where each table has one part; {cpu[SQLITE_SMALL]}")]
    again = mixed[SQLITE]
    of = f"{SQLITE} (3 tables; {_bench.median_ms(again):.2f} ms in this rotation) / this"
    if PG in mixed:
        rows.append(_bench.result(ROW, measure, PG, mixed[PG], note=f"reported, no target; {_cpu(PG, reps)}"))
    else:
        rows.append(_bench.not_run(ROW, measure, PG, skipped[PG]))
    for name in (_bench.DELTA, _bench.ICEBERG):
        if name in skipped:
            rows.append(_bench.not_run(ROW, measure, name, skipped[name]))
        else:
            rows.append(_bench.result(ROW, measure, name, mixed[name], ratio=_bench.ratio(again, mixed[name]),
                                      ratio_of=of, note=f"ONE table of {parts:,} files; {_cpu(name, reps)}"))
    return rows


def _adder(name: str, wh: Warehouse, tables: tuple[str, ...], data: pa.Table,
           columns: Iterator[int]) -> Callable[[], float]:
    """The contender `name`: the transaction of (a) on `tables` (created here with `data`), its CPU time in CPU."""
    for table in tables:
        wh.create_table(table, data.schema, ["day"])
    with wh.begin(label="b15-load") as t:
        t.append_many({table: data for table in tables})

    def add() -> float:
        field = pa.field(f"c{next(columns)}", pa.float64())
        cpu = time.process_time()
        seconds = _bench.timed(lambda: _add(wh, tables, field))
        CPU.setdefault(name, []).append(time.process_time() - cpu)
        _drop(wh, tables, field.name)  # off the clock: every repetition changes tables of the same width
        return seconds

    return add


def _drop(wh: Warehouse, tables: tuple[str, ...], column: str) -> None:
    with wh.begin(label="b15-drop") as t:
        for name in tables:
            t.drop_column(name, column)


def _add(wh: Warehouse, tables: tuple[str, ...], field: pa.Field) -> None:
    with wh.begin(label="b15") as t:
        for name in tables:
            t.add_column(name, field)


def _peer_adders(base: Path, data: pa.Table, skipped: dict[str, str]) -> dict[str, Callable[[], float]]:
    out: dict[str, Callable[[], float]] = {}
    columns = count()
    if (why := _bench.missing("deltalake")) is None:
        from deltalake import DeltaTable, write_deltalake
        from deltalake.schema import Field

        path = str(base / "delta" / "orders")
        write_deltalake(path, data, partition_by=["day"])

        def delta() -> float:
            field = Field(f"c{next(columns)}", "double", nullable=True)
            return _bench.timed(lambda: DeltaTable(path).alter.add_columns([field]))

        out[_bench.DELTA] = delta
    else:
        skipped[_bench.DELTA] = why
    if (why := _bench.missing("pyiceberg")) is None:
        from pyiceberg.types import DoubleType

        catalog = _peers.iceberg_catalog(base / "iceberg")
        _peers.iceberg_table(catalog, "orders", data.schema, partition_by="day").append(data)

        def iceberg() -> float:
            name = f"c{next(columns)}"

            def change() -> None:
                with catalog.load_table("bench.orders").update_schema() as update:
                    update.add_column(name, DoubleType())

            return _bench.timed(change)

        out[_bench.ICEBERG] = iceberg
    else:
        skipped[_bench.ICEBERG] = why
    return out


@contextmanager
def _postgres(skipped: dict[str, str]) -> Iterator[str | None]:
    """The URL of a database created for this run (dropped afterwards), or None (skipped[PG] says why)."""
    admin = _bench.pg_admin()
    why = _bench.pg_unreachable(admin)
    if why is not None:
        skipped[PG] = why
        yield None
        return
    with _bench.pg_databases(admin, f"airflow_txn_bench_b15_{os.getpid()}") as (url,):
        yield url


def _catalog_work(wh: Warehouse, columns: Iterator[int]) -> str:
    """What one transaction of (a) asks of the catalog: SQL statements and catalog transactions."""
    from sqlalchemy import event

    counts = {"statements": 0, "transactions": 0}

    def tally(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        counts["transactions" if statement.startswith("BEGIN") else "statements"] += 1

    engine = wh.runtime.catalog.engine
    event.listen(engine, "before_cursor_execute", tally)
    field = pa.field(f"c{next(columns)}", pa.float64())
    try:
        _add(wh, TABLES, field)
    finally:
        event.remove(engine, "before_cursor_execute", tally)
    _drop(wh, TABLES, field.name)
    return f"{counts['statements']} SQL statements in {counts['transactions']} catalog transactions"


def _with_cpu(name: str, fn: Callable[[], float]) -> Callable[[], float]:
    def measured() -> float:
        cpu = time.process_time()
        seconds = fn()
        CPU.setdefault(name, []).append(time.process_time() - cpu)
        return seconds

    return measured


def _cpu(name: str, n: int) -> str:
    return f"CPU {_bench.median_ms(CPU[name][-n:]):.2f} ms" if CPU.get(name) else ""


# -- (b) reading across versions ------------------------------------------------------------------------------------
def version_rows(version: int, part: int, rows: int) -> pa.Table:
    """One part's rows as version `version` writes them."""
    ids = np.arange(rows, dtype=np.int64) + (version * 1_000 + part) * rows
    columns: dict[str, Any] = {"id": ids, "day": pa.array(ids % 30, pa.int32()),
                               "qty": pa.array(ids % 97, pa.int64() if version >= 4 else pa.int32()),
                               "price": pa.array(ids * 0.25, pa.float64()),
                               ("product" if version >= 3 else "item"): pa.array(np.char.add("p", (ids % 1000)
                                                                                             .astype(str)))}
    if version >= 2:
        columns["discount"] = pa.array(np.where(ids % 3 == 0, 0.1, 0.0))
    if version >= 5:
        columns["note"] = pa.array(np.char.add("n", (ids % 50).astype(str)))
    return pa.table(columns)


def evolve(t: Any, table: str, version: int) -> None:
    """The change that makes `version` of the evolved table (2..5)."""
    if version == 2:
        t.add_column(table, pa.field("discount", pa.float64()))
    elif version == 3:
        t.rename_column(table, "item", "product")
    elif version == 4:
        t.alter_column(table, "qty", pa.int64())
    elif version == 5:
        t.add_column(table, pa.field("note", pa.string(), nullable=False), default="none")


def _read_rows(quick: bool) -> list[dict[str, Any]]:
    # quick: 12 reads of each table (was 20): the ratio of medians sat at 1.0-1.13 against a gate of 2.2 (twice
    # the target); 12 interleaved reads keep it well inside
    per_version, rows, reps = (4, 5_000, 12) if quick else (20, 20_000, 30)
    measure = READ if not quick else READ.replace("100", str(5 * per_version))
    evolved, flat = "b15.evolved", "b15.flat"
    with _bench.scratch("b15-read-") as base:
        wh = _peers.warehouse(base)
        try:
            wh.create_table(evolved, BASE)
            for version in range(1, 6):
                with wh.begin(label=f"b15-v{version}") as t:
                    if version > 1:
                        evolve(t, evolved, version)
                    for part in range(per_version):
                        t.append(evolved, version_rows(version, part, rows))
            expected = wh.read(evolved)
            wh.create_table(flat, expected.schema)
            with wh.begin(label="b15-flat") as t:
                for piece in range(5 * per_version):
                    t.append(flat, expected.slice(piece * rows, rows))
            if not wh.read(flat).equals(expected):
                raise AssertionError("the table written under one version does not read as the evolved one")
            samples = _bench.interleave({
                EVOLVED: _with_cpu(EVOLVED, lambda: _bench.timed(lambda: wh.read(evolved))),
                FLAT: _with_cpu(FLAT, lambda: _bench.timed(lambda: wh.read(flat)))}, reps=reps, warmup=2)
        finally:
            wh.close()
    total = 5 * per_version * rows
    return [_bench.result(ROW, measure, EVOLVED, samples[EVOLVED], ratio=_bench.ratio(samples[EVOLVED], samples[FLAT]),
                          ratio_of="this / 1 version", target=TARGET_READ,
                          note=f"{5 * per_version} parts x {rows:,} rows ({total:,}), {4 * per_version} of them "
                               f"written under an older version and projected; {_cpu(EVOLVED, reps)}"),
            _bench.result(ROW, measure, FLAT, samples[FLAT],
                          note=f"{statistics.median(samples[FLAT]) * 1e6 / total:.3f} us a row; {_cpu(FLAT, reps)}")]


NOTES = """\
**(a) Adding a column: metadata only, as designed.** The same transaction on tables of 1,000 parts and of one part
costs the same (the ratio in the table): no part is read or written, a change stages one schema version per table
(`txn_table_versions`) and the commit stamps them with the commit's CSN like parts. One transaction of this row is the
SQL statements and catalog transactions shown in the table: per table a read (the transaction, the table, the version
it sees) and a write (the lease, the removal lock on the version seen, the next number, the new version), then the
commit (the conflict check of D27 point 4 included) in one catalog transaction.

**Engine fix: the version statements built once** (`catalog/table_versions.py`: `visible_for_statement`, `stage` and
`stamp_commit` run statements built at import with bound parameters, and txn_tables' schema cache is updated in one
executemany; `visibility_sql.version_visible_clause` takes bindparams, as the parts' clause does). The
profile (cProfile, 100 transactions of this row on SQLite) showed a third of the CPU in building SQLAlchemy statements
per call (`coercions.expect`, `values()`, cache keys): 3 statements per change and 4-6 per commit. Before/after, the
same transaction in a loop of its own, alternating processes, 100 each, load average 5-6 (other sessions on this
2-core machine): **CPU 6.95 / 7.15 / 7.42 / 7.49 / 7.61 ms -> 4.88 / 5.01 / 5.05 / 5.08 / 5.66 ms** median per
transaction for `stage` and `stamp_commit`; wall time followed when the machine let it (12 -> 5 ms in the quieter
moments). `visible_for_statement` then, at load 10: 6.08 / 6.21 / 5.83 -> 4.99 / 5.12 / 6.08 ms.

**Engine fix: a DDL commit no longer walks the tables' parts.** Timing each statement on tables of 1,000 parts
against tables of one part showed one that grew with the parts: the commit's conflict check (D27 point 4) looked
for the tables the transaction wrote with `table_id IN (...)` and its tids, and SQLite chose the table index, so it
walked all 3,000 parts (1.3 ms of the commit). It now finds them from the transaction's own parts (the tid indexes)
and keeps those among the tables checked. `tests/core/test_table_change_cost.py` counts SQLite's VM steps of an
add_column transaction on tables of 4 and of 400 parts: 977 and 5,329 before, the same after.

**Engine fix: a change's cost no longer grows with the table's history.** Merging a later version of the core
(a column id is never given twice, even after a withdrawn change: `table_versions.last_column_id` reads the schema
of every version the table ever had) took this transaction from ~5 to ~10-12 ms of CPU: every repetition here adds
two versions per table (the add and the drop), ~125 by the end of a full run, and each change decoded all of them.
Each stored schema's last id is now remembered by its bytes (a version never changes): ~5.5-6 ms of CPU again at
~200 versions per table. The rows of every version are still read per change (a few hundred small rows here).

**The 10 ms target: missed by a little, under load.** The table's run (2026-12-06 01:50 UTC, load average 4.7
before, 5.8 after, from other sessions' Spark tests on this 2-core machine): 10.56 ms median with 7.2 ms of CPU.
When the machine has a core free, the wall time of this transaction is about its CPU time (SQLite in WAL mode, no
fsync per commit): 5.0-5.1 ms in a loop of its own at load 5, before the merge that added `last_column_id`; ~5.5-6 ms
of CPU after it. Under load a process waiting for a core doubles or triples the wall time of ~45 short statements
(earlier full runs today: 22.0 ms at load 5 rising to 10, 17.3 ms at load 10-11, 13.7 ms at load 9.7, 10.7 ms at
load 6.9). In the second rotation, with PostgreSQL and the peers, the same transaction took 16.7 ms: right after
delta-rs or pyiceberg (their threads outlive their call) it is slower, which is why the target and the parts ratio
are measured in a rotation of their own. What is left is ~45 statements through SQLAlchemy Core at 0.05-0.1 ms each
and 7 catalog transactions; fewer would mean one catalog transaction per change instead of a read and a write (the
read checks the transaction and the table before the change is computed, outside the write lock: a change to the
core's statement path, not made here).

**PostgreSQL** (reported): the same statements, each a round trip to the server, plus BEGIN/COMMIT and the pool's
pre-ping per catalog transaction: a profile of 30 transactions counted ~110 waits on the server per transaction,
which took two thirds of the time (psycopg's `wait`); the server shares the two loaded cores with the client.

**Peers** change ONE table each and cannot change two in one commit. delta-rs's `alter.add_columns` loads the
table's snapshot (1,000 add actions) and writes a metadata action; pyiceberg's `update_schema()` loads the table's
metadata, writes a new metadata file (every schema of its history in it, so it grows with each column added here)
and swaps the pointer in its SQL catalog.

**(b) Reading across 5 schema versions: within noise of one version.** A part written under an older version is
read as written and projected once by column id (`core/versions.read_part`, `model/evolution.projection`: a cast for
the widened column, nulls for the added one, the default repeated for the other, the new name for the renamed one);
the schemas of the older versions come from ONE extra catalog read per `wh.read`. The parts written under older
versions hold fewer columns in their files, so reading them costs less, which pays for the projection: a profile of
20 reads of each table (quick size) put the projection at ~1 % of a read. --quick's smaller reads (20 parts of 5,000
rows) move the ratio by 0.1-0.2 under load in either direction; the full size gives it at 0.9-1.03.
"""
