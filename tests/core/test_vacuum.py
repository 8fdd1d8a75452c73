"""Invariant 8: vacuum deletes exactly the files no snapshot can see, orphans included, nothing visible."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pyarrow.compute as pc
import pytest

from airflow_txn import Transaction, Warehouse
from airflow_txn.catalog import table_registry
from airflow_txn.catalog.clock import FastForward, use_wall_clock
from airflow_txn.core.vacuum import ORPHAN_GRACE_SECONDS
from airflow_txn.errors import SnapshotTooOldError
from airflow_txn.storage.root import SIDECAR
from tests.helpers import (
    ACCOUNTS,
    accounts,
    events,
    ids,
    make_tables,
    outlive_lease,
    partition_dirs,
    storage_files,
    stored_exists,
)

HOUR = 3600.0


def _directory(wh: Warehouse, table: str) -> str:
    with wh.runtime.catalog.read() as conn:
        return table_registry.get(conn, table).directory


def _part_files(wh: Warehouse, root: Path | str, t: Transaction, role: str = "created") -> set[str]:
    """The Parquet files of a transaction's created (or removed) parts, relative to the root."""
    info = wh.transaction_info(t.tid)
    stored = storage_files(root)
    out = set()
    for part in info["parts"]:
        if part["role"] == role:
            path = f"{_directory(wh, part['table'])}/{part['path']}"
            out.update([path] if path in stored else
                       {f for f in stored if f.rpartition("/")[0] == path and f.endswith(".parquet")})
    assert out, f"transaction {t.tid} has no {role} part files"
    return out


def _exist(root: Path | str, paths: set[str]) -> bool:
    return all(stored_exists(root, p) for p in paths)


def _gone(root: Path | str, paths: set[str]) -> bool:
    return not (paths & storage_files(root))


def _partition_dirs(wh: Warehouse, directory: str) -> set[str]:
    return partition_dirs(wh, directory)


def _seed(wh: Warehouse, rows: dict[int, int]) -> tuple[Transaction, int]:
    wh.create_table("bank.accounts", ACCOUNTS, exist_ok=True)
    t = wh.begin()
    t.append("bank.accounts", accounts(rows))
    return t, t.commit()


def test_rolled_back_parts_files_are_deleted_by_vacuum(wh: Warehouse, root: Path | str) -> None:
    make_tables(wh)
    t = wh.begin()
    t.append("sales.events", events([1, 2], day="2024-01-01"))
    t.append("sales.events", events([3], day="2024-01-02"))
    t.append("sales.accounts", accounts({1: 1}))
    files = _part_files(wh, root, t)
    assert len(files) == 3
    t.rollback()
    assert _exist(root, files)  # rollback is metadata-only (invariant 5)
    result = wh.vacuum(retention_seconds=0)
    assert _gone(root, files)
    assert result["parts_removed"] == 3
    assert result["bytes_freed"] > 0
    assert storage_files(root) == set()
    assert wh.transaction_info(t.tid)["parts"] == []  # the catalog rows are gone too
    assert wh.vacuum(retention_seconds=0)["parts_removed"] == 0  # idempotent


def test_staged_parts_of_a_running_transaction_are_kept(wh: Warehouse, root: Path | str) -> None:
    make_tables(wh)
    t = wh.begin()
    t.append("sales.accounts", accounts({1: 1}))
    files = _part_files(wh, root, t)
    result = wh.vacuum(retention_seconds=0)
    assert result["parts_removed"] == 0 and result["orphan_dirs_removed"] == 0
    assert _exist(root, files)
    t.commit()
    assert ids(wh.read("sales.accounts")) == [1]


def test_overwritten_files_kept_while_an_older_snapshot_runs(wh: Warehouse, root: Path | str,
                                                              open_wh: Callable[[], Warehouse]) -> None:
    seed, c1 = _seed(wh, {1: 10, 2: 20})
    old_files = _part_files(wh, root, seed)
    reader = open_wh().begin(label="long reader")  # another process, snapshot c1
    with wh.begin() as t:
        t.overwrite("bank.accounts", accounts({3: 30}))
    c2 = wh.readable_csn()
    assert c2 > c1

    result = wh.vacuum(retention_seconds=0)
    assert result["horizon"] <= c1
    assert _exist(root, old_files)
    assert ids(reader.read("bank.accounts")) == [1, 2]
    assert ids(wh.read("bank.accounts", csn=c1)) == [1, 2]

    reader.commit()
    result = wh.vacuum(retention_seconds=0)
    assert result["horizon"] == c2
    assert result["parts_removed"] == 1
    assert _gone(root, old_files)
    assert ids(wh.read("bank.accounts")) == [3]


def test_large_retention_keeps_everything_readable(wh: Warehouse, root: Path | str) -> None:
    seed, c1 = _seed(wh, {1: 10, 2: 20})
    old_files = _part_files(wh, root, seed)
    with wh.begin() as t:
        t.overwrite("bank.accounts", accounts({3: 30}))
    with wh.begin() as t:
        t.delete("bank.accounts", pc.field("id") == 3)
    files_before = storage_files(root)
    result = wh.vacuum(retention_seconds=3600)
    assert result["parts_removed"] == 0
    assert result["horizon"] < c1
    assert storage_files(root) == files_before
    assert _exist(root, old_files)
    assert ids(wh.read("bank.accounts", csn=c1)) == [1, 2]
    assert ids(wh.read("bank.accounts", csn=c1 + 1)) == [3]
    assert ids(wh.read("bank.accounts")) == []


def test_retention_window_is_measured_in_time(wh: Warehouse, root: Path | str) -> None:
    with use_wall_clock(FastForward()) as wall:  # the times recorded with commits, and vacuum's now
        seed, c1 = _seed(wh, {1: 10})
        first_files = _part_files(wh, root, seed)
        t2 = wh.begin()
        t2.overwrite("bank.accounts", accounts({2: 20}))
        c2 = t2.commit()
        second_files = _part_files(wh, root, t2)
        wall.advance(2 * HOUR)
        with wh.begin() as t3:
            t3.overwrite("bank.accounts", accounts({3: 30}))
        # c2 was current an hour ago, c3 was not: the horizon is c2
        result = wh.vacuum(retention_seconds=HOUR)
        assert result["horizon"] == c2
        assert _gone(root, first_files)  # removed at c2 <= horizon: no snapshot in the window sees them
        assert _exist(root, second_files)  # removed at c3 > horizon: snapshot c2 still sees them
        assert ids(wh.read("bank.accounts", csn=c2)) == [2]
        with pytest.raises(SnapshotTooOldError):
            wh.read("bank.accounts", csn=c1)


def test_reading_below_the_horizon_after_vacuum_raises(wh: Warehouse) -> None:
    _, c1 = _seed(wh, {1: 10})
    with wh.begin() as t:
        t.overwrite("bank.accounts", accounts({2: 20}))
    c2 = wh.readable_csn()
    assert ids(wh.read("bank.accounts", csn=c1)) == [1]
    result = wh.vacuum(retention_seconds=0)
    assert result["horizon"] == c2
    with pytest.raises(SnapshotTooOldError):
        wh.read("bank.accounts", csn=c1)
    with pytest.raises(SnapshotTooOldError):
        wh.read("bank.accounts", csn=1)
    assert ids(wh.read("bank.accounts", csn=c2)) == [2]
    assert ids(wh.read("bank.accounts")) == [2]


def test_orphans_of_a_rolled_back_writer_are_removed(wh: Warehouse, root: Path | str) -> None:
    make_tables(wh)
    directory = _directory(wh, "sales.events")
    storage = wh.runtime.storage
    local = storage.local is not None  # an engine's write dir (Spark's) exists on local roots only
    t = wh.begin()
    sidecar = {"tid": t.tid, "table": "sales.events", "key": None}
    # files written but never registered: a writer that died between writing and registering
    part = storage.write_part(directory, {"day": "2024-01-05"}, events([1], day="2024-01-05"),
                              {**sidecar, "partition": {"day": "2024-01-05"}})
    stray = {f"{directory}/{part.path}"}  # a plain part file (D8)
    if local:
        empty = storage.new_write_dir(directory, {"day": "2024-01-06"}, sidecar, prefix="w")
        stray.add(f"{directory}/{empty}/{SIDECAR}")
    assert _exist(root, stray)

    result = wh.vacuum(retention_seconds=0)  # the writer's transaction is alive: it may still register
    assert result["orphan_dirs_removed"] == 0
    assert _exist(root, stray)

    t.rollback()
    result = wh.vacuum(retention_seconds=0)
    assert result["orphan_dirs_removed"] == len(stray)
    assert _gone(root, stray)
    assert storage_files(root) == set()
    assert _partition_dirs(wh, directory) == set()  # emptied partition dirs go too


def test_orphans_of_a_committed_or_expired_writer_are_removed(wh: Warehouse, root: Path | str) -> None:
    make_tables(wh)
    directory = _directory(wh, "sales.accounts")
    storage = wh.runtime.storage
    t = wh.begin()
    t.append("sales.accounts", accounts({1: 1}))
    kept = _part_files(wh, root, t)
    stray = storage.write_part(directory, {}, accounts({2: 2}), {"tid": t.tid, "table": "sales.accounts"})
    t.commit()
    dead = wh.begin(lease_seconds=0.2)
    lost = storage.write_part(directory, {}, accounts({3: 3}), {"tid": dead.tid, "table": "sales.accounts"})
    outlive_lease(wh, dead.tid)  # vacuum rolls the writer back and removes its files

    result = wh.vacuum(retention_seconds=0)
    assert result["orphan_dirs_removed"] == 2
    assert _gone(root, {f"{directory}/{stray.path}", f"{directory}/{lost.path}"})
    assert dead.state == "rolled_back"
    assert _exist(root, kept)
    assert ids(wh.read("sales.accounts")) == [1]


@pytest.mark.local_root  # makes write dirs by hand and ages them with os.utime
def test_write_dirs_nobody_can_be_proved_to_own_are_kept_and_reported(wh: Warehouse, root: Path) -> None:
    make_tables(wh)
    table_dir = root / _directory(wh, "sales.events")
    no_sidecar = table_dir / "day=2024-02-01" / f"p-{uuid.uuid4().hex}"
    no_sidecar.mkdir(parents=True)
    (no_sidecar / "part-00000.parquet").write_bytes(b"PAR1 half written")
    unknown_tid = table_dir / f"p-{uuid.uuid4().hex}"
    unknown_tid.mkdir(parents=True)
    (unknown_tid / SIDECAR).write_text('{"tid": "no-such-transaction"}')

    assert wh.vacuum(retention_seconds=0)["orphan_dirs_removed"] == 0  # young: a writer may be starting
    assert no_sidecar.is_dir() and unknown_tid.is_dir()

    old = time.time() - 3 * ORPHAN_GRACE_SECONDS
    for path in (no_sidecar, unknown_tid):
        os.utime(path, (old, old))
    assert wh.vacuum(retention_seconds=10 * ORPHAN_GRACE_SECONDS)["orphan_dirs_removed"] == 0  # inside retention
    assert no_sidecar.is_dir() and unknown_tid.is_dir()

    report = wh.vacuum(retention_seconds=0)  # nothing proves them this warehouse's: kept and reported (invariant 11)
    assert report["orphan_dirs_removed"] == 0 and report["foreign_files_kept"] == 2
    assert no_sidecar.is_dir() and unknown_tid.is_dir()
    empty = table_dir / "day=2024-02-02" / f"p-{uuid.uuid4().hex}"  # a writer died before its sidecar: nothing in it
    empty.mkdir(parents=True)
    os.utime(empty, (old, old))
    assert wh.vacuum(retention_seconds=0)["orphan_dirs_removed"] == 1
    assert not (table_dir / "day=2024-02-02").exists()


def test_visible_committed_parts_are_never_deleted(wh: Warehouse, root: Path | str) -> None:
    make_tables(wh)
    with wh.begin() as t:
        t.append("sales.events", events([1, 2], day="2024-01-01"))
        t.append("sales.events", events([3], day="2024-01-02"))
        t.append("sales.accounts", accounts({1: 10, 2: 20}))
    with wh.begin() as t:
        t.update("sales.events", pc.field("id") == 1, {"value": 5.0})
        t.delete("sales.accounts", pc.field("id") == 2)
        t.append("sales.accounts", accounts({3: 30}))
    with wh.begin() as t:
        t.overwrite("sales.events", events([4], day="2024-01-03"), partitions=[{"day": "2024-01-03"}])
    failed = wh.begin()
    failed.overwrite("sales.accounts", accounts({9: 9}))
    failed.rollback()
    keyed = wh.begin()
    keyed.append("sales.accounts", accounts({7: 7}), key="k")
    keyed.append("sales.accounts", accounts({8: 8}), key="k")
    keyed.commit()

    before = {name: wh.read(name).sort_by("id") for name in wh.tables()}
    result = wh.vacuum(retention_seconds=0)
    assert result["parts_removed"] >= 4  # two rewritten parts, one rolled back, one compensated
    after = {name: wh.read(name).sort_by("id") for name in wh.tables()}
    assert after == before
    assert wh.recover()["missing_files"] == []
    assert ids(after["sales.accounts"]) == [1, 3, 8]
    with wh.begin() as t:  # the warehouse stays fully usable
        t.append("sales.accounts", accounts({4: 40}))
    assert ids(wh.read("sales.accounts")) == [1, 3, 4, 8]


def test_partition_dirs_left_empty_are_removed(wh: Warehouse, root: Path | str) -> None:
    make_tables(wh)
    directory = _directory(wh, "sales.events")
    with wh.begin() as t:
        t.append("sales.events", events([1], day="2024-01-01"))
        t.append("sales.events", events([2, 3], day="2024-01-02"))
    assert _partition_dirs(wh, directory) == {"day=2024-01-01", "day=2024-01-02"}
    with wh.begin() as t:
        t.delete("sales.events", pc.field("day") == "2024-01-02")
    wh.vacuum(retention_seconds=0)
    assert _partition_dirs(wh, directory) == {"day=2024-01-01"}
    assert ids(wh.read("sales.events")) == [1]
    with wh.begin() as t:  # a partition can come back after its directory went away
        t.append("sales.events", events([4], day="2024-01-02"))
    assert ids(wh.read("sales.events")) == [1, 4]
