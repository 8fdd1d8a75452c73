"""Issue 34: vacuum deletes garbage parts in bounded batches, each batch's rows in one catalog statement after
its files (invariant 8), not one catalog transaction per part. Counted on the catalog's statements (SQLAlchemy's
cursor events), never timed."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from airflow_txn import Warehouse
from airflow_txn.catalog import compaction_records, part_records, table_registry
from airflow_txn.core import vacuum
from tests.harness.statements import watching
from tests.helpers import EVENTS, ids

PARTS = 45
BATCH = 20
PART_DELETE = re.compile(r"^\s*DELETE FROM\s+(\S+\.)?\"?txn_parts\"?\s", re.IGNORECASE)


def _garbage_parts(wh: Warehouse, parts: int) -> None:
    """`parts` committed parts (one per day), then all of them deleted: garbage once the horizon passes."""
    wh.create_table("sales.events", EVENTS, partition_by=["day"])
    days = [f"2024-{1 + i // 28:02d}-{1 + i % 28:02d}" for i in range(parts)]
    with wh.begin() as t:
        t.append("sales.events", pa.table({"id": list(range(parts)), "day": days, "value": [1.0] * parts},
                                          schema=EVENTS))
    with wh.begin() as t:
        t.delete("sales.events", pc.field("id") >= 0)


@contextmanager
def _part_deletes(wh: Warehouse) -> Iterator[list[int]]:
    """The number of bound ids of every DELETE on the parts table the catalog runs meanwhile."""
    seen: list[int] = []

    def before(statement: str, parameters: Any) -> None:
        if PART_DELETE.match(statement):  # ids bound one by one (SQLite), or as one array (PostgreSQL)
            values = list(parameters.values()) if isinstance(parameters, dict) else list(parameters or ())
            seen.append(len(values[0]) if len(values) == 1 and isinstance(values[0], list) else len(values))

    with watching(wh, before):
        yield seen


def _garbage_left(wh: Warehouse) -> int:
    with wh.runtime.catalog.read() as conn:
        info = table_registry.get(conn, "sales.events")
        return compaction_records.garbage_count(conn, info.id, wh.readable_csn(), float("inf"))


def test_a_vacuum_of_many_garbage_parts_deletes_their_rows_a_bounded_batch_per_statement(wh: Warehouse) -> None:
    _garbage_parts(wh, PARTS)
    assert _garbage_left(wh) == PARTS
    ticks: list[tuple[str, int, int]] = []
    with _part_deletes(wh) as deletes:
        report = vacuum.vacuum(wh.runtime, 0, batch=BATCH, progress=lambda s, d, t: ticks.append((s, d, t)))
    assert report["parts_removed"] == PARTS
    assert deletes == [BATCH, BATCH, PARTS - 2 * BATCH]  # one statement per batch, each at most BATCH ids
    assert [t for t in ticks if t[0] == "part files"] == [("part files", BATCH, PARTS),
                                                          ("part files", 2 * BATCH, PARTS),
                                                          ("part files", PARTS, PARTS)]
    assert _garbage_left(wh) == 0
    assert list(wh.runtime.storage.stored_parts(_directory(wh))) == []  # every file went with its row
    assert ids(wh.read("sales.events")) == []


def test_the_default_batch_is_the_bounded_constant(wh: Warehouse) -> None:
    """Warehouse.vacuum (and the CLI, the operator) delete at most vacuum.BATCH parts per catalog statement."""
    _garbage_parts(wh, 3)
    with _part_deletes(wh) as deletes:
        report = wh.vacuum(retention_seconds=0)
    assert report["parts_removed"] == 3
    assert deletes == [3]
    assert 0 < vacuum.BATCH <= 999  # SQLite's oldest limit on bound parameters


def test_a_dry_run_deletes_no_part_row(wh: Warehouse) -> None:
    _garbage_parts(wh, 5)
    with _part_deletes(wh) as deletes:
        report = vacuum.vacuum(wh.runtime, 0, batch=2, dry_run=True)
    assert report["parts_removed"] == 5
    assert deletes == []
    assert _garbage_left(wh) == 5


def _directory(wh: Warehouse) -> str:
    with wh.runtime.catalog.read() as conn:
        return table_registry.get(conn, "sales.events").directory


def _rolled_back_parts(wh: Warehouse, parts: int) -> None:
    """`parts` parts staged by a transaction that rolled back (creation CSN RollbackCSN): garbage at once."""
    days = [f"2025-{1 + i // 28:02d}-{1 + i % 28:02d}" for i in range(parts)]
    t = wh.begin()
    t.append("sales.events", pa.table({"id": list(range(parts)), "day": days, "value": [2.0] * parts}, schema=EVENTS))
    t.rollback()


def test_the_batches_cover_rolled_back_and_removed_parts_and_parts_removed_at_one_csn_across_batches(
        wh: Warehouse) -> None:
    """Each pass of vacuum's batches (compaction_records.garbage_batch: rolled-back parts by id, removed ones by
    removal CSN) goes on where its last batch ended: 45 parts removed at ONE CSN span three batches of 20 (the next
    batch starts at that CSN again, the deleted ones gone), and every kind of garbage goes."""
    _garbage_parts(wh, PARTS)
    _rolled_back_parts(wh, 7)
    with wh.begin() as t:  # 5 more, removed at a later CSN
        t.append("sales.events", pa.table({"id": [100 + i for i in range(5)], "day": ["2026-01-01"] * 5,
                                          "value": [3.0] * 5}, schema=EVENTS))
    with wh.begin() as t:
        t.delete("sales.events", pc.field("id") >= 100)
    garbage = _garbage_left(wh)
    assert garbage >= PARTS + 1  # the rolled-back parts, unless rollback already took them, and the later ones
    with _part_deletes(wh) as deletes:
        report = vacuum.vacuum(wh.runtime, 0, batch=BATCH)
    assert report["parts_removed"] == garbage
    assert sum(deletes) == garbage and all(0 < n <= BATCH for n in deletes), deletes
    assert _garbage_left(wh) == 0
    assert list(wh.runtime.storage.stored_parts(_directory(wh))) == []
    assert ids(wh.read("sales.events")) == []


def test_the_passes_together_are_garbage_in_batches(wh: Warehouse) -> None:
    """garbage_batch's passes, each resumed where garbage_resume says, return every part `garbage` lists,
    each once, in batches of at most the limit: deleting each batch before asking for the next, as vacuum does."""
    _garbage_parts(wh, 12)
    _rolled_back_parts(wh, 5)
    with wh.runtime.catalog.read() as conn:
        info = table_registry.get(conn, "sales.events")
        horizon = wh.readable_csn()
        expected = {p.id for p in compaction_records.garbage(conn, info.id, horizon, float("inf"), None)}
    seen: list[int] = []
    for kind in compaction_records.GARBAGE_KINDS:
        resume = None
        while True:
            with wh.runtime.catalog.read() as conn:
                batch = compaction_records.garbage_batch(conn, info.id, horizon, float("inf"), 4, kind, resume)
            if not batch:
                break
            assert len(batch) <= 4
            seen += [p.id for p in batch]
            with wh.runtime.catalog.write() as conn:
                part_records.forget(conn, [p.id for p in batch])
            resume = compaction_records.garbage_resume(kind, batch)
    assert sorted(seen) == sorted(expected) and len(seen) == len(set(seen))
