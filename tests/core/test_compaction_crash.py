"""kill -9 of a compaction at each of its crash points: nothing any snapshot sees changes, recovery and
vacuum converge (no orphans), and compacting again finishes the job."""

from __future__ import annotations

import signal
from pathlib import Path

import pyarrow.compute as pc
import pytest

from airflow_txn import Warehouse
from airflow_txn.catalog import part_records, table_registry
from airflow_txn.core import crashpoints
from airflow_txn.errors import SnapshotTooOldError
from tests.core.workers.procs import Spawn
from tests.helpers import (
    accounts,
    events,
    ids,
    make_tables,
    storage_files,
    unregistered_parts,
    visible_part_files,
    wait_past,
)

pytestmark = pytest.mark.slow

EVENTS_T, ACCOUNTS_T = "sales.events", "sales.accounts"
DAYS = ("2024-01-01", "2024-01-05")  # two partitions: two merge groups, in this order
CHILD_TIMEOUT = 60.0


def _small_parts(wh: Warehouse) -> None:
    make_tables(wh)
    for n in range(3):
        with wh.begin() as t:
            for d, day in enumerate(DAYS):
                t.append(EVENTS_T, events([100 * d + n], day=day))
            t.append(ACCOUNTS_T, accounts({n: n}))


def _history(wh: Warehouse) -> dict[int, tuple[list[int], list[int]]]:
    out = {}
    for csn in range(1, wh.readable_csn() + 1):
        try:
            out[csn] = (ids(wh.read(EVENTS_T, csn=csn)), ids(wh.read(ACCOUNTS_T, csn=csn)))
        except SnapshotTooOldError:
            continue
    return out


def _same_history(wh: Warehouse, before: dict[int, tuple[list[int], list[int]]]) -> None:
    now = _history(wh)
    for csn, rows in now.items():
        assert rows == before[csn], f"CSN {csn}: {rows} != {before[csn]}"


def _parts_per_day(wh: Warehouse) -> dict[str, int]:
    with wh.runtime.catalog.read() as conn:
        info = table_registry.get(conn, EVENTS_T)
        parts = part_records.visible_parts(conn, info.id, None, wh.readable_csn())
    return {day: sum(p.partition["day"] == day for p in parts) for day in DAYS}


def _merges(wh: Warehouse) -> list[dict[str, object]]:
    return [t for t in wh.transactions(limit=1000) if (t["label"] or "").startswith("compaction of")]


@pytest.mark.parametrize("point", [crashpoints.COMPACT_AFTER_FILES, crashpoints.COMPACT_AFTER_SWAP])
def test_a_compaction_killed_converges(point: str, wh: Warehouse, spawn: Spawn, root: Path | str) -> None:
    _small_parts(wh)
    before = _history(wh)
    child = spawn("crash", "compact", crash_at=point)
    code = child.wait(CHILD_TIMEOUT)
    assert code == -signal.SIGKILL, f"compaction did not die at {point} (exit {code}): {child.stderr}"

    _same_history(wh, before)  # before any recovery: readers see exactly what they saw
    (merge,) = _merges(wh)
    if point == crashpoints.COMPACT_AFTER_FILES:
        assert merge["state"] == "active" and _parts_per_day(wh) == {DAYS[0]: 3, DAYS[1]: 3}
        (orphan,) = list(unregistered_parts(wh, EVENTS_T).values())
        assert orphan["tid"] == merge["tid"] and orphan["writer"] == "compaction"
        with wh.begin() as t:  # the dead merge holds no lock: a user rewrites one of its sources at once
            assert t.delete(EVENTS_T, pc.field("id") == 1) == 1
        before = _history(wh)
    else:
        assert merge["state"] == "committed" and _parts_per_day(wh) == {DAYS[0]: 1, DAYS[1]: 3}
        assert list(unregistered_parts(wh, EVENTS_T).values()) == []

    wait_past(wh, float(str(merge["lease_deadline"])), "the dead merge's lease to run out")
    report = wh.recover()
    assert report["missing_files"] == []
    assert report["orphan_dirs"] == (1 if point == crashpoints.COMPACT_AFTER_FILES else 0)
    expected_state = "rolled_back" if point == crashpoints.COMPACT_AFTER_FILES else "committed"
    assert wh.transaction_info(str(merge["tid"]))["state"] == expected_state
    _same_history(wh, before)

    wh.vacuum(retention_seconds=0)
    assert wh.recover()["orphan_dirs"] == 0
    assert storage_files(root) == visible_part_files(wh), "orphan files after recover + vacuum"
    _same_history(wh, before)

    result = wh.compact(EVENTS_T)  # compacting again finishes the job
    assert result["yielded"] == 0 and _parts_per_day(wh) == {DAYS[0]: 1, DAYS[1]: 1}
    _same_history(wh, before)
    wh.vacuum(retention_seconds=0)
    assert storage_files(root) == visible_part_files(wh)
    assert ids(wh.read(EVENTS_T)) == before[max(before)][0]
