"""Kill a process (SIGKILL) at every named crash point, then check that recover and vacuum restore the invariants."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from sqlalchemy import select

from airflow_txn import ROLLBACK_CSN, Warehouse, crashpoints, part_records, table_registry
from airflow_txn.catalog import schema
from airflow_txn.errors import SerializationError
from airflow_txn.storage import SIDECAR, write_dir_of
from tests.core.workers.procs import Spawn
from tests.core.workers.txn_worker import CRASH_ACCOUNT_IDS, CRASH_EVENT_IDS
from tests.helpers import accounts, events, ids, make_tables, storage_files

pytestmark = pytest.mark.slow

CHILD_TIMEOUT = 60.0
EVENTS_T, ACCOUNTS_T = "sales.events", "sales.accounts"

# crash point -> (worker scenario, does the killed transaction end committed?)
SCENARIOS: dict[str, tuple[str, bool | None]] = {
    crashpoints.STAGE_AFTER_FILES: ("append", False),
    crashpoints.COMMIT_BEFORE_RECORD: ("commit", False),
    crashpoints.COMMIT_AFTER_RECORD: ("commit", True),
    crashpoints.COMMIT_MID_APPLY: ("commit", True),
    crashpoints.ROLLBACK_MID: ("rollback", False),
    crashpoints.VACUUM_MID: ("vacuum", None),
}

def _baseline(wh: Warehouse) -> None:
    make_tables(wh)
    with wh.begin() as t:
        t.append(EVENTS_T, events([1, 2]))
        t.append(ACCOUNTS_T, accounts({1: 10, 2: 20}))


def _garbage_of_two_parts(wh: Warehouse) -> None:
    """A rolled-back part in one table and a part replaced by a committed overwrite in the other."""
    t = wh.begin()
    t.append(EVENTS_T, events([200]))
    t.rollback()
    with wh.begin() as t:
        t.overwrite(ACCOUNTS_T, accounts({1: 11, 2: 22}))


def _snapshot(wh: Warehouse) -> dict[str, pa.Table]:
    csn = wh.readable_csn()
    return {name: wh.read(name, csn=csn).sort_by("id") for name in (EVENTS_T, ACCOUNTS_T)}


def _parts(wh: Warehouse) -> list[part_records.PartRow]:
    with wh.runtime.catalog.read() as conn:
        return [part_records._from_row(r) for r in conn.execute(select(schema.parts))]


def _expected_files(wh: Warehouse) -> set[str]:
    """The files of every part visible at the watermark (data files and their write dir's sidecar)."""
    watermark = wh.readable_csn()
    out: set[str] = set()
    with wh.runtime.catalog.read() as conn:
        for info in table_registry.all_tables(conn):
            for part in part_records.visible_parts(conn, info.id, None, watermark):
                out |= {f"{info.directory}/{part.path}/{name}" for name in part.files}
                out.add(f"{info.directory}/{write_dir_of(part.path)}/{SIDECAR}")
    return out


def _run_to_crash(spawn: Spawn, point: str, scenario: str) -> str | None:
    """Start the scenario with the crash point armed; return the tid it began (None for vacuum)."""
    child = spawn("crash", scenario, crash_at=point)
    code = child.wait(CHILD_TIMEOUT)
    lines = child.messages()
    assert code == -signal.SIGKILL, f"{scenario} did not die at {point} (exit {code}): {lines}\n{child.stderr}"
    assert not any("survived" in m for m in lines), lines
    return next((m["tid"] for m in lines if "tid" in m), None)


def _wait_for_lease_expiry(wh: Warehouse, tid: str) -> None:
    info = wh.transaction_info(tid)
    if info["state"] == "active":
        time.sleep(max(0.0, info["lease_deadline"] - time.time()) + 0.05)


def _record_of(wh: Warehouse, tid: str) -> dict[str, Any] | None:
    return next((r for r in wh.commit_log(limit=1000) if r["tid"] == tid), None)


def _check_before_recovery(wh: Warehouse, point: str, tid: str | None, root: Path) -> None:
    """The crash left exactly the half-done state its point names (so the test is not vacuous)."""
    if tid is None:  # vacuum.mid: one garbage part's files gone, both rows still there
        garbage = [p for p in _parts(wh) if p.version.creation_csn == ROLLBACK_CSN or p.version.removal_csn]
        assert len(garbage) == 2, garbage
        gone = [p for p in garbage if wh.runtime.storage.missing_files(_dir_of(wh, p), p.path, p.files)]
        assert len(gone) == 1, f"expected one garbage part deleted before the kill, found {len(gone)}"
        return
    info = wh.transaction_info(tid)
    record = _record_of(wh, tid)
    created = [p for p in info["parts"] if p["role"] == "created"]
    if point == crashpoints.STAGE_AFTER_FILES:
        assert info["state"] == "active" and not info["parts"]
        sidecars = [f for f in storage_files(root) if f.endswith(SIDECAR) and "2024-01-02" in f]
        assert len(sidecars) == 1, f"expected the unregistered write dir of the killed append: {sidecars}"
    elif point == crashpoints.COMMIT_BEFORE_RECORD:
        assert info["state"] == "active" and record is None and len(created) == 2
    elif point in (crashpoints.COMMIT_AFTER_RECORD, crashpoints.COMMIT_MID_APPLY):
        assert info["state"] == "committed" and record is not None and not record["applied"]
        stamped = {p["table"] for p in created if p["creation_csn"] == record["csn"]}
        assert len(stamped) == (0 if point == crashpoints.COMMIT_AFTER_RECORD else 1), created
        assert wh.readable_csn() == record["csn"] - 1, "the watermark passed an unapplied record"
        seen = _snapshot(wh)  # invariant 1 mid-apply: the stamped table must not show through
        assert not set(CRASH_EVENT_IDS) & set(ids(seen[EVENTS_T]))
        assert not set(CRASH_ACCOUNT_IDS) & set(ids(seen[ACCOUNTS_T]))
    elif point == crashpoints.ROLLBACK_MID:
        assert info["state"] == "rolled_back" and record is None
        assert {p["table"] for p in created if p["creation_csn"] == ROLLBACK_CSN} == {EVENTS_T}
        locked = [p for p in info["parts"] if p["role"] == "removed"]
        assert [p["table"] for p in locked] == [ACCOUNTS_T], "the update's removal lock should still be held"


def _dir_of(wh: Warehouse, part: part_records.PartRow) -> str:
    with wh.runtime.catalog.read() as conn:
        return table_registry.by_id(conn, part.table_id).directory


def _check_outcome(wh: Warehouse, tid: str, committed: bool, before: dict[str, pa.Table]) -> None:
    """Invariant 3 after recovery: committed -> visible in every table; else invisible and rolled back."""
    record = _record_of(wh, tid)
    info = wh.transaction_info(tid)
    now = _snapshot(wh)
    assert (record is not None) == committed
    if committed:
        assert record is not None and record["applied"] and info["state"] == "committed"
        assert wh.readable_csn() >= record["csn"]
        assert set(CRASH_EVENT_IDS) <= set(ids(now[EVENTS_T]))
        assert set(CRASH_ACCOUNT_IDS) <= set(ids(now[ACCOUNTS_T]))
        assert ids(now[EVENTS_T]) == sorted(ids(before[EVENTS_T]) + CRASH_EVENT_IDS)
        assert ids(now[ACCOUNTS_T]) == sorted(ids(before[ACCOUNTS_T]) + CRASH_ACCOUNT_IDS)
    else:
        assert info["state"] == "rolled_back" and info["cleanup_done"]
        assert now == before, "a transaction that never committed changed what readers see"
        for part in info["parts"]:
            if part["role"] == "created":
                assert part["creation_csn"] == ROLLBACK_CSN, part
            else:  # its removal locks are released
                assert part["removal_csn"] is not None, part


def _check_no_orphans(wh: Warehouse, root: Path) -> None:
    before = _snapshot(wh)
    report = wh.vacuum(0)
    after_vacuum = wh.recover()
    assert after_vacuum["orphan_dirs"] == 0 and after_vacuum["missing_files"] == [], after_vacuum
    assert storage_files(root) == _expected_files(wh), f"orphan or missing files after vacuum ({report})"
    assert _snapshot(wh) == before, "vacuum changed visible data"
    with wh.runtime.catalog.read() as conn:
        assert part_records.garbage(conn, wh.readable_csn(), 100) == [], "garbage part rows left behind"


@pytest.mark.parametrize("point", crashpoints.ALL)
def test_kill_at_crash_point_then_recover(point: str, wh: Warehouse, spawn: Spawn, root: Path) -> None:
    assert point in SCENARIOS, f"crash point {point} has no scenario in this test: add one"
    scenario, committed = SCENARIOS[point]
    _baseline(wh)
    if scenario == "vacuum":
        _garbage_of_two_parts(wh)
    before = _snapshot(wh)

    tid = _run_to_crash(spawn, point, scenario)
    assert (tid is None) == (scenario == "vacuum")
    _check_before_recovery(wh, point, tid, root)
    if tid is not None:
        _wait_for_lease_expiry(wh, tid)
    report = wh.recover()
    assert report["missing_files"] == [], report
    if point == crashpoints.STAGE_AFTER_FILES:
        assert report["orphan_dirs"] == 1, report
    if tid is not None:
        assert committed is not None
        _check_outcome(wh, tid, committed, before)
    else:
        assert _snapshot(wh) == before
    _check_no_orphans(wh, root)
    if point == crashpoints.ROLLBACK_MID:  # the released lock lets a new transaction take the part
        try:
            with wh.begin() as t:
                t.update(ACCOUNTS_T, pc.field("id") == 1, {"balance": 5})
        except SerializationError as exc:
            pytest.fail(f"recovery did not release the killed rollback's removal lock: {exc}")
        assert ids(wh.read(ACCOUNTS_T).filter(pc.field("balance") == 5)) == [1]


def test_reader_in_another_process_applies_killed_committers_records(wh: Warehouse, spawn: Spawn) -> None:
    """Two committers die right after their records; a reader process's read / wait_for_csn applies them."""
    _baseline(wh)
    before = _snapshot(wh)
    records = []
    for _ in range(2):
        tid = _run_to_crash(spawn, crashpoints.COMMIT_AFTER_RECORD, "commit")
        assert tid is not None
        record = _record_of(wh, tid)
        assert record is not None and not record["applied"]
        records.append(record)
    first, second = records[0]["csn"], records[1]["csn"]
    assert second == first + 1 and wh.readable_csn() == first - 1

    reader = spawn("read_after", first, second)
    assert reader.wait(CHILD_TIMEOUT) == 0, reader.stderr
    by_read, by_wait = reader.messages()
    assert by_read["how"] == "read" and by_wait["how"] == "wait"
    assert by_read["events"] == sorted(ids(before[EVENTS_T]) + CRASH_EVENT_IDS), by_read
    assert by_read["accounts"] == sorted(ids(before[ACCOUNTS_T]) + CRASH_ACCOUNT_IDS), by_read
    assert by_read["readable"] >= first
    assert by_wait["watermark"] >= second and by_wait["readable"] >= second, by_wait
    assert by_wait["events"] == sorted(ids(before[EVENTS_T]) + 2 * CRASH_EVENT_IDS), by_wait
    assert by_wait["accounts"] == sorted(ids(before[ACCOUNTS_T]) + 2 * CRASH_ACCOUNT_IDS), by_wait
    # the reader applied both records: this process sees them without having called recover
    assert wh.readable_csn() == second
    assert all(r["applied"] for r in wh.commit_log(limit=10))
    assert ids(wh.read(EVENTS_T)) == by_wait["events"]
    assert ids(wh.read(ACCOUNTS_T)) == by_wait["accounts"]
