"""B16 at scale: one night's vacuum of a day's parts on a 100,000,000-part PostgreSQL catalog (issue 34, point 2).

    .venv/bin/python benchmarks/b16_vacuum_at_scale.py --parts 100000000 --json out.json
    .venv/bin/python benchmarks/b16_vacuum_at_scale.py --parts 2000000 --day-parts 20000      # a try-out

The year simulator (b16_year.py) drives every step through the engine, which takes days at 100 million parts;
here the catalog is bulk-loaded instead, by B3's loader (b3_part_lookup.py: its synthetic history of transactions
appending 1-3 parts to one of 100 tables, 2 % rolled back, one in twenty a compaction replacing every visible part
of its table), and cut as nightly vacuums would have left it up to a horizon H0: no part that ended before H0, no
rolled-back part but the day's. The "day" is the CSNs [H0, H1) chosen so that the parts that ended in it, with the
day's rolled-back parts, are `--day-parts` (default 720,000: the reference workload's day, 10,000 DAG runs x 3
tables x 24 partitions). Two commit records (and the CSN counter at the history's last CSN) put the snapshot
current 7 days ago at H1, so `wh.vacuum(retention_seconds=7 days)`, the engine's own vacuum in another process as
`airflow-txn vacuum` runs it, finds exactly that day to delete: the parts' files (absent: the storage stand-in keeps
nothing, so each delete is a failed unlink on the local root) and their rows, 500 per catalog transaction.

Meanwhile this process commits 3-table transactions (3 tables of their own, one small part each, real Parquet
files on the local root) in a loop: for `--settle` seconds before the vacuum, while it runs, and for `--settle`
seconds after; reported is commit p99 while it ran / p99 without (before and after together; target <= 2).

Afterwards: every one of 10 tables' visible parts at 5 snapshots from H1 to the latest are the ones they were
before the vacuum (by part id; nothing a retained snapshot needs was purged), a read below H1 refuses
(SnapshotTooOldError), and the parts left are the loaded ones less exactly the day's.

What this does not build: the day's history rows (transactions, commit records, keys, scans, read sets). B3's
history has none, and they are B16's own measurement (the simulator's nightly purge, docs/benchmarks/year.md),
added to this figure in the notes at the rate measured there.
"""

from __future__ import annotations

import argparse
import copy
import json
import multiprocessing
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from sqlalchemy import text

if __package__ in (None, ""):  # run as a script: the repository on the path, as benchmarks/run.py puts it
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from airflow_txn import Warehouse
from airflow_txn.catalog import Catalog, commit_log, compaction_records, counters, part_records, table_registry
from airflow_txn.errors import SnapshotTooOldError
from airflow_txn.model.csn import ROLLBACK_CSN
from airflow_txn.storage.local_root import LocalRoot
from benchmarks import _bench, b16_year
from benchmarks import b3_part_lookup as b3

DAY_PARTS = 720_000
RETENTION_SECONDS = 7 * 24 * 3600.0
H0_AT = 0.10
"""Where the day starts, as a fraction of the history's CSNs (every part that ended before it is left out)."""
VACUUM_TARGET_S = 60.0
P99_TARGET = 2.0
CHECK_TABLES = 10
TABLES = 3
"""The reference workload's tables: a day's parts are 240,000 a table, what one table's vacuum deletes in a row."""
CHECK_SNAPSHOTS = 5


def cut(history: b3.History, day_parts: int, nights: int = 2) -> tuple[b3.History, list[int], list[int]]:
    """`history` as vacuums up to H0 would have left it, the horizons [H0, H1, ..., H_nights] that give each night
    `day_parts` parts to delete, and how many each night has. Night k deletes the parts removed at a CSN in
    (H_k-1, H_k]; the first night also the rolled-back parts of the first day's transactions (the only ones kept: a
    vacuum takes rolled-back parts whatever the horizon, so a later day's would all go the first night)."""
    last = history.last_csn
    h0 = max(2, int(last * H0_AT))
    ended = np.sort(history.removal_csn[history.removal_csn > h0])
    rolled = history.creation_csn == ROLLBACK_CSN
    txn_of_csn = np.zeros(last + 2, dtype=np.int64)  # the last committed transaction at or before each CSN
    txn_of_csn[history.creation_csn[~rolled]] = history.creation_txn[~rolled]
    np.maximum.accumulate(txn_of_csn, out=txn_of_csn)
    rolled_txns = np.sort(history.creation_txn[rolled])

    def count(lo: int, hi: int, with_rolled: bool) -> int:
        removed = int(np.searchsorted(ended, hi, "right") - np.searchsorted(ended, lo, "right"))
        if not with_rolled:
            return removed
        return removed + int(np.searchsorted(rolled_txns, txn_of_csn[hi], "right")
                             - np.searchsorted(rolled_txns, txn_of_csn[lo], "right"))

    bounds = [h0]
    for night in range(nights):
        lo, first = bounds[-1], night == 0
        if count(lo, last, first) < day_parts:
            raise SystemExit(f"the history holds fewer than {day_parts:,} parts for night {night + 1}; more --parts")
        a, b = lo, last
        while b - a > 1:  # the smallest horizon giving the night day_parts parts
            mid = (a + b) // 2
            a, b = (mid, b) if count(lo, mid, first) < day_parts else (a, mid)
        bounds.append(b)
    day_rolled = rolled & (history.creation_txn > txn_of_csn[h0]) & (history.creation_txn <= txn_of_csn[bounds[1]])
    keep = ((history.removal_csn == 0) | (history.removal_csn > h0)) & (~rolled | day_rolled)
    out = copy.copy(history)
    for name in ("table", "creation_csn", "creation_txn", "removal_csn", "removal_txn"):
        setattr(out, name, getattr(history, name)[keep])
    return out, bounds, [count(bounds[k], bounds[k + 1], k == 0) for k in range(nights)]


def place_horizon(url: str, horizon: int, last: int | None = None, back: float = 3600.0) -> None:
    """A commit record putting the snapshot current RETENTION_SECONDS ago at `horizon` (committed `back` seconds
    before that); with `last`, the CSN counter at the history's last CSN and its record, a minute ago."""
    catalog = Catalog(url)
    try:
        now = time.time()
        with catalog.write() as conn:
            commit_log.write_record(conn, horizon, f"{horizon}-0-00000000000000a1", [],
                                    committed_at=now - RETENTION_SECONDS - back, applied=True)
            if last is not None:
                counters.set_last_csn(conn, last)
                commit_log.write_record(conn, last, f"{last}-0-00000000000000a2", [], committed_at=now - 60,
                                        applied=True)
    finally:
        catalog.dispose()


def visible_ids(url: str, table_ids: list[int], snapshots: list[int]) -> dict[tuple[int, int], list[int]]:
    catalog = Catalog(url)
    try:
        with catalog.read() as conn:
            return {(t, s): sorted(p.id for p in part_records.visible_parts(conn, t, None, s))
                    for t in table_ids for s in snapshots}
    finally:
        catalog.dispose()


SPLIT = (("storage deletes", LocalRoot, "delete_part"), ("garbage batches", compaction_records, "garbage_batch"),
         ("row deletes", part_records, "forget"), ("garbage counts", compaction_records, "garbage_count"))
"""Where the part files stage's time goes, timed in the vacuum's process around these functions."""


def _timed_calls() -> dict[str, float]:
    """Wrap SPLIT's functions (in this process only) to add up their seconds."""
    spent = dict.fromkeys((name for name, _, _ in SPLIT), 0.0)
    for name, owner, attribute in SPLIT:
        original = getattr(owner, attribute)

        def timed(*args: Any, _original: Any = original, _name: str = name, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return _original(*args, **kwargs)
            finally:
                spent[_name] += time.perf_counter() - start

        setattr(owner, attribute, timed)
    return spent


def vacuum_elsewhere(url: str, root: Path) -> tuple[Any, Any, Any]:
    """Start a vacuum in another process (B16's child, on this machine's clock, SPLIT's calls timed there): (the
    process, an event set once it began, the queue of its result)."""
    ctx = multiprocessing.get_context("spawn")
    started, results = ctx.Event(), ctx.Queue()
    child = ctx.Process(target=b16_year.vacuum_in_child,  # `started` is its `ready` and its `done`: set once it began
                        args=(url, str(root), 0.0, RETENTION_SECONDS, started, started, results, _timed_calls))
    child.start()
    return child, started, results


def _vacuum_result(child: Any, results: Any) -> tuple[dict[str, Any], float, float]:
    got = b16_year.child_result(child, results, 3600)
    child.join(60)
    if isinstance(got, str):
        raise RuntimeError(f"the vacuum failed: {got}")
    report, began, ended, timings = got
    return {**report, **timings}, began, ended


def vacuum_alone(url: str, root: Path) -> dict[str, Any]:
    child, _started, results = vacuum_elsewhere(url, root)
    report, began, ended = _vacuum_result(child, results)
    return {"report": report, "vacuum_s": ended - began}


def commits_around_vacuum(url: str, root: Path, settle: float) -> dict[str, Any]:
    """Commit 3-table transactions for `settle` s, then while a vacuum runs in another process, then `settle` s."""
    data = pa.table({"id": pa.array(range(100), pa.int64())})
    names = [f"engine.t{n}" for n in range(3)]
    stamps: list[tuple[float, float]] = []  # (start, end) epoch seconds
    with Warehouse.open(catalog=url, root=str(root)) as wh:
        for name in names:
            wh.create_table(name, data.schema)

        def commit() -> None:
            start = time.time()
            with wh.begin() as t:
                for name in names:
                    t.append(name, data)
            stamps.append((start, time.time()))

        for _ in range(5):
            commit()
        stamps.clear()
        until = time.time() + settle
        while time.time() < until:
            commit()
        child, started, results = vacuum_elsewhere(url, root)
        while not started.wait(1.0) and child.is_alive():  # its interpreter starting
            pass
        while child.is_alive() and results.empty():
            commit()
        report, began, ended = _vacuum_result(child, results)
        until = time.time() + settle
        while time.time() < until:
            commit()
    during = [e - s for s, e in stamps if e > began and s < ended]
    without = [e - s for s, e in stamps if e <= began or s >= ended]
    return {"report": report, "vacuum_s": ended - began, "during": during, "without": without}


def run(parts: int, day_parts: int, settle: float, admin: str | None, tables: int = TABLES) -> dict[str, Any]:
    admin_url = _bench.pg_admin(admin)
    why = _bench.pg_unreachable(admin_url)
    if why is not None:
        raise SystemExit(f"PostgreSQL: {why}")
    started = time.time()
    drawn = b3.History(int(parts / (1 - H0_AT * 0.98)), tables=tables)  # about H0_AT of them end before H0
    history, bounds, nights = cut(drawn, day_parts)
    del drawn
    h2 = bounds[-1]
    print(f"history: {len(history):,} parts after the cut, CSNs 1-{history.last_csn:,}, horizons {bounds}: "
          f"{nights} parts a night ({time.time() - started:.0f} s)", flush=True)
    out: dict[str, Any] = {"parts": len(history), "tables": tables, "horizons": bounds, "night_parts": nights,
                           "last_csn": history.last_csn}
    with _bench.scratch("b16-scale-") as tmp, _bench.pg_databases(admin_url, "airflow_txn_bench_b16_scale") as urls:
        url, root = urls[0], tmp / "root"
        t0 = time.time()
        table_ids = b3._load_pg(url, history, unlogged=False)
        out["load_s"] = time.time() - t0
        print(f"loaded in {out['load_s']:.0f} s", flush=True)
        place_horizon(url, bounds[1], history.last_csn)
        with Catalog(url).engine.connect() as conn:
            out["txn_parts_bytes"] = int(conn.execute(text("SELECT pg_total_relation_size('txn_parts')")).scalar_one())
            out["rows_before"] = int(conn.execute(text("SELECT count(*) FROM txn_parts")).scalar_one())
        probe = table_ids[:: max(1, len(table_ids) // CHECK_TABLES)][:CHECK_TABLES]
        snaps = sorted({h2 + (history.last_csn - h2) * k // (CHECK_SNAPSHOTS - 1) for k in range(CHECK_SNAPSHOTS)})
        before = visible_ids(url, probe, snaps)
        print(f"catalog: {out['rows_before']:,} part rows, txn_parts {out['txn_parts_bytes'] / 1e9:.1f} GB; night 1 "
              "(vacuum alone)", flush=True)
        alone = vacuum_alone(url, root)
        print(f"night 1: {alone['vacuum_s']:.1f} s; night 2 (DAG runs committing)", flush=True)
        place_horizon(url, bounds[2], back=60.0)
        timing = commits_around_vacuum(url, root, settle)
        after = visible_ids(url, probe, snaps)
        changed = [key for key in before if before[key] != after[key]]
        with Warehouse.open(catalog=url, root=str(root)) as wh:
            with wh.runtime.catalog.read() as conn:
                name = table_registry.by_id(conn, probe[0]).name.qualified
            try:
                wh.read(name, csn=h2 - 1)
                refused = False
            except SnapshotTooOldError:
                refused = True
        with Catalog(url).engine.connect() as conn:
            out["rows_after"] = int(conn.execute(text("SELECT count(*) FROM txn_parts")).scalar_one())
    p99_during, p99_without = b16_year._p99(timing["during"]), b16_year._p99(timing["without"])
    engine_parts = 3 * (len(timing["during"]) + len(timing["without"]) + 5)
    reports = [alone["report"], timing["report"]]
    out.update(
        vacuum_s=[alone["vacuum_s"], timing["vacuum_s"]],
        parts_removed=[r["parts_removed"] for r in reports], horizon=[r["horizon"] for r in reports],
        stage_seconds=[r["stage_seconds"] for r in reports], split_seconds=[r["split_seconds"] for r in reports],
        rows_purged=[r["rows_purged"] for r in reports],
        commits_during=len(timing["during"]), commits_without=len(timing["without"]),
        p99_during_ms=p99_during * 1e3, p99_without_ms=p99_without * 1e3,
        median_during_ms=statistics.median(timing["during"]) * 1e3 if timing["during"] else None,
        median_without_ms=statistics.median(timing["without"]) * 1e3,
        p99_ratio=p99_during / p99_without if timing["during"] else None,
        snapshots_checked=len(before), snapshots_changed=len(changed), below_horizon_refused=refused,
        rows_expected_after=out["rows_before"] - sum(nights) + engine_parts, took_s=time.time() - started)
    out["ok"] = (not changed and refused and out["parts_removed"] == nights and out["horizon"] == bounds[1:]
                 and out["rows_after"] == out["rows_expected_after"])
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", type=int, default=100_000_000, help="part rows in the catalog (about)")
    parser.add_argument("--day-parts", type=int, default=DAY_PARTS, help="parts one day's vacuum deletes")
    parser.add_argument("--tables", type=int, default=TABLES, help="tables the history spreads its parts over")
    parser.add_argument("--settle", type=float, default=30.0, help="seconds of commits before and after the vacuum")
    parser.add_argument("--pg", default=None, help="an admin URL of the PostgreSQL server (database postgres)")
    parser.add_argument("--json", default=None, help="write the report here")
    args = parser.parse_args()
    out = run(args.parts, args.day_parts, args.settle, args.pg, args.tables)
    text_out = json.dumps(out, indent=2)
    print(text_out)
    if args.json:
        Path(args.json).write_text(text_out + "\n")
    print(f"vacuum of one day ({out['parts_removed']} parts) on {out['parts']:,}: alone {out['vacuum_s'][0]:.1f} s, "
          f"while DAG runs commit {out['vacuum_s'][1]:.1f} s (target {VACUUM_TARGET_S:.0f} s); commit p99 during / "
          f"without {out['p99_ratio'] or 0:.2f} (target {P99_TARGET:g}); nothing retained purged: {out['ok']}")
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
