"""Decision D8 for core-written parts: one plain Parquet file per part, its footer naming the writer; orphan
files are found by listing the table against the catalog; a warehouse of the old layout (a `p-<hex>`
directory with a sidecar per part) still reads, merges and vacuums."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_txn import Warehouse
from airflow_txn.catalog import table_registry
from airflow_txn.core.vacuum import ORPHAN_GRACE_SECONDS
from airflow_txn.errors import StorageError
from airflow_txn.storage.root import SIDECAR, Storage, WrittenPart
from tests.helpers import accounts, events, ids, make_tables, storage_files

DAY = "2024-01-01"
UNKNOWN_TID = "1-999-0123456789abcdef"
"""A well-formed tid no transaction has."""


def _directory(wh: Warehouse, table: str) -> str:
    with wh.runtime.catalog.read() as conn:
        return table_registry.get(conn, table).directory


def test_a_core_write_is_one_plain_file_whose_footer_names_its_writer(wh: Warehouse, root: Path) -> None:
    make_tables(wh)
    with wh.begin() as t:
        t.append("sales.events", events([1, 2], day=DAY), key="load")
        t.append("sales.accounts", accounts({1: 10}))
    files = sorted(storage_files(root))
    directory = _directory(wh, "sales.events")
    assert len(files) == 2
    assert not any(SIDECAR in f for f in files)
    event_file = next(f for f in files if f.startswith(directory))
    assert event_file.startswith(f"{directory}/day={DAY}/p-") and event_file.endswith(".parquet")
    assert event_file.count("/") == directory.count("/") + 2  # <table>/<col>=<value>/<file>: no directory of its own
    storage = wh.runtime.storage
    tags = storage.read_footer_tags(storage.root_path(event_file))
    assert tags is not None
    assert (tags["tid"], tags["table"], tags["key"], tags["writer"]) == (t.tid, "sales.events", "load", "statement")
    assert tags["partition"] == {"day": DAY}
    stored = pq.read_table(storage.root_path(event_file), filesystem=storage.fs)
    assert stored.column_names == ["id", "value"]  # no partition column stored
    assert ids(wh.read("sales.events")) == [1, 2]


def test_a_merge_writes_one_plain_file_naming_the_merge(wh: Warehouse, root: Path) -> None:
    make_tables(wh)
    for i in range(3):
        with wh.begin() as t:
            t.append("sales.events", events([i], day=DAY))
    result = wh.compact("sales.events")
    assert result["merged"] == 1
    wh.vacuum(retention_seconds=0)
    files = sorted(storage_files(root))
    assert len(files) == 1 and files[0].endswith(".parquet")
    tags = wh.runtime.storage.read_footer_tags(wh.runtime.storage.root_path(files[0]))
    assert tags is not None and tags["writer"] == "compaction" and tags["table"] == "sales.events"
    assert ids(wh.read("sales.events")) == [0, 1, 2]


def test_an_orphan_file_goes_only_once_its_writer_ended(wh: Warehouse, root: Path) -> None:
    """A file written but never registered (its writer died before registering) stays while the writer may
    still register it, is counted by recovery, and goes with the first vacuum after the writer ended."""
    make_tables(wh)
    directory = _directory(wh, "sales.events")
    t = wh.begin()
    t.append("sales.events", events([1], day=DAY))
    stray = wh.runtime.storage.write_part(directory, {"day": DAY}, events([2], day=DAY),
                                          {"tid": t.tid, "table": "sales.events", "key": None})
    assert wh.recover()["orphan_dirs"] == 1
    assert wh.vacuum(retention_seconds=0)["orphan_dirs_removed"] == 0  # alive: it may still register
    assert f"{directory}/{stray.path}" in storage_files(root)
    t.commit()
    assert wh.vacuum(retention_seconds=0)["orphan_dirs_removed"] == 1
    assert f"{directory}/{stray.path}" not in storage_files(root)
    assert ids(wh.read("sales.events")) == [1]


@pytest.mark.local_root  # ages files with os.utime
def test_unregistered_part_files_go_only_when_this_catalog_knows_their_writer(wh: Warehouse, root: Path) -> None:
    """A torn file (no readable footer: its writer died mid-write) of a transaction this catalog began goes once
    that transaction ended; a file naming a transaction this catalog does not know (another warehouse's, or one
    newer than a restored catalog) is never deleted, however old: kept and reported after the grace period
    (docs/DESIGN.md, invariant 11)."""
    make_tables(wh)
    table_dir = root / _directory(wh, "sales.events")
    dead = wh.begin()
    torn = table_dir / f"day={DAY}" / f"p-{dead.tid}-{uuid.uuid4().hex}.parquet"
    torn.parent.mkdir(parents=True)
    torn.write_bytes(b"PAR1 half written")
    unknown = wh.runtime.storage.write_part(_directory(wh, "sales.events"), {}, events([1], day=DAY),
                                            {"tid": UNKNOWN_TID, "table": "sales.events"})
    unknown_file = table_dir / unknown.path

    report = wh.vacuum(retention_seconds=0)
    assert report["orphan_dirs_removed"] == 0 and report["foreign_files_kept"] == 0  # young; its writer is open
    dead.rollback()
    old = time.time() - 3 * ORPHAN_GRACE_SECONDS
    os.utime(unknown_file, (old, old))
    report = wh.vacuum(retention_seconds=10 * ORPHAN_GRACE_SECONDS)
    assert report["orphan_dirs_removed"] == 1 and report["foreign_files_kept"] == 0  # inside retention: not judged
    assert not torn.exists() and unknown_file.is_file()
    report = wh.vacuum(retention_seconds=0)
    assert report["orphan_dirs_removed"] == 0 and report["foreign_files_kept"] == 1
    assert unknown_file.is_file()


@pytest.mark.local_root  # ages files with os.utime
def test_a_live_writers_unfinished_file_is_kept_past_the_grace_period(wh: Warehouse, root: Path) -> None:
    """A file still being written has no readable footer; the tid in its name protects it by its writer's
    lease, however old it is (a slow writer), and it goes once the writer has ended."""
    make_tables(wh)
    t = wh.begin()
    table_dir = root / _directory(wh, "sales.events")
    unfinished = table_dir / f"day={DAY}" / f"p-{t.tid}-{uuid.uuid4().hex}.parquet"
    unfinished.parent.mkdir(parents=True)
    unfinished.write_bytes(b"PAR1 still being written")
    old = time.time() - 3 * ORPHAN_GRACE_SECONDS
    os.utime(unfinished, (old, old))
    assert wh.vacuum(retention_seconds=0)["orphan_dirs_removed"] == 0
    assert unfinished.is_file()
    t.rollback()
    assert wh.vacuum(retention_seconds=0)["orphan_dirs_removed"] == 1
    assert not unfinished.exists()


@pytest.mark.local_root  # ages files with os.utime
def test_other_files_below_a_table_are_left_alone(wh: Warehouse, root: Path) -> None:
    make_tables(wh)
    table_dir = root / _directory(wh, "sales.events")
    foreign = table_dir / f"day={DAY}" / "notes.parquet"
    looks_like_a_part = table_dir / f"day={DAY}" / f"p-{uuid.uuid4().hex}.parquet"  # no tid in its name
    foreign.parent.mkdir(parents=True)
    old = time.time() - 3 * ORPHAN_GRACE_SECONDS
    for path in (foreign, looks_like_a_part):
        path.write_bytes(b"not ours")
        os.utime(path, (old, old))
    assert wh.vacuum(retention_seconds=0)["orphan_dirs_removed"] == 0
    assert foreign.is_file() and looks_like_a_part.is_file()


# -- a warehouse of the layout before D8 ----------------------------------------------------------------
def _old_write_part(self: Storage, table_directory: str, partition: Mapping[str, str | None], data: pa.Table,
                    sidecar: Mapping[str, Any]) -> WrittenPart:
    """What Storage.write_part did before D8: a `p-<hex>` write dir, its sidecar, then `part-00000.parquet`."""
    relative = self.new_write_dir(table_directory, partition, dict(sidecar))
    target = self.table_dir(table_directory) / relative / "part-00000.parquet"
    pq.write_table(data.drop_columns([c for c in partition if c in data.column_names]), target)
    return WrittenPart(relative, ("part-00000.parquet",), data.num_rows, target.stat().st_size)


@pytest.mark.local_root  # the old layout's write dirs were made on local roots only
def test_a_warehouse_of_the_old_layout_reads_merges_and_vacuums(
        wh: Warehouse, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_tables(wh)
    directory = _directory(wh, "sales.events")
    with monkeypatch.context() as old_code:
        old_code.setattr(Storage, "write_part", _old_write_part)
        for i in range(3):
            with wh.begin() as t:
                t.append("sales.events", events([i], day=DAY))
        dead = wh.begin()
        dead.append("sales.events", events([9], day=DAY))  # staged, then rolled back: garbage
        crashed = wh.begin()
        orphan = wh.runtime.storage.write_part(directory, {"day": DAY}, events([8], day=DAY),
                                               {"tid": crashed.tid, "table": "sales.events", "key": None})
    old_files = storage_files(root)
    assert sum(f.endswith(SIDECAR) for f in old_files) == 5
    dead.rollback()
    crashed.rollback()

    assert ids(wh.read("sales.events")) == [0, 1, 2]
    assert wh.recover()["orphan_dirs"] == 1
    result = wh.vacuum(retention_seconds=0)
    assert (result["parts_removed"], result["orphan_dirs_removed"]) == (1, 1)
    assert not (root / directory / orphan.path).exists()
    assert sum(f.endswith(SIDECAR) for f in storage_files(root)) == 3

    with wh.begin() as t:  # new parts next to old ones
        t.append("sales.events", events([3], day=DAY))
    assert ids(wh.read("sales.events")) == [0, 1, 2, 3]
    assert wh.compact("sales.events")["merged"] == 1  # old sources merged into a new plain file
    wh.vacuum(retention_seconds=0)
    files = storage_files(root)
    assert len(files) == 1 and not any(SIDECAR in f for f in files)
    assert ids(wh.read("sales.events")) == [0, 1, 2, 3]
    assert list((root / directory).iterdir()) == [root / directory / f"day={DAY}"]


@pytest.mark.local_root  # an object cannot be removed while its PUT runs: it exists only once written
def test_a_file_removed_while_it_is_written_fails_the_write(
        wh: Warehouse, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stalled writer's torn file taken for an orphan (past the grace period) makes its statement fail:
    no part is registered without its file."""
    make_tables(wh)
    real_write = pq.write_table

    def write_then_lose(table: pa.Table, where: Any, **kwargs: Any) -> None:
        real_write(table, where, **kwargs)
        for path in (root / _directory(wh, "sales.events")).rglob("p-*.parquet"):
            os.unlink(path)  # what vacuum does to an old torn file, while the writer still writes

    monkeypatch.setattr("airflow_txn.storage.root.pq.write_table", write_then_lose)
    t = wh.begin()
    with pytest.raises(StorageError, match="could not write a part"):
        t.append("sales.events", events([1], day=DAY))
    monkeypatch.undo()
    assert wh.transaction_info(t.tid)["parts"] == []  # nothing registered; the transaction can only roll back
    t.rollback()
    assert storage_files(root) == set()
    assert ids(wh.read("sales.events")) == []
