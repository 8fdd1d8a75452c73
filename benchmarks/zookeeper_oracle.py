"""Group commit before/after: ZooKeeper oracle appends and whole commits, with and without group commit.

    .venv/bin/python benchmarks/zookeeper_oracle.py [--catalog URL] [--threads 8] [--appends 50] [--commits 10]

Starts its own standalone ZooKeeper (tests.harness.zookeeper, forceSync=yes: every write is
fsynced, as in production) and prints a Markdown table. Two measurements:
  appends   oracle.append() alone from N threads of one process: the ZooKeeper round trip that group
            commit shares (the commit point, nothing else)
  commits   whole transactions (begin, append one part, commit: prepare, record, mirror, apply) from
            N threads of one process, against the catalog given (SQLite file by default)
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa

from airflow_txn import Warehouse
from airflow_txn.oracle.base import LogEntry
from airflow_txn.oracle.zookeeper import ZooKeeperOracle
from tests.harness.zookeeper import standalone

SCHEMA = pa.schema([("id", pa.int64())])


def run_threads(threads: int, per_thread: int, op: Callable[[int, int], None]) -> tuple[float, list[float]]:
    """Run op(thread, i) per_thread times in each of `threads` threads; return (seconds, latencies ms)."""
    latencies: list[float] = []
    lock = threading.Lock()
    barrier = threading.Barrier(threads)

    def body(n: int) -> None:
        barrier.wait(timeout=60)
        for i in range(per_thread):
            start = time.perf_counter()
            op(n, i)
            with lock:
                latencies.append((time.perf_counter() - start) * 1000)

    workers = [threading.Thread(target=body, args=(n,)) for n in range(threads)]
    began = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=600)
    return time.perf_counter() - began, latencies


def row(what: str, group: bool, threads: int, seconds: float, latencies: list[float], batches: str) -> str:
    count = len(latencies)
    p50 = statistics.median(latencies)
    p95 = sorted(latencies)[int(0.95 * (count - 1))]
    return (f"| {what} | {'on' if group else 'off'} | {threads} | {count} | {count / seconds:,.0f} | "
            f"{p50:.1f} | {p95:.1f} | {batches} |")


def bench_appends(hosts: str, catalog: str, root: Path, threads: int, per_thread: int, group: bool) -> str:
    spec = f"zookeeper://{hosts}/bench_{uuid.uuid4().hex[:8]}?group_commit={int(group)}&segment_size=100000"
    wh = Warehouse.open(catalog=catalog, root=str(root), oracle=spec)
    wh.init()  # the oracle keeps the warehouse's id in the catalog, which opening alone does not create
    oracle = wh.runtime.oracle
    assert isinstance(oracle, ZooKeeperOracle)
    oracle.append(LogEntry(f"warmup-{uuid.uuid4().hex}", ("b.t",), time.time()))
    seconds, latencies = run_threads(
        threads, per_thread, lambda n, i: oracle.append(LogEntry(f"{n}-{i}-{uuid.uuid4().hex[:16]}", ("b.t",), 0.0))
    )
    batches = f"{oracle.group.records - 1} in {oracle.group.batches - 1}" if oracle.group else "1 per record"
    wh.close()
    return row("append (commit point only)", group, threads, seconds, latencies, batches)


def bench_commits(oracle: str, catalog: str, root: Path, threads: int, per_thread: int, group: bool) -> str:
    wh = Warehouse.open(catalog=catalog, root=str(root), oracle=oracle)
    table = f"b.t{uuid.uuid4().hex[:8]}"
    wh.create_table(table, SCHEMA)

    def commit(n: int, i: int) -> None:
        t = wh.begin()
        t.append(table, pa.table({"id": [n * 1_000_000 + i]}, schema=SCHEMA))
        t.commit()

    commit(999, 0)  # warm-up (connections, first segment)
    group_stats = getattr(wh.runtime.oracle, "group", None)
    before = (group_stats.records, group_stats.batches) if group_stats else (0, 0)
    seconds, latencies = run_threads(threads, per_thread, commit)
    if group_stats:
        batches = f"{group_stats.records - before[0]} in {group_stats.batches - before[1]}"
    else:
        batches = "-" if oracle == "sql" else "1 per record"
    wh.close()
    what = "whole commit, SQL oracle" if oracle == "sql" else "whole commit, ZooKeeper"
    return row(what, group, threads, seconds, latencies, batches)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--catalog", default=None, help="SQLAlchemy URL (default: a SQLite file in a temp dir)")
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--appends", type=int, default=50, help="appends per thread")
    parser.add_argument("--commits", type=int, default=10, help="commits per thread")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        catalog = args.catalog or f"sqlite:///{base / 'catalog.db'}"
        lines = ["| measurement | group commit | threads | operations | per second | p50 ms | p95 ms "
                 "| records in batches |", "|---|---|---|---|---|---|---|---|"]
        with standalone(base / "zk") as server:
            bench_appends(server.hosts, catalog, base / "wh", args.threads, 40, True)  # warm the server's JVM up
            for threads in (1, args.threads):
                for group in (False, True):
                    lines.append(bench_appends(server.hosts, catalog, base / "wh", threads, args.appends, group))
            for group in (False, True):
                spec = f"zookeeper://{server.hosts}/bench_{uuid.uuid4().hex[:8]}?group_commit={int(group)}"
                lines.append(bench_commits(spec, catalog, base / "wh", args.threads, args.commits, group))
        lines.append(bench_commits("sql", catalog, base / "wh", args.threads, args.commits, False))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
