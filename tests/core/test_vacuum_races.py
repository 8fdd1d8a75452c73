"""Vacuum racing writers and other vacuums on partition directories (issue 16, case 4).

Vacuum removes the partition directories it empties; a writer creates its write dir inside one. The
deterministic tests put the other side's step exactly between two steps of one side (through the real
os.mkdir / os.rmdir calls, patched to run the interleaving), the threaded one runs both sides for a
bounded number of rounds and asserts that no call ever failed. The deterministic ones race on local
directories (local_root); the threaded one runs on every root.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pytest

from airflow_txn import Warehouse
from airflow_txn.catalog import table_registry
from tests.helpers import events, ids, make_tables

DAY = "2024-01-01"
PARTITION = f"day={DAY}"
THREAD_TIMEOUT = 120.0


def _events_dir(wh: Warehouse) -> str:
    """sales.events' directory, relative to the root."""
    with wh.runtime.catalog.read() as conn:
        return table_registry.get(conn, "sales.events").directory


def _garbage(wh: Warehouse, day: str = DAY) -> None:
    """A rolled-back part in `day`: vacuum deletes it and then the partition dir it empties."""
    t = wh.begin()
    t.append("sales.events", events([99], day=day))
    t.rollback()


@pytest.mark.local_root  # a race on a local partition directory (os.mkdir): an object store has none
def test_a_writer_survives_vacuum_removing_the_partition_dir_it_just_created(
        wh: Warehouse, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """issue 16, case 4: a vacuum removes the (empty) partition dir a writer has just created, before the
    writer creates its write dir in it; the writer's append must not fail, nor its transaction."""
    make_tables(wh)
    directory = _events_dir(wh)
    table_dir = root / directory
    real_mkdir = os.mkdir
    removed: list[str] = []

    def mkdir(path: Any, mode: int = 0o777, **kwargs: Any) -> None:
        real_mkdir(path, mode, **kwargs)
        if Path(path) == table_dir / PARTITION and not removed:
            # what a vacuum finishing a part of this partition does right now: its files are gone
            # already, then the partition dir is removed because it is empty
            removed.append(str(path))
            wh.runtime.storage.delete_part(directory, f"{PARTITION}/p-{uuid.uuid4().hex}")

    monkeypatch.setattr(os, "mkdir", mkdir)
    t = wh.begin()
    t.append("sales.events", events([1, 2], day=DAY))
    monkeypatch.undo()
    assert removed, "the interleaving did not happen"
    t.commit()
    assert ids(wh.read("sales.events")) == [1, 2]


@pytest.mark.local_root  # a race on a local partition directory (os.rmdir): an object store has none
@pytest.mark.parametrize("other", ["writer enters", "another vacuum removed it"])
def test_vacuum_survives_a_partition_dir_changing_under_it(wh: Warehouse, root: Path, monkeypatch: pytest.MonkeyPatch,
                                                            other: str) -> None:
    """issue 16, case 4: between vacuum's finding a partition dir empty and removing it, a writer creates its
    write dir there (the dir is not empty any more) or another vacuum removes it (gone): vacuum finishes,
    and the writer's dir is kept."""
    make_tables(wh)
    table_dir = root / _events_dir(wh)
    _garbage(wh)
    partition = table_dir / PARTITION
    entered = partition / f"p-{uuid.uuid4().hex}"
    real_rmdir = os.rmdir
    fired: list[bool] = []

    def rmdir(path: Any, *args: Any, **kwargs: Any) -> None:
        if not args and not kwargs and Path(path) == partition and not fired:
            fired.append(True)
            if other == "writer enters":
                os.mkdir(entered)
            else:
                real_rmdir(path)
        real_rmdir(path, *args, **kwargs)

    monkeypatch.setattr(os, "rmdir", rmdir)
    result = wh.vacuum(retention_seconds=0)
    monkeypatch.undo()
    assert fired, "the interleaving did not happen"
    assert result["parts_removed"] == 1
    if other == "writer enters":
        assert entered.is_dir()
    else:
        assert not partition.exists()


def _run_threads(targets: list[Callable[[], None]]) -> list[BaseException]:
    errors: list[BaseException] = []

    def guarded(target: Callable[[], None]) -> Callable[[], None]:
        def body() -> None:
            try:
                target()
            except BaseException as exc:  # reported by the test, with every other thread's
                errors.append(exc)
        return body

    threads = [threading.Thread(target=guarded(t), daemon=True) for t in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(THREAD_TIMEOUT)
    assert not any(thread.is_alive() for thread in threads), "a thread hung"
    return errors


def test_writers_and_two_vacuums_never_fail(wh: Warehouse, open_wh: Callable[[], Warehouse]) -> None:
    """issue 16, case 4: two writers append into a few partitions (every other transaction rolled back, so
    vacuum keeps emptying partition dirs) while two vacuums run in a loop: no call ever fails, every
    committed row is there, and nothing is left behind once all is vacuumed."""
    make_tables(wh)
    directory = _events_dir(wh)
    rounds, days = 12, [f"2024-01-0{d}" for d in range(1, 4)]
    stop = threading.Event()
    committed: list[int] = []

    def writer(index: int) -> Callable[[], None]:
        def body() -> None:
            handle = open_wh()
            for r in range(rounds):
                row = index * 1000 + r
                t = handle.begin()
                t.append("sales.events", events([row], day=days[r % len(days)]))
                if r % 2:
                    t.rollback()
                else:
                    t.commit()
                    committed.append(row)
        return body

    def vacuumer() -> None:
        handle = open_wh()
        while not stop.is_set():
            handle.vacuum(retention_seconds=0)

    writers = [writer(i) for i in (1, 2)]
    vacuums = [vacuumer, vacuumer]

    def writers_then_stop() -> None:
        try:
            errors = _run_threads(writers)
            if errors:
                raise errors[0]
        finally:
            stop.set()

    errors = _run_threads([writers_then_stop, *vacuums])
    assert errors == []
    assert ids(wh.read("sales.events")) == sorted(committed)
    wh.vacuum(retention_seconds=0)
    with wh.begin() as t:
        t.delete("sales.events", pc.field("id") >= 0)
    wh.vacuum(retention_seconds=0)
    assert list(wh.runtime.storage.stored_parts(directory)) == []  # no part file, no write dir left


def test_two_vacuums_take_turns(wh: Warehouse, open_wh: Callable[[], Warehouse]) -> None:
    """issue 16, case 4: a second vacuum started while one runs waits for it (a catalog lock: PostgreSQL's
    advisory lock, a file lock beside a SQLite catalog), then finds nothing left to do."""
    make_tables(wh)
    for day in ("2024-01-01", "2024-01-02"):
        _garbage(wh, day)
    inside, release, second_started = threading.Event(), threading.Event(), threading.Event()
    results: dict[str, dict[str, Any]] = {}

    def first_progress(stage: str, done: int, total: int) -> None:
        if stage == "parts" and not inside.is_set():
            inside.set()
            assert release.wait(THREAD_TIMEOUT)

    def second_progress(stage: str, done: int, total: int) -> None:
        second_started.set()

    def first() -> None:
        results["first"] = open_wh().vacuum(retention_seconds=0, progress=first_progress)

    def second() -> None:
        assert inside.wait(THREAD_TIMEOUT)
        results["second"] = open_wh().vacuum(retention_seconds=0, progress=second_progress)

    def referee() -> None:
        assert inside.wait(THREAD_TIMEOUT)
        try:
            assert not second_started.wait(1.0), "the second vacuum ran while the first was inside"
        finally:
            release.set()

    errors = _run_threads([first, second, referee])
    assert errors == []
    assert results["first"]["parts_removed"] == 2
    assert results["second"]["parts_removed"] == 0

