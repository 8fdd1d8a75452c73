"""B16: a year of DAG runs through the engine, with the catalog's clock fast-forwarded (issue 34).

    .venv/bin/python benchmarks/b16_year.py --runs-per-day 200 --days 365 --json out.json --plot rows.png
    .venv/bin/python benchmarks/b16_year.py --days 30 --measure --pg postgresql+psycopg://postgres@host/postgres

Workload (a parameter: `Workload`; the reference is 10,000 DAG runs a day, each writing 3 tables x 24
partitions, 720,000 parts a day): every DAG run is ONE transaction whose tasks each append one row per
partition to one table under its key (Transaction.use_key(task, attempt)), i.e. `partitions` parts per
table. Some tasks fail after writing and retry (attempt 2 withdraws attempt 1's parts: invariant 7), 2 % of
the runs roll back, a few die without a word (short lease; the nightly `wh.recover()` rolls them back).
Every night, per table: `wh.compact(table)` (one merge per partition: compaction's catalog swap), then
`wh.recover()`, then `wh.vacuum(retention_seconds=1 day)` with each table's own policy
`wh.set_retention(table, seconds=7 days)`. Nothing here writes SQL: every step is the engine's public API.

Time: the catalog records times with its rows (commit records, transaction rows, merges) and retention,
vacuum's history purge and merge-source protection compare them with the time now; that clock is
injectable (airflow_txn/catalog/clock.py: `use_wall_clock(FastForward())`), so each run happens at its
scheduled time of the simulated day and a night's vacuum sees the retention window pass. Leases stay on the
database's own clock (nothing here needs them fast-forwarded: a dead run's lease runs out in real time).

Storage: the real local root (no stand-in), with parts of ONE row (a Parquet file of about a kilobyte).
Why it changes no catalog behaviour: the catalog holds one row per part whatever its size, and every
catalog decision (visibility, retention, vacuum, compaction's plan and swap) is made on those rows; the
only part sizes it reads are for bin-packing merges, and a night's merge of one-row parts fits one file
per partition exactly as 128 MB ones of a real run would fit `target_file_bytes` per file. A stand-in
keeping only names could not be used: compaction reads its sources' rows and the end-of-year check reads
whole snapshots.

Catalog: a SQLite file by default; `--pg ADMIN_URL` a PostgreSQL server, where the simulation and the fresh catalog
it is compared with get databases of their own (dropped at the end), and where the server's autovacuum is off a
`VACUUM (ANALYZE)` of the simulation's database runs after each night's engine vacuum, standing in for autovacuum
(PostgreSQL's own upkeep, not the engine's: without it dead tuples pile up, docs/benchmarks/year.md).

Reported at the stop day: part rows (live, removed, rolled back), history rows and catalog bytes per table
family; the visible-part lookup at the latest snapshot, one mid-way through the retention window and the
earliest one retained; a 3-table commit on the aged catalog vs on a fresh one; a read 1,000 commits back (or
as far as retention keeps) vs the latest; one night's vacuum, one day of history (target <= 60 s), run in
another process as `airflow-txn vacuum` would be; commit p99 while that vacuum runs vs without (target <= 2 x).
Then every sampled retained snapshot is read back and its rows counted against what the simulation committed
up to it (nothing needed was purged), and a read below the horizon must refuse.
Bounded by design: after each night the live part rows stay <= 10 x the tables' partitions and the
history rows stay below a bound set by the retention window (the run fails otherwise).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import queue
import random
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import pyarrow as pa

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # `python benchmarks/b16_year.py` puts benchmarks/ first, not the repo
    sys.path.insert(0, str(REPO))

from airflow_txn import Warehouse  # noqa: E402
from airflow_txn.catalog import clock, inspection, part_records, table_registry  # noqa: E402
from airflow_txn.core import vacuum  # noqa: E402
from airflow_txn.errors import SnapshotTooOldError, TxnError  # noqa: E402
from airflow_txn.model.results import VacuumReport  # noqa: E402
from benchmarks import _bench  # noqa: E402

ROW = "B16"
DAY = 24 * 3600.0
RUNS_END = 22 * 3600.0
"""The day's runs are spread over 00:00-22:00; the night's maintenance runs at 23:00."""
CRASH_LEASE_SECONDS = 0.2
"""A run that dies holds this lease (real seconds: leases stay on the database's clock)."""
PART_BOUND = 10
"""Live part rows after each night stay <= PART_BOUND x the tables' partitions (issue 34)."""
VACUUM_TARGET_SECONDS = 60.0
"""Issue 34: a vacuum purges one simulated day of history in at most this long."""
P99_RATIO_TARGET = 2.0
"""Issue 34: commit p99 while that vacuum runs <= this x commit p99 without it."""
P99_RATIO_GATE = 6.0
"""--quick fails past this ratio: a p99 of about ten commits on a shared disk reached 3 x here (the vacuum's file
deletes compete with the commits' file writes), while a vacuum holding the catalog's write lock for long would
stall commits for its whole run (tens of x)."""
CHILD_TIMEOUT_SECONDS = 600.0
"""How long the simulation waits for the vacuum process's result once it ended, or for it to exit."""
LOOKBACK = 1000
"""The read measure goes this many commits back (or as far as retention keeps)."""
AGED_RATIO_TARGET = 1.2
"""Issue 34: a 3-table commit on the aged catalog <= this x the same commit on a fresh one, and a read LOOKBACK
commits back <= this x a read at the latest."""
AGED_RATIO_GATE = 3.0
"""--quick fails past this aged / fresh commit ratio (a week's catalog: the ratio is noise around 1 on 5
repetitions; a commit slowing with the catalog's size would pass it). The read's ratio is not gated in --quick: a
week of 40 runs a day keeps 2 days, so the oldest retained snapshot may read a whole day of one-row parts not
merged yet against one merged part per partition at the latest (a cost of the workload, not of the catalog)."""

HISTORY = ("txn_transactions", "txn_commit_log", "txn_table_commits", "txn_keys", "txn_scans", "txn_read_set",
           "txn_compactions", "txn_check_reports")
"""The catalog tables of the history family: what transactions, commits, retries and merges leave behind."""


@dataclass(frozen=True)
class Workload:
    runs_per_day: int = 10_000
    tables: int = 3
    partitions: int = 24
    days: int = 365
    retry_rate: float = 0.05
    """Share of the runs where one task fails after writing and its attempt 2 replaces it."""
    rollback_rate: float = 0.02
    crash_rate: float = 0.002
    """Share of the runs whose process dies mid-run (rolled back by the nightly recover)."""
    retention_days: float = 7.0
    """Each table's own policy (wh.set_retention)."""
    vacuum_window_days: float = 1.0
    """vacuum's retention_seconds (the global rule; the tables' policies keep more)."""
    seed: int = 34

    @property
    def parts_per_day(self) -> int:
        return self.runs_per_day * self.tables * self.partitions


REFERENCE = Workload()
QUICK = Workload(runs_per_day=40, partitions=4, days=7, retention_days=2.0)
FULL = Workload(runs_per_day=25, partitions=24, days=365)
"""What `run.py` measures at full size: 1,800 parts a day for a year (30 minutes here); the reference's
720,000 a day would take this 2-core machine weeks (docs/benchmarks/year.md projects it)."""


@dataclass
class Night:
    """The catalog after one simulated day: `peak_*` before the night's maintenance, the rest after it."""

    day: int
    commits: int
    rollbacks: int
    retries: int
    crashes: int
    csn: int
    peak_parts: int
    peak_history: int
    compacted_live_parts: int
    """Right after the night's compaction (and recovery): what the bound is about."""
    live_parts: int
    removed_parts: int
    rolled_back_parts: int
    history_rows: int
    catalog_bytes: dict[str, int | None]
    merged: int
    recovered: int
    vacuum_seconds: float
    parts_vacuumed: int
    rows_purged: int
    run_seconds: float


@dataclass
class Snapshot:
    """What the simulation committed: the CSN of each committed run, in order."""

    csns: list[int] = field(default_factory=list)

    def committed_at(self, csn: int) -> int:
        import bisect

        return bisect.bisect_right(self.csns, csn)


class YearSim:
    """The simulation over one warehouse under `base` (SQLite catalog unless `catalog` names another)."""

    def __init__(self, base: Path, workload: Workload, catalog: str | None = None,
                 maintenance: Callable[[], None] | None = None) -> None:
        self.w = workload
        self.maintenance = maintenance
        """The database's own upkeep after each night's vacuum (PostgreSQL's VACUUM where autovacuum is off)."""
        self.base = base
        self.wh = Warehouse.open(catalog=catalog or f"sqlite:///{base / 'catalog.db'}", root=str(base / "warehouse"),
                                 oracle="sql")
        self.clock = clock.FastForward()
        self.start = self.clock()
        self.day = 0
        self.rng = random.Random(workload.seed)
        self.committed = Snapshot()
        self.nights: list[Night] = []
        self.tables = [f"sim.t{i}" for i in range(workload.tables)]
        self._schema = pa.schema([("bucket", pa.int32()), ("run", pa.int64()), ("value", pa.float64())])
        self._runs = 0
        self.load: dict[str, list[float]] = {"during": [], "without": []}
        self.crashed: set[str] = set()
        """Runs that died and are not rolled back yet."""
        with self.ticking():
            for name in self.tables:
                self.wh.create_table(name, self._schema, partition_by=["bucket"])
                self.wh.set_retention(name, seconds=workload.retention_days * DAY)

    def close(self) -> None:
        self.wh.close()

    @contextmanager
    def ticking(self) -> Iterator[None]:
        with clock.use_wall_clock(self.clock):
            yield

    def goto(self, offset: float) -> None:
        """Move the clock to `offset` seconds after the simulation's start (never back)."""
        ahead = self.start + offset - self.clock()
        if ahead > 0:
            self.clock.advance(ahead)

    # -- one DAG run --------------------------------------------------------------------------------
    def data(self) -> pa.Table:
        p = self.w.partitions
        return pa.table({"bucket": pa.array(range(p), pa.int32()), "run": pa.array([self._runs] * p, pa.int64()),
                         "value": pa.array([self.rng.random() for _ in range(p)], pa.float64())},
                        schema=self._schema)

    def dag_run(self, fate: str, wh: Warehouse | None = None) -> int | None:
        """One DAG run: "commit", "retry" (a task's attempt 2 replaces its attempt 1, then commit), "rollback"
        or "crash" (its process dies: the lease runs out). Returns the commit's CSN, if any."""
        wh = wh or self.wh
        self._runs += 1
        t = wh.begin(label="sim", lease_seconds=CRASH_LEASE_SECONDS if fate == "crash" else 600.0)
        retried = self.rng.randrange(len(self.tables))
        if fate == "crash":
            self.crashed.add(t.tid)
            with suppress(TxnError):  # the process dies (its lease may run out before it even wrote)
                t.append(self.tables[0], self.data())
            return None
        for i, table in enumerate(self.tables):
            t.use_key(f"write_{i}", attempt=1)
            t.append(table, self.data())
            if fate == "retry" and i == retried:
                t.use_key(f"write_{i}", attempt=2)
                t.append(table, self.data())
        if fate == "rollback":
            t.rollback()
            return None
        csn = t.commit()
        self.committed.csns.append(csn)
        return csn

    def fates(self) -> list[str]:
        out = []
        for _ in range(self.w.runs_per_day):
            x = self.rng.random()
            out.append("crash" if x < self.w.crash_rate else "rollback" if x < self.w.crash_rate + self.w.rollback_rate
                       else "retry" if x < self.w.crash_rate + self.w.rollback_rate + self.w.retry_rate else "commit")
        return out

    # -- one day and its night ----------------------------------------------------------------------
    def run_day(self, under_load: int = 0) -> Night:
        """One simulated day and its night. `under_load` > 0: the night's vacuum runs on a second handle (as
        another process would) while DAG runs keep committing, with `under_load` commits before it and after
        it to compare (`self.load`: their seconds)."""
        started = time.perf_counter()
        with self.ticking():
            fates = self.fates()
            day0 = self.day * DAY
            for k, fate in enumerate(fates):
                self.goto(day0 + k * RUNS_END / len(fates))
                self.dag_run(fate)
            peak = self.catalog_rows()
            self.goto(day0 + 23 * 3600.0)
            recovered = self.recover()
            merged = sum(self.wh.compact(name)["merged"] for name in self.tables)
            compacted = self.part_states()
            self.goto(day0 + 23.5 * 3600.0)
            if under_load:
                report, vacuum_seconds = self._vacuum_under_load(under_load)
            else:
                vacuumed = time.perf_counter()
                report = self.wh.vacuum(retention_seconds=self.w.vacuum_window_days * DAY)
                vacuum_seconds = time.perf_counter() - vacuumed
            if self.maintenance is not None:
                self.maintenance()
            after = self.catalog_rows()
        night = Night(
            day=self.day + 1, commits=fates.count("commit") + fates.count("retry"), rollbacks=fates.count("rollback"),
            retries=fates.count("retry"), crashes=fates.count("crash"), csn=self.wh.readable_csn(),
            peak_parts=peak["parts"].total, peak_history=peak["history"], compacted_live_parts=compacted.live,
            live_parts=after["parts"].live,
            removed_parts=after["parts"].removed, rolled_back_parts=after["parts"].rolled_back,
            history_rows=after["history"], catalog_bytes=after["bytes"], merged=merged, recovered=recovered,
            vacuum_seconds=round(vacuum_seconds, 4), parts_vacuumed=report["parts_removed"],
            rows_purged=sum(report["rows_purged"].values()), run_seconds=round(time.perf_counter() - started, 2))
        self.nights.append(night)
        self.day += 1
        return night

    def recover(self) -> int:
        """The scheduler's nightly `wh.recover()`, repeated until the runs that died today are rolled back (their
        leases, CRASH_LEASE_SECONDS of real time, run out meanwhile), so an open dead run never holds
        compaction back (it would: merges take only parts every open snapshot sees). Returns how many."""
        rolled_back = 0
        while True:
            done = set(self.wh.recover()["rolled_back"])
            rolled_back += len(done)
            self.crashed -= done
            self.crashed = {tid for tid in self.crashed if self.wh.transaction_info(tid)["state"] == "active"}
            if not self.crashed:
                return rolled_back
            time.sleep(CRASH_LEASE_SECONDS / 4)  # until the lease runs out: a bounded wait, not a fixed one

    def _timed_runs(self, n: int) -> list[float]:
        out = []
        for _ in range(n):
            start = time.perf_counter()
            self.dag_run("commit")
            out.append(time.perf_counter() - start)
        return out

    def _vacuum_under_load(self, least: int) -> tuple[VacuumReport, float]:
        """The night's vacuum in ANOTHER process (as `airflow-txn vacuum` or a VacuumOperator runs it: no shared
        interpreter lock), on this simulation's clock, while this one keeps committing DAG runs. The commits that
        overlapped the vacuum are `during`; `least` before it and after it are `without`."""
        before = self._timed_runs(least)
        overlapping: list[tuple[float, float, float]] = []  # (wall start, wall end, seconds) of each commit
        context = multiprocessing.get_context("spawn")  # a fresh interpreter: no engine or lock forked
        ready, done, results = context.Event(), context.Event(), context.Queue()
        child = context.Process(target=vacuum_in_child, name="b16-vacuum", daemon=True, args=(
            str(self.wh.runtime.catalog.url), str(self.base / "warehouse"), self.clock.offset,
            self.w.vacuum_window_days * DAY, ready, done, results))
        child.start()
        try:
            while not ready.wait(1.0):  # its interpreter starting: no commit to count yet
                if not child.is_alive():
                    break
            while not done.is_set() and child.is_alive():
                wall, start = time.time(), time.perf_counter()
                self.dag_run("commit")
                seconds = time.perf_counter() - start
                overlapping.append((wall, wall + seconds, seconds))
            outcome = child_result(child, results, CHILD_TIMEOUT_SECONDS)
        finally:
            child.join(CHILD_TIMEOUT_SECONDS)
        if isinstance(outcome, str):
            raise RuntimeError(f"the vacuum process failed: {outcome}")
        report, began, ended, _timings = outcome
        during = [s for start, end, s in overlapping if start < ended and end > began]
        self.load = {"during": during, "without": before + self._timed_runs(least)}
        return report, ended - began

    def part_states(self) -> inspection.PartStates:
        with self.wh.runtime.catalog.read() as conn:
            return inspection.part_states(conn)

    def catalog_rows(self) -> dict[str, Any]:
        with self.wh.runtime.catalog.read() as conn:
            sizes = inspection.table_sizes(conn)
            states = inspection.part_states(conn)
        history = sum(s.rows for name, s in sizes.items() if name in HISTORY)

        def family_bytes(names: set[str]) -> int | None:
            values = [s.bytes for name, s in sizes.items() if name in names]
            return None if any(v is None for v in values) else sum(v or 0 for v in values)

        everything = set(sizes)
        return {"parts": states, "history": history, "sizes": sizes,
                "bytes": {"parts": family_bytes({"txn_parts"}), "history": family_bytes(set(HISTORY)),
                          "other": family_bytes(everything - {"txn_parts"} - set(HISTORY)),
                          "total": family_bytes(everything)}}

    # -- checks -------------------------------------------------------------------------------------
    def bounds(self) -> dict[str, Any]:
        """Whether the catalog stayed bounded: live parts after each night's compaction <= PART_BOUND x partitions
        (commits after it, the next day's, add theirs: the last night's vacuum runs under load); history
        rows after each night <= (retention days + 2) x the most history any one day added."""
        partitions = self.w.tables * self.w.partitions
        worst_live = max(n.compacted_live_parts for n in self.nights)
        per_day = max(max(n.peak_history - (prev.history_rows if prev else 0), 1)
                      for prev, n in zip([None, *self.nights[:-1]], self.nights, strict=True))
        history_bound = (self.w.retention_days + 2) * per_day
        worst_history = max(n.history_rows for n in self.nights)
        settled = [n.history_rows for n in self.nights[int(self.w.retention_days) + 2:]]
        growth = (settled[-1] - settled[0]) / (len(settled) - 1) if len(settled) > 1 else None
        return {"history_growth_per_night": growth,
                "live_parts_max": worst_live, "live_parts_bound": PART_BOUND * partitions,
                "live_parts_ok": worst_live <= PART_BOUND * partitions, "history_rows_max": worst_history,
                "history_rows_bound": int(history_bound), "history_rows_ok": worst_history <= history_bound}

    def verify(self, samples: int = 12) -> dict[str, Any]:
        """Read retained snapshots back (the latest, the horizon and `samples` between) and count their rows
        against what the simulation committed up to each; a read below the horizon must refuse."""
        checked = 0
        horizon = max(self.wh.retention(name)["horizon"] for name in self.tables)
        retained = [c for c in self.committed.csns if c >= horizon]
        picks = sorted({retained[i * (len(retained) - 1) // max(samples - 1, 1)] for i in range(samples)}
                       | {self.wh.readable_csn()}) if retained else [self.wh.readable_csn()]
        for csn in picks:
            for name in self.tables:
                rows = self.wh.read(name, csn=csn).num_rows
                expected = self.w.partitions * self.committed.committed_at(csn)
                if rows != expected:
                    raise AssertionError(f"{name} at CSN {csn}: {rows} rows, the simulation committed {expected}")
                checked += 1
        refused = None
        older = [c for c in self.committed.csns if c < horizon]
        if older:
            try:
                self.wh.read(self.tables[0], csn=older[-1])
            except SnapshotTooOldError:
                refused = True
            else:
                refused = False
                raise AssertionError(f"a read at CSN {older[-1]}, below the horizon {horizon}, did not refuse")
        return {"snapshots_read": checked, "horizon": horizon, "below_horizon_refused": refused}


def vacuum_in_child(catalog: str, root: str, offset: float, retention_seconds: float, ready: Any, done: Any,
                    results: Any, instrument: Callable[[], dict[str, float]] | None = None) -> None:
    """In a child process (`multiprocessing` target, as `airflow-txn vacuum` runs beside the DAG runs): one vacuum of
    the warehouse at `catalog` / `root` on a clock `offset` seconds ahead of this machine's (0: the machine's), `ready`
    set once the warehouse is open. Puts (report, began, ended, timings) on `results` (epoch seconds, this machine's
    clock; timings: `stage_seconds`, from each progress stage to the next, and what `instrument`, called first in
    the child, has added up by the end, as `split_seconds`), or the error's text; then sets `done`."""
    try:
        spent = instrument() if instrument is not None else {}
        with clock.use_wall_clock(clock.FastForward(offset)):
            wh = Warehouse.open(catalog=catalog, root=root)
            try:
                stages: dict[str, float] = {}  # stage -> when vacuum first reported it

                def progress(stage: str, _done: int, _total: int) -> None:
                    stages.setdefault(stage, time.time())

                ready.set()
                began = time.time()
                report = wh.vacuum(retention_seconds=retention_seconds, progress=progress)
                ended = time.time()
                marks = [*sorted(stages.items(), key=lambda kv: kv[1]), ("end", ended)]
                timings = {"stage_seconds": {name: round(marks[i + 1][1] - at, 3)
                                             for i, (name, at) in enumerate(marks[:-1])},
                           "split_seconds": {name: round(value, 3) for name, value in spent.items()}}
                results.put((report, began, ended, timings))
            finally:
                wh.close()
    except BaseException as exc:  # raised again in the parent
        results.put(f"{type(exc).__name__}: {exc}")
    finally:
        ready.set()
        done.set()


def child_result(child: Any, results: Any, timeout: float) -> Any:
    """What `vacuum_in_child` put on `results`; RuntimeError when the child ended without putting anything (one that
    died starting, e.g. unable to unpickle its target) as soon as it is gone, not after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return results.get(timeout=1.0)
        except queue.Empty:
            if not child.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the vacuum process ended (exit code {child.exitcode}) without a result, or gave "
                                   f"none within {timeout:.0f} s") from None


# -- the measurements ---------------------------------------------------------------------------------
def _visible(wh: Warehouse, table: str, csn: int) -> Callable[[], float]:
    catalog = wh.runtime.catalog
    with catalog.read() as conn:
        table_id = table_registry.get(conn, table).id

    def lookup() -> float:
        start = time.perf_counter()
        with catalog.read() as conn:
            part_records.visible_parts(conn, table_id, None, csn)
        return time.perf_counter() - start

    return lookup


def measure(sim: YearSim, base: Path, reps: int, quick: bool = False,
            fresh_catalog: str | None = None) -> list[dict[str, Any]]:
    """The issue's measurements on the simulation as it stands (after its last night); the fresh catalog the
    aged one's commit is compared with is `fresh_catalog` (None: a SQLite file under `base`)."""
    wh, table = sim.wh, sim.tables[0]
    rows: list[dict[str, Any]] = []
    latest = wh.readable_csn()
    horizon = wh.retention(table)["horizon"]
    retained = [c for c in sim.committed.csns if c >= horizon] or [latest]
    mid = retained[len(retained) // 2]
    early = retained[0]
    with wh.runtime.catalog.read() as conn:
        counts = {name: len(part_records.visible_parts(conn, table_registry.get(conn, table).id, None, c))
                  for name, c in (("latest", latest), ("mid", mid), ("early", early))}
    looks = _bench.interleave({name: _visible(wh, table, c) for name, c in
                               (("latest", latest), ("mid", mid), ("early", early))}, reps=reps)
    for name in ("latest", "mid", "early"):
        rows.append(_bench.result(ROW, "visible-part lookup of one table", f"{name} retained snapshot",
                                  looks[name], ratio=_bench.ratio(looks[name], looks["latest"]),
                                  ratio_of="/ latest", note=f"{counts[name]} visible parts"))

    # a read N commits back vs the latest
    back = retained[max(0, len(retained) - 1 - LOOKBACK)] if retained else latest
    depth = len([c for c in retained if c > back])
    reads = _bench.interleave({"back": lambda: _bench.timed(lambda: wh.read(table, csn=back)),
                               "latest": lambda: _bench.timed(lambda: wh.read(table))}, reps=reps)
    rows.append(_bench.result(ROW, "read of one table", f"{depth} commits back", reads["back"],
                              ratio=_bench.ratio(reads["back"], reads["latest"]), ratio_of="/ latest",
                              target=None if quick else AGED_RATIO_TARGET,
                              note="the latest reads one compacted part per partition; an older snapshot also "
                                   "that day's parts, one per run and partition"))
    rows.append(_bench.result(ROW, "read of one table", "latest", reads["latest"]))

    # a 3-table commit: the aged catalog vs a fresh one
    fresh = YearSim(base / "fresh", replace(sim.w, days=0), fresh_catalog)
    try:
        def commit_on(s: YearSim) -> Callable[[], float]:
            def once() -> float:
                with s.ticking():
                    start = time.perf_counter()
                    s.dag_run("commit")
                    return time.perf_counter() - start
            return once

        commits = _bench.interleave({"aged": commit_on(sim), "fresh": commit_on(fresh)}, reps=reps)
    finally:
        fresh.close()
    label = f"commit of a 3-table transaction ({sim.w.tables} x {sim.w.partitions} parts)"
    rows.append(_bench.result(ROW, label, f"catalog after day {sim.day}", commits["aged"],
                              ratio=_bench.ratio(commits["aged"], commits["fresh"]), ratio_of="aged / fresh",
                              target=AGED_RATIO_TARGET, gate=AGED_RATIO_GATE))
    rows.append(_bench.result(ROW, label, "fresh catalog", commits["fresh"]))
    return rows


def vacuum_rows(sim: YearSim) -> list[dict[str, Any]]:
    """The last night's vacuum (run under load: YearSim.run_day) and the commits while it ran vs without."""
    night = sim.nights[-1]
    during, without = sim.load["during"], sim.load["without"]
    p99 = {"during": _p99(during) if during else 0.0, "without": _p99(without)}
    ratio = p99["during"] / p99["without"] if during else None  # None: no commit overlapped it
    return [
        _bench.result(ROW, "vacuum of one simulated day", "airflow_txn", [night.vacuum_seconds],
                      target=VACUUM_TARGET_SECONDS * 1000, target_on="median_ms",
                      note=f"night {night.day}: {night.parts_vacuumed} parts deleted in batches of {vacuum.BATCH} "
                           f"per catalog transaction, {night.rows_purged} history rows purged, in another process "
                           "while DAG runs kept committing"),
        _bench.result(ROW, "commit while vacuum runs", "while vacuum runs", during,
                      ratio=ratio, ratio_of="p99 / p99 without", target=P99_RATIO_TARGET, gate=P99_RATIO_GATE,
                      note=f"p99 {p99['during'] * 1000:.1f} ms over the {len(during)} commits that overlapped "
                           "the vacuum (run in another process)"),
        _bench.result(ROW, "commit while vacuum runs", "without vacuum", without,
                      note=f"p99 {p99['without'] * 1000:.1f} ms over {len(without)} commits (before and after it)"),
    ]


def _p99(seconds: list[float]) -> float:
    ordered = sorted(seconds)
    return ordered[max(0, -(-99 * len(ordered) // 100) - 1)]


# -- the row --------------------------------------------------------------------------------------------
def simulate(base: Path, w: Workload, progress: Callable[[Night], None] | None = None,
             catalog: str | None = None, maintenance: Callable[[], None] | None = None) -> YearSim:
    """Run `w.days` simulated days (and nights), on `catalog` (None: a SQLite file under `base`)."""
    sim = YearSim(base, w, catalog, maintenance)
    for _ in range(w.days):
        night = sim.run_day()
        if progress is not None:
            progress(night)
    return sim


def full_report(sim: YearSim, reps: int, under_load: int, progress: Callable[[Night], None] | None = None,
                quick: bool = False, fresh_catalog: str | None = None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """At the stop day: the report (summary), the measurements on the catalog as it stands, then ONE more
    simulated day whose night's vacuum runs while DAG runs keep committing (vacuum_rows), then the bounds
    over every night and the read-back of retained snapshots (verify)."""
    report = summary(sim)
    rows = measure(sim, sim.base.parent, reps, quick, fresh_catalog)
    night = sim.run_day(under_load)
    if progress is not None:
        progress(night)
    rows = vacuum_rows(sim) + rows
    report["bounds"] = sim.bounds()
    report["nights"] = [asdict(n) for n in sim.nights]
    report["verified"] = sim.verify()
    return report, rows


def summary(sim: YearSim) -> dict[str, Any]:
    """The report at the stop day: the workload, every night, the bounds and the final catalog by family."""
    final = sim.catalog_rows()
    dialect = sim.wh.runtime.catalog.dialect
    return {
        "workload": asdict(sim.w), "parts_per_day": sim.w.parts_per_day, "days": sim.day,
        "catalog": "SQLite" if dialect == "sqlite" else "PostgreSQL" if dialect == "postgresql" else dialect,
        "upkeep": UPKEEP if sim.maintenance is not None else None,
        "nights": [asdict(n) for n in sim.nights],
        "families": {"parts": asdict(final["parts"]), "history_rows": final["history"], "bytes": final["bytes"],
                     "tables": {name: {"rows": s.rows, "bytes": s.bytes} for name, s in final["sizes"].items()}},
        "bounds": sim.bounds(),
    }


def run(quick: bool) -> list[dict[str, Any]]:
    w = QUICK if quick else FULL
    with _bench.scratch("b16-") as base:
        sim = simulate(base / "sim", replace(w, days=w.days - 1), None if quick else _print_night)
        try:
            report, rows = full_report(sim, reps=5 if quick else 25, under_load=5 if quick else 50,
                                       progress=None if quick else _print_night, quick=quick)
        finally:
            sim.close()
    bounds = report["bounds"]
    if not (bounds["live_parts_ok"] and bounds["history_rows_ok"]):
        raise AssertionError(f"the catalog did not stay bounded: {bounds}")
    if not quick:
        out = REPO / "docs" / "benchmarks" / "b16_year.json"
        out.write_text(json.dumps(report, indent=1) + "\n")
        plot(report, REPO / "docs" / "benchmarks" / "b16_rows_per_day.png")
    return _with_series(rows, report)


def _with_series(rows: list[dict[str, Any]], report: dict[str, Any]) -> list[dict[str, Any]]:
    """Per-night series (every 7th night at most 60 values) hung on the rows they explain, and the stop day's
    catalog in the first row's note."""
    nights = report["nights"]
    step = max(1, len(nights) // 52)
    picked = nights[step - 1::step]
    fam = report["families"]
    kib = {k: "?" if v is None else f"{v / 1024:,.0f}" for k, v in fam["bytes"].items()}
    rows[0]["note"] = (f"{rows[0]['note']}; after night {report['days']}: part rows {fam['parts']['live']} live, "
                       f"{fam['parts']['removed']} removed, {fam['parts']['rolled_back']} rolled back; "
                       f"history rows {fam['history_rows']}; catalog KiB: parts {kib['parts']}, history "
                       f"{kib['history']}, other {kib['other']}, total {kib['total']}")
    where = f"after nights {picked[0]['day']}..{picked[-1]['day']} (every {step})" if picked else ""
    series = [("vacuum seconds " + where, [n["vacuum_seconds"] for n in picked]),
              ("live part rows after compaction " + where, [n["compacted_live_parts"] for n in picked]),
              ("history rows " + where, [n["history_rows"] for n in picked]),
              ("catalog KiB " + where, [round((n["catalog_bytes"]["total"] or 0) / 1024) for n in picked])]
    for row, (label, values) in zip(rows, series, strict=False):
        row["series"] = {"label": label, "values": values}
    return rows


def plot(report: dict[str, Any], out: Path) -> bool:
    """Rows per night (live parts, all part rows, history rows) and catalog MiB, drawn with matplotlib (the
    `bench` extra); False, and nothing drawn, when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    nights = report["nights"]
    days = [n["day"] for n in nights]
    fig, (rows_ax, bytes_ax) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    rows_ax.plot(days, [n["peak_parts"] for n in nights], label="part rows before the night's maintenance")
    rows_ax.plot(days, [n["live_parts"] + n["removed_parts"] + n["rolled_back_parts"] for n in nights],
                 label="part rows after it")
    rows_ax.plot(days, [n["compacted_live_parts"] for n in nights], label="live part rows after it")
    rows_ax.plot(days, [n["history_rows"] for n in nights], label="history rows after it")
    rows_ax.set_ylabel("catalog rows")
    rows_ax.legend(fontsize="small")
    w = report["workload"]
    catalog = report.get("catalog", "SQLite")
    rows_ax.set_title(f"{w['runs_per_day']} runs/day x {w['tables']} tables x {w['partitions']} partitions, "
                      f"{w['retention_days']:g}-day retention" + ("" if catalog == "SQLite" else f"\n{catalog}")
                      + (f", {report['upkeep']}" if report.get("upkeep") else ""), fontsize="medium")
    bytes_ax.plot(days, [(n["catalog_bytes"]["total"] or 0) / 2**20 for n in nights], label="catalog")
    bytes_ax.plot(days, [(n["catalog_bytes"]["parts"] or 0) / 2**20 for n in nights], label="txn_parts")
    bytes_ax.plot(days, [(n["catalog_bytes"]["history"] or 0) / 2**20 for n in nights], label="history tables")
    bytes_ax.set_ylabel(f"MiB ({catalog} pages)")
    bytes_ax.set_xlabel("simulated day")
    bytes_ax.legend(fontsize="small")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return True


def _print_night(n: Night) -> None:
    print(f"   day {n.day}: csn {n.csn}, parts {n.peak_parts} -> {n.live_parts} live + {n.removed_parts} removed + "
          f"{n.rolled_back_parts} rolled back, history {n.peak_history} -> {n.history_rows}, vacuum "
          f"{n.vacuum_seconds:.2f} s, day took {n.run_seconds:.1f} s", flush=True)


NOTES = """\
**The year (2026-12-06, the table above).** 364 simulated days of 25 runs a day x 3 tables x 24 partitions (1,800
parts a day, 8,924 commits, 454 retries, 188 rollbacks, 13 dead runs recovered, 26,280 merges) and one measured
day, in 30 minutes. What the catalog holds after each night, drawn from the run's report (matplotlib):

![Catalog rows and bytes after each simulated night of the year](benchmarks/b16_rows_per_day.png)

Flat from night 8 (when the first day leaves the 7-day window) to night 364: 72 live part rows (bound 720), 12,384
to 13,176 part rows, 1,919 to 1,963 history rows, 5.5 to 5.9 MiB of catalog; the last point is the measured day,
whose runs kept committing after its compaction. Every target of issue 34 this row carries is met: a day's vacuum
0.88 s (<= 60 s), commit p99 during it 1.01 x (<= 2 x), a commit on the year-old catalog 1.15 x a fresh one's
(<= 1.2 x), a read as far back as the window keeps (173 commits) 0.99 x the latest (<= 1.2 x). The mid-window lookup
(2.9 ms) returns a day's 336 unmerged parts against 24 at the latest and oldest (0.38 ms each): its cost is the
parts the snapshot shows, not the history (B3: under 1 ms at 10 million parts on SQLite and 100 million on
PostgreSQL). The aged /
fresh commit ratio's target was written 1.5 in this run's code and the read had none: both carry issue 34's 1.2
since, and results.json was given those targets afterwards (the figures are the run's, unchanged). Afterwards
all 36 sampled retained snapshots read back exactly what was committed up to them and a read below the horizon
refused.

**30 days on PostgreSQL (2026-12-06; `--pg`).** The year's workload for 30 days on a PostgreSQL catalog, every
target met (vacuum of a day 2.6 s, commit p99 during it 1.1-1.8 x, aged / fresh commit 0.94-1.04 x, a read 174
commits back 0.94-0.98 x) and the rows flat from night 8 as on SQLite. With the test server's autovacuum off (this
machine's setting) and nothing else vacuuming, the catalog's bytes grew 28 x in 28 nights at flat rows (dead tuples):
the simulation now runs PostgreSQL's VACUUM each night where autovacuum is off, and the catalog stays at 9.6 MB
from night 10. [The year simulator's page](benchmarks/year.md#30-days-on-postgresql) has both runs' plots.

**A year on PostgreSQL (2026-12-07; `--pg`, 8 partitions a table to fit a session: 600 parts a day).** 365 nights,
26 minutes: rows flat from night 8 (24 live part rows, 4,200-4,392 part rows, 1,211-1,243 history rows), the
catalog 3.6 MiB after night 8 and 4.07-4.17 MiB from night 30 to night 364 (a 2.5 % creep at flat rows: B-tree pages
VACUUM does not merge), a simulated day 4.2 s without slowdown. Every target met at the stop day: a day's vacuum
0.40 s, commit p99 during it 1.02 x, the year-old catalog's commit 1.17 x a fresh one's, a read 171 commits back
0.95 x the latest; 36 retained snapshots read back exact.
[The year simulator's page](benchmarks/year.md#a-year-on-postgresql). At the full 24 partitions (this row's
workload) the year ran on PostgreSQL too (57 minutes, 2026-12-07): rows flat from night 8 (72 live, 12,480-13,512
part rows, 1,919-1,963 history rows, the catalog 9.7-10.1 MiB from night 20), a night's vacuum 1.33 s (median).
Every target met at the stop day: a day's vacuum 2.08 s, commits during it 1.05 x, the year-old catalog's 3 x 24-part
commit 1.07 x a fresh one's, a read 173 commits back 1.00 x the latest; 36 retained snapshots read back exact. Its
simulated day went from 5.6 s (nights 1-90) to 9-10 s (nights 271-364) at flat rows and bytes: the machine slowed
that day (the first 15 nights on a fresh catalog, run again after, took 10.4-13.3 s where they had taken 4.3-6.4:
[the year page](benchmarks/year.md#a-year-at-full-volume-on-postgresql)).

**A day's vacuum at 100 million parts (2026-12-07; `benchmarks/b16_vacuum_at_scale.py`, not a row of run.py).**
B3's synthetic history on 3 tables bulk-loaded into a PostgreSQL catalog (97,773,666 part rows, 36.9 GB), cut as
nightly vacuums would have left it, with two nights of 720,000 parts each (the reference day) below the
horizons the commit records place; the engine's vacuum in another process. **Night 1 alone 38.8 s, night 2 while
3-table commits ran 45.1 s** (target 60 s: met), **commit p99 during it 1.64 x** without (target 2 x: met), every
sampled retained snapshot unchanged and a read below the horizon refused. The same night took 119 s before this
session's vacuum changes (batches that each re-read the table's garbage, an empty last batch scanning the catalog,
the orphan pass reading every part path; the year simulator's page,
[A day's vacuum at 100 million parts](benchmarks/year.md#a-days-vacuum-at-100-million-parts-postgresql), has
each, and what is left: on a real root the orphan pass still reads every part row of each table).

Scale: `--quick` simulates a week of 40 runs a day x 3 tables x 4 partitions with a 2-day retention (so the
week reaches the steady state); the full row a year of 25 runs a day x 3 tables x 24 partitions with the
reference's 7-day retention. The reference (10,000 runs a day, 720,000 parts a day) is out of reach of this
2-core machine (a simulated year of it would take weeks); [the year simulator's page](benchmarks/year.md) has
the year's figures, a 30-day run at 100 runs a day, the projection to the reference workload and what it found
(merge records, `txn_compactions`, were never purged then: vacuum purges them now).
[DEPLOYMENT.md](DEPLOYMENT.md#sizing-the-catalog) turns it into sizing guidance.
Issue 34's vacuum targets: one simulated day of history purged in <= 60 s, and commit p99 while that vacuum runs
(in another process, on the simulation's clock) <= 2 x commit p99 without it. Vacuum deletes garbage parts in
batches (`vacuum.BATCH` per catalog transaction); the rest of its time is storage's, one delete per part file.
"""


UPKEEP = "VACUUM (ANALYZE) nightly"
"""What the report and plot say the database's upkeep was when the simulation ran it (autovacuum off)."""


@contextmanager
def _catalogs(admin_url: str | None) -> Iterator[tuple[str | None, str | None, Callable[[], None] | None]]:
    """(the simulation's catalog, the fresh one's, the database's upkeep): two PostgreSQL databases made on the
    server of `admin_url` and dropped afterwards, or (None, None, None): SQLite files under the run's directory. On
    a server whose autovacuum is off (a test server's setting) the upkeep is a VACUUM (ANALYZE) of the simulation's
    database after each night, standing in for what autovacuum does in production; else None."""
    if admin_url is None:
        yield None, None, None
        return
    from sqlalchemy import create_engine, text

    names = [f"airflow_txn_b16_{os.getpid()}", f"airflow_txn_b16_{os.getpid()}_fresh"]
    with _bench.pg_databases(admin_url, *names) as (catalog, fresh), ExitStack() as stack:
        maintenance = None
        if _bench.pg_execute(admin_url, "SHOW autovacuum") == ["off"]:
            print(f"   autovacuum is off on {admin_url.rsplit('/', 1)[0]}: a VACUUM (ANALYZE) of the catalog stands "
                  "in for it each night", flush=True)
            upkeep = create_engine(catalog, isolation_level="AUTOCOMMIT")
            stack.callback(upkeep.dispose)

            def maintenance() -> None:
                with upkeep.connect() as conn:
                    conn.execute(text("VACUUM (ANALYZE)"))

        yield catalog, fresh, maintenance


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs-per-day", type=int, default=QUICK.runs_per_day)
    parser.add_argument("--tables", type=int, default=QUICK.tables)
    parser.add_argument("--partitions", type=int, default=QUICK.partitions)
    parser.add_argument("--days", type=int, default=QUICK.days)
    parser.add_argument("--retention-days", type=float, default=QUICK.retention_days)
    parser.add_argument("--measure", action="store_true",
                        help="take the measurements at the stop day (the last day runs with the vacuum under load)")
    parser.add_argument("--json", default=None, help="write the report here")
    parser.add_argument("--plot", default=None, help="draw rows per day here (needs matplotlib)")
    parser.add_argument("--pg", default=None, metavar="ADMIN_URL",
                        help="a PostgreSQL catalog: the server's admin URL (database postgres); the simulation and "
                             "the fresh catalog it is compared with get databases of their own, dropped at the end")
    args = parser.parse_args(argv)
    w = replace(QUICK, runs_per_day=args.runs_per_day, tables=args.tables, partitions=args.partitions,
                days=args.days, retention_days=args.retention_days)
    with _bench.scratch("b16-") as base, _catalogs(args.pg) as (catalog, fresh, upkeep):
        sim = simulate(base / "sim", replace(w, days=w.days - 1) if args.measure else w, _print_night, catalog,
                       upkeep)
        try:
            if args.measure:
                report, rows = full_report(sim, reps=9, under_load=20, progress=_print_night, fresh_catalog=fresh)
                report["measurements"] = rows
                for r in rows:
                    ratio = "" if r["ratio"] is None else f", ratio {r['ratio']:.3f}"
                    print(f"   {r['measure']} | {r['contender']}: median {r['median_ms']:.2f} ms, "
                          f"p95 {r['p95_ms']:.2f} ms{ratio}")
            else:
                report = summary(sim)
                report["verified"] = sim.verify()
        finally:
            sim.close()
    print(json.dumps({"bounds": report["bounds"], "verified": report["verified"],
                      "families": {k: v for k, v in report["families"].items() if k != "tables"}}, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
    if args.plot and not plot(report, Path(args.plot)):
        print("matplotlib is not installed: no plot (pip install matplotlib)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

