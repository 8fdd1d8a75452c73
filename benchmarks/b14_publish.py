"""B14: publishing (docs/DESIGN.md D26, D29): what it costs a commit, and how long until other engines see it.

Workload: B1's transaction (1,000 rows appended to each of 3 tables, one statement, SQLite catalog), on three
warehouses that differ only in `publish=`: off, "iceberg" (pyiceberg's SQL catalog in the warehouse's own
catalog database) and "iceberg,delta". Each repetition runs the three in turn (interleaved):

  commit cost   begin to the end of commit, as B1 measures it. Publishing runs after the commit on the
                warehouse's background thread (D26: never on the commit's path), so the clock stops when
                `commit()` returns; before the next contender starts, the repetition waits (off the clock)
                until this commit is published and the publisher is idle, so no contender is timed while
                another's publisher runs.
  publish lag   from `commit()` returning to every one of the 3 tables showing the commit as published, read
                the way an outside reader finds it: the Iceberg table's `airflow-txn.csn` property through a
                catalog of its own (and the Delta log's `airflow-txn` transaction version), polled; a poll
                costs 2-5 ms, the lag's resolution.
  back to back  the same transaction with publishing on, committed without waiting for the publisher: its
                thread competes for the GIL and the two cores with the next commit (reported, no target).

Targets: commit cost with publishing on <= 1.05x off (publishing costs a commit at most 5 %, issue 33); the
lag is reported (median, p95), with no target.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from airflow_txn import Warehouse
from benchmarks import _bench
from benchmarks.b1_commit_latency import make_data

ROW = "B14"
TABLES = ("b14.customers", "b14.orders", "b14.items")
TARGET_COST = 1.05
OFF = "airflow_txn, publishing off"
ICEBERG = "airflow_txn, publish=iceberg"
BOTH = "airflow_txn, publish=iceberg,delta"
LAG_TIMEOUT = 60.0
POLL = 0.002


def run(quick: bool) -> list[dict[str, Any]]:
    reps = 10 if quick else 40
    if (why := _bench.missing("pyiceberg", "iceberg")) is not None:
        return [_bench.not_run(ROW, "commit cost of publishing", ICEBERG, why, target=TARGET_COST)]
    delta = _bench.missing("deltalake", "delta")
    data = make_data(1000)
    lags: dict[str, list[float]] = {}
    with _bench.scratch("b14-") as base:
        warehouses = {OFF: _warehouse(base / "off", None), ICEBERG: _warehouse(base / "iceberg", "iceberg")}
        if delta is None:
            warehouses[BOTH] = _warehouse(base / "both", "iceberg,delta")
        try:
            for wh in warehouses.values():
                for name in TABLES:
                    wh.create_table(name, data.schema)
            watchers = {name: _Watcher(wh) for name, wh in warehouses.items() if name != OFF}
            contenders = {name: _commit(wh, data, watchers.get(name), lags.setdefault(name, []))
                          for name, wh in warehouses.items()}
            samples = _bench.interleave(contenders, reps=reps, warmup=2)
            back_to_back = _back_to_back(warehouses[ICEBERG], data, reps)
            watchers[ICEBERG].wait(warehouses[ICEBERG].readable_csn())
        finally:
            for wh in warehouses.values():
                wh.close()
    return _rows(samples, lags, back_to_back, delta)


def _warehouse(base: Path, publish: str | None) -> Warehouse:
    wh = Warehouse.open(catalog=f"sqlite:///{base / 'catalog.db'}", root=str(base / "warehouse"), oracle="sql",
                        publish=publish)
    wh.init()
    return wh


class _Watcher:
    """Reads what an outside engine sees: the published CSN of each table, through catalogs of its own."""

    def __init__(self, wh: Warehouse) -> None:
        from pyiceberg.catalog.sql import SqlCatalog

        own = wh.iceberg_catalog()
        self.iceberg = SqlCatalog(own.name, **dict(own.properties))
        self.delta_uris: list[str] = []
        if "delta" in wh.config.publish:
            self.delta_uris = [str(Path(wh.config.root) / name.replace(".", "/")) for name in TABLES]

    def published(self) -> int:
        """The lowest CSN published across the tables and formats (0: a table not published yet)."""
        from pyiceberg.exceptions import NoSuchTableError

        csns = []
        for name in TABLES:
            try:
                table = self.iceberg.load_table((name.split(".")[0], name.split(".")[1]))
            except NoSuchTableError:
                return 0
            csns.append(int(table.properties.get("airflow-txn.csn", "0")))
        for uri in self.delta_uris:
            from deltalake import DeltaTable
            from deltalake.exceptions import TableNotFoundError

            from airflow_txn.publish.delta import APP_ID

            try:
                csns.append(int(DeltaTable(uri).transaction_version(APP_ID) or 0))
            except TableNotFoundError:
                return 0
        return min(csns)

    def wait(self, csn: int) -> float:
        """Seconds until every table shows `csn` (or later) as published."""
        start = time.perf_counter()
        while self.published() < csn:
            if time.perf_counter() - start > LAG_TIMEOUT:
                raise TimeoutError(f"csn {csn} not published within {LAG_TIMEOUT:.0f} s")
            time.sleep(POLL)
        return time.perf_counter() - start


def _commit(wh: Warehouse, data: Any, watcher: _Watcher | None, lags: list[float]) -> Callable[[], float]:
    def one() -> float:
        start = time.perf_counter()
        t = wh.begin(label="b14")
        t.append_many({name: data for name in TABLES})
        csn = t.commit()
        seconds = time.perf_counter() - start
        if watcher is not None:
            lags.append(watcher.wait(csn))
            assert wh.publisher.wait_idle(LAG_TIMEOUT)  # the run's tail (tags, expiry) ends off the clock too
        return seconds

    return one


def _back_to_back(wh: Warehouse, data: Any, reps: int) -> list[float]:
    seconds = []
    for _ in range(reps):
        start = time.perf_counter()
        with wh.begin(label="b14-b2b") as t:
            t.append_many({name: data for name in TABLES})
        seconds.append(time.perf_counter() - start)
    return seconds


def _rows(samples: dict[str, list[float]], lags: dict[str, list[float]], back_to_back: list[float],
          delta: str | None) -> list[dict[str, Any]]:
    off = samples[OFF]
    cost = "commit: 3 tables x 1,000-row append, publishing on vs off"
    rows = [_bench.result(ROW, cost, OFF, off, note="B1's transaction")]
    for name in (ICEBERG, BOTH):
        if name not in samples:
            rows.append(_bench.not_run(ROW, cost, name, delta or "", target=TARGET_COST))
            continue
        rows.append(_bench.result(ROW, cost, name, samples[name], ratio=_bench.ratio(samples[name], off),
                                  ratio_of=f"this / {OFF}", target=TARGET_COST,
                                  note="the clock stops when commit() returns; publishing runs after, off the clock"))
    lag = "publish lag: commit() returned -> all 3 tables published"
    for name in (ICEBERG, BOTH):
        if name in samples:
            rows.append(_bench.result(ROW, lag, name, lags[name],
                                      note="an outside reader's view, polled every 2 ms (a poll costs 2-5 ms)"))
    rows.append(_bench.result(ROW, "commits back to back, publishing on (the publisher competes for the GIL)",
                              ICEBERG, back_to_back, ratio=_bench.ratio(back_to_back, off), ratio_of=f"this / {OFF}",
                              note="no wait between commits: the background thread runs during the next commit"))
    return rows


NOTES = """\
**First measured 2026-12-06 (issue 33).** With a commit timed alone (the previous commit's publishing finished
off the clock), publishing costs a commit nothing measurable: the commit only wakes the background thread
(`Warehouse._after_commit`, an `Event.set`). The lag until an outside reader sees all three tables is about
80 ms for Iceberg (pyiceberg: per table one snapshot commit against the SQL catalog, ~25 ms each, run one table
after the other) and about 100 ms with Delta too.

**Commits back to back in one process pay for it**: with no pause between commits, the publisher thread
runs pyiceberg (pure Python) while the next commit runs, and both share the GIL and two cores: the commit's
median rose about 3x in the first --quick run. In an Airflow deployment each task commits from a process of
its own and rarely twice in a row; a service committing in a tight loop should publish from another process
(`airflow-txn publish`, or `wh.publish()` on a schedule) and open its warehouse with publishing off.
"""
