"""Small builders shared by the tests: schemas, tables of rows, and storage listings."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.fs as pafs
from sqlalchemy import Connection, create_engine, text

from airflow_txn import Warehouse
from airflow_txn.catalog import clock, part_records, table_registry
from airflow_txn.core import recovery
from airflow_txn.core.ownership import MARKER
from airflow_txn.storage.location import normalize_root, resolve
from airflow_txn.storage.root import SIDECAR, is_plain_part, part_file_paths, write_dir_of

EVENTS = pa.schema([("id", pa.int64()), ("day", pa.string()), ("value", pa.float64())])
ACCOUNTS = pa.schema([("id", pa.int64()), ("balance", pa.int64())])


def events(ids: list[int], day: str = "2024-01-01", value: float = 1.0) -> pa.Table:
    return pa.table({"id": ids, "day": [day] * len(ids), "value": [value] * len(ids)}, schema=EVENTS)


def accounts(rows: dict[int, int]) -> pa.Table:
    return pa.table({"id": list(rows), "balance": list(rows.values())}, schema=ACCOUNTS)


def ids(table: pa.Table) -> list[int]:
    return sorted(table.column("id").to_pylist())


def storage_files(root: Path | str) -> set[str]:
    """Every file below the storage root (a local path, or an s3:// URI: its objects), relative to it, but
    the root's ownership marker (core/ownership.MARKER: there from the first write on)."""
    if isinstance(root, str) and "://" in root:
        where = resolve(normalize_root(root), {})
        listed = where.filesystem.get_file_info(pafs.FileSelector(where.base, recursive=True, allow_not_found=True))
        found = {info.path[len(where.base) + 1:] for info in listed if info.type == pafs.FileType.File}
    else:
        found = set()
        for current, _dirs, files in os.walk(root):
            for name in files:
                found.add(str(Path(current, name).relative_to(root)))
    return found - {MARKER}


def _object_root(root: Path | str) -> tuple[pafs.FileSystem, str] | None:
    """(filesystem, base) of an s3:// root; None for a local one."""
    if isinstance(root, str) and "://" in root:
        where = resolve(normalize_root(root), {})
        return where.filesystem, where.base
    return None


def stored_stats(root: Path | str) -> dict[str, tuple[int, int]]:
    """Every file below the root (local or s3://) with its size and modification time in ns."""
    remote = _object_root(root)
    if remote is None:
        return {name: ((st := (Path(root) / name).stat()).st_size, st.st_mtime_ns) for name in storage_files(root)}
    fs, base = remote
    listed = fs.get_file_info(pafs.FileSelector(base, recursive=True, allow_not_found=True))
    return {info.path[len(base) + 1:]: (int(info.size or 0), int(info.mtime_ns or 0))
            for info in listed if info.type == pafs.FileType.File}


def stored_exists(root: Path | str, relative: str) -> bool:
    """Whether a file `relative` to the root (local or s3://) exists."""
    remote = _object_root(root)
    if remote is None:
        return (Path(root) / relative).is_file()
    fs, base = remote
    return bool(fs.get_file_info(f"{base}/{relative}").type == pafs.FileType.File)


def stored_size(root: Path | str, relative: str) -> int:
    """The size of a file `relative` to the root (local or s3://)."""
    return stored_stats(root)[relative][0] if _object_root(root) else (Path(root) / relative).stat().st_size


def partition_dirs(wh: Warehouse, directory: str) -> set[str]:
    """What lies directly below a table directory: on a local root its entries (an emptied directory
    included); on an object store the prefixes below which some object lies. (pyarrow leaves a zero-byte
    "directory" marker object where a delete emptied a prefix: docs/DESIGN.md, "Storage on object stores".)"""
    storage = wh.runtime.storage
    if storage.local is not None:
        return {name for name, _is_file, _mtime in storage.root_entries(directory)}
    base = storage.path(directory)
    listed = storage.fs.get_file_info(pafs.FileSelector(base, recursive=True, allow_not_found=True))
    return {info.path[len(base) + 1:].split("/")[0] for info in listed if info.type == pafs.FileType.File}


def visible_part_files(wh: Warehouse) -> set[str]:
    """The files of every part visible at the watermark, relative to the root (an old-layout or Spark part's
    write dir sidecar included): after recovery and vacuum nothing else may stay."""
    out: set[str] = set()
    with wh.runtime.catalog.read() as conn:
        for info in table_registry.all_tables(conn):
            for part in part_records.visible_parts(conn, info.id, None, wh.readable_csn()):
                out |= {f"{info.directory}/{relative}" for relative in part_file_paths(part.path, part.files)}
                if not is_plain_part(part.path):
                    out.add(f"{info.directory}/{write_dir_of(part.path)}/{SIDECAR}")
    return out


def unregistered_parts(wh: Warehouse, table: str) -> dict[str, dict[str, object]]:
    """The part files and write dirs below `table` no part row names: {path relative to the table: the
    writer's tags from its footer or sidecar ({} if unreadable)}."""
    with wh.runtime.catalog.read() as conn:
        info = table_registry.get(conn, table)
        registered = recovery.registered_units(conn, info.id)
    storage = wh.runtime.storage
    return {entry.relative: storage.writer_tags(entry) or {} for entry in storage.stored_parts(info.directory)
            if entry.relative not in registered}


def part_writer_tags(wh: Warehouse, table: str, part_path: str) -> dict[str, object]:
    """What names the writer of a registered part: a plain file's footer, a write dir's sidecar ({} if unreadable)."""
    with wh.runtime.catalog.read() as conn:
        directory = table_registry.get(conn, table).directory
    storage = wh.runtime.storage
    if is_plain_part(part_path):
        return storage.read_footer_tags(storage.path(directory, part_path)) or {}
    return storage.read_sidecar(storage.path(directory, write_dir_of(part_path))) or {}


def make_tables(wh: Warehouse) -> None:
    wh.create_table("sales.events", EVENTS, partition_by=["day"])
    wh.create_table("sales.accounts", ACCOUNTS)


SPARK_TEST_CONF = {
    "spark.master": "local[2]",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
}
"""The small local SparkSession every Spark-using test runs on (loopback only, no UI)."""
SPARK_TEST_JVM = {"spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"}
"""Added by the tests' Spark sessions and Spark Connect servers (not the benchmarks', which keep Spark's defaults):
their JVM compiles with the quick JIT only and collects with one GC thread, as the ZooKeeper test servers do. A
test's jobs are small and short, and on a 2-core machine the optimizing compiler's and the parallel GC's threads
cost about half the JVM's CPU there (measured: 121 s -> 64 s of JVM CPU for the same 12 conformance MERGE tests)."""


REPO = Path(__file__).resolve().parents[1]


def import_error_without(package: str, setup: str, use: str) -> str:
    """In a fresh interpreter: run `setup` (which may assert what it loaded), make `package` unimportable,
    then run the statement `use`; returns what its ImportError said (empty if none was raised)."""
    code = (f"import sys\n{setup}\nsys.modules[{package!r}] = None\n"
            f"try:\n    {use}\nexcept ImportError as exc:\n    print(exc)\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                            timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    return result.stdout


def commit_writes(wh: Warehouse, *writes: tuple[str, str, Any]) -> int:
    """One transaction making `writes` ((method, table, data) each: "append", "sales.events", rows); its CSN."""
    t = wh.begin()
    for op, table, data in writes:
        getattr(t, op)(table, data)
    return t.commit()


# -- waiting on a condition, never for a fixed time (tests/test_fixed_sleeps.py counts the fixed sleeps) ------
W = TypeVar("W")

WAIT_SECONDS = 60.0
"""How long a test waits for something that normally takes well under a second: generous, so a loaded machine
(two cores shared by several suites) slows a test down but never fails it."""


def wait_until(predicate: Callable[[], W], timeout: float = WAIT_SECONDS, what: str = "the condition",
               interval: float = 0.02, on_timeout: Callable[[], str] = lambda: "") -> W:
    """Poll `predicate` until it returns something truthy, and return that; AssertionError naming `what` (and what
    `on_timeout` adds, e.g. a server's log) once `timeout` seconds passed without (the predicate is looked at once
    more at the deadline)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}{on_timeout()}")
        time.sleep(interval)


def catalog_time(wh: Warehouse) -> float:
    """The catalog's clock now (leases are set and judged by it: catalog/clock.py)."""
    with wh.runtime.catalog.read() as conn:
        return clock.now(conn)


def wait_past(wh: Warehouse, moment: float, what: str = "the catalog's clock to pass a moment") -> None:
    """Until the catalog's clock is past `moment` (epoch seconds): time that must pass on the clock that judges
    leases, which no test can fast-forward (catalog/clock.FastForward moves recorded times only)."""
    wait_until(lambda: catalog_time(wh) > moment, timeout=max(0.0, moment - time.time()) + WAIT_SECONDS, what=what)


def outlive_lease(wh: Warehouse, tid: str) -> None:
    """Until the lease of transaction `tid` has run out by the catalog's clock (nobody renews it meanwhile)."""
    wait_past(wh, float(wh.transaction_info(tid)["lease_deadline"]), what=f"the lease of {tid} to run out")


def blocked_by(url: str, pid: int) -> int:
    """How many PostgreSQL sessions wait on a lock that the session with backend `pid` holds."""
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            waiting = text("SELECT count(*) FROM pg_stat_activity WHERE :pid = ANY(pg_blocking_pids(pid))")
            return int(conn.execute(waiting, {"pid": pid}).scalar_one())
    finally:
        engine.dispose()


def backend_pid(conn: Connection) -> int:
    """The PostgreSQL backend of a catalog connection (to see who waits on its locks: blocked_by)."""
    return int(conn.execute(text("SELECT pg_backend_pid()")).scalar_one())
