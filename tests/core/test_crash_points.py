"""The crash matrix: a worker process is SIGKILLed at every named crash point, on every catalog (SQLite,
PostgreSQL) with every CSN oracle (sql, ZooKeeper); then recover() and vacuum must restore the invariants.

One cell = (crash point, catalog, oracle). In each cell the test checks the half-done state the point names
(so the kill really happened there), runs recover(), then checks invariant 3 (a committed transaction is
visible in every table, an uncommitted one in none), invariant 8 (vacuum deletes nothing visible and leaves
no orphan file or garbage row), dense CSNs, and that a new transaction commits afterwards.

Every point of `crashpoints.ALL` is a cell: a point without an entry in SCENARIOS fails (here and in
test_every_crash_point_has_a_scenario), so no point is silently left out. The statement cells (at the end) kill
a transaction around each kind of statement beyond appends (a MERGE: txn_worker.STATEMENTS) at every point of a
transaction's life it passes: its files written, a keyed retry of it, the commit, the rollback.
AIRFLOW_TXN_SOAK_ROUNDS=N runs every cell N times (the soak). Each cell is recorded as evidence (tests/evidence.py,
suite crash_matrix), and the module prints how many cells ran and passed.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from sqlalchemy import select

from airflow_txn import ROLLBACK_CSN, Warehouse
from airflow_txn.catalog import commit_log, part_records, schema, table_registry, txn_records
from airflow_txn.core import crashpoints
from airflow_txn.errors import SerializationError, SnapshotTooOldError
from airflow_txn.oracle.base import AbortDecidedError, LogEntry
from tests import evidence
from tests.conftest import PRODUCTION
from tests.core.workers.procs import Spawn
from tests.core.workers.txn_worker import (
    CRASH_ACCOUNT_IDS,
    CRASH_DAY,
    CRASH_EVENT_IDS,
    RETRY_DAYS,
    RETRY_IDS,
    RETRY_KEY,
    STATEMENT_VALUES,
    STATEMENTS,
)
from tests.helpers import (
    accounts,
    events,
    ids,
    make_tables,
    outlive_lease,
    storage_files,
    unregistered_parts,
    visible_part_files,
)

CHILD_TIMEOUT = 60.0
PARENT_LEASE_SECONDS = 300.0  # the re-staging scenario's transaction outlives its killed attempt
EVENTS_T, ACCOUNTS_T = "sales.events", "sales.accounts"
SOAK_ROUNDS = max(1, int(os.environ.get("AIRFLOW_TXN_SOAK_ROUNDS", "1")))


@dataclass(frozen=True, slots=True)
class Scenario:
    """What the worker does when it is killed, and how the killed transaction must end after recovery."""

    worker: str  # the crash scenario of tests/core/workers/txn_worker.py
    committed: bool | None  # None: maintenance (vacuum, compaction): what every snapshot shows must not change
    parent_txn: bool = False  # the parent began the transaction and runs attempt 3 after recovery


SCENARIOS: dict[str, Scenario] = {
    crashpoints.STAGE_AFTER_FILES: Scenario("append", committed=False),
    crashpoints.STAGE_RETRY_AFTER_FILES: Scenario("retry", committed=True, parent_txn=True),
    crashpoints.STAGE_RETRY_MID_REGISTER: Scenario("retry", committed=True, parent_txn=True),
    crashpoints.COMMIT_BEFORE_RECORD: Scenario("commit", committed=False),
    crashpoints.COMMIT_MID_RECORD: Scenario("commit", committed=False),
    crashpoints.COMMIT_AFTER_RECORD: Scenario("commit", committed=True),
    crashpoints.COMMIT_AFTER_MIRROR: Scenario("commit", committed=True),
    crashpoints.COMMIT_MID_APPLY: Scenario("commit", committed=True),
    crashpoints.ROLLBACK_MID: Scenario("rollback", committed=False),
    crashpoints.VACUUM_MID: Scenario("vacuum", committed=None),
    crashpoints.LEASE_MID_RENEW: Scenario("keep_alive", committed=False),
    crashpoints.COMPACT_AFTER_FILES: Scenario("compact", committed=None),
    crashpoints.COMPACT_AFTER_SWAP: Scenario("compact", committed=None),
    crashpoints.PUBLISH_MID_RUN: Scenario("publish", committed=True),
}
RETRY_POINTS = (crashpoints.STAGE_RETRY_AFTER_FILES, crashpoints.STAGE_RETRY_MID_REGISTER)
# the killed writer left one unregistered write dir
ORPHAN_POINTS = (crashpoints.STAGE_AFTER_FILES, *RETRY_POINTS, crashpoints.COMPACT_AFTER_FILES)

# The matrix's catalog x oracle x root axis: every catalog, oracle and root, not their cross product (as the core
# suite's variants, docs/TESTING.md "Why three variants"); the ZooKeeper cells use the session's server (a fresh
# chroot each).
COMBINATIONS = [
    pytest.param("sqlite", id="sqlite-sql"),
    pytest.param("postgres", id="postgres-sql", marks=pytest.mark.postgres),
    pytest.param("sqlite-zookeeper", id="sqlite-zookeeper", marks=pytest.mark.zookeeper),
    # the production pairing: the storage root on the session's S3 server too (the `root` fixture's s3:// URI)
    pytest.param(PRODUCTION, id=PRODUCTION, marks=[pytest.mark.zookeeper, pytest.mark.s3]),
]

_cells: list[tuple[str, bool]] = []  # (cell, passed) of this run, for the count printed at the end


@pytest.fixture(params=COMBINATIONS)
def catalog_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Overrides tests/conftest.py's: both catalogs with both oracles, PostgreSQL's ZooKeeper cells with an s3://
    root (the `root` fixture sees the production id); the `wh` and `spawn` fixtures use it."""
    catalog, _, variant = str(request.param).partition("-")
    if "zookeeper" in variant:
        request.getfixturevalue("zk_oracle")  # AIRFLOW_TXN_ORACLE for this test and its workers
    if catalog == "postgres":
        url: str = request.getfixturevalue("pg_schema_url")
        return url
    return f"sqlite:///{tmp_path / 'catalog.db'}"


@pytest.fixture(scope="module", autouse=True)
def _count_cells(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    if not _cells:
        return
    passed = sum(ok for _, ok in _cells)
    combos = sorted({c.split("|", 1)[1] for c, _ in _cells})
    line = (f"crash matrix: {len(_cells)} cells ({len({c.split('|')[0] for c, _ in _cells})} points x "
            f"{', '.join(combos)}; {SOAK_ROUNDS} round(s)): {passed} passed, {len(_cells) - passed} failed")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    if capture is not None and reporter is not None:
        with capture.global_and_fixture_disabled():
            reporter.write_line(f"\n{line}")
    _cells.clear()


def test_every_crash_point_has_a_scenario() -> None:
    missing = [p for p in crashpoints.ALL if p not in SCENARIOS]
    assert not missing, f"crash point(s) {missing} have no scenario in the crash matrix: add one to SCENARIOS"
    assert set(SCENARIOS) <= set(crashpoints.ALL), "a scenario names a crash point that no longer exists"


# -- the state around the crash -------------------------------------------------------------------------
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


def _small_parts(wh: Warehouse) -> None:
    """Two partitions of sales.events with several small committed parts each: two merge groups."""
    for new, day in (([10], "2024-01-01"), ([11], "2024-01-01"), ([20], "2024-01-05"), ([21], "2024-01-05")):
        with wh.begin() as t:
            t.append(EVENTS_T, events(new, day=day))


def _history(wh: Warehouse) -> dict[int, tuple[list[int], list[int]]]:
    """The rows of both tables at every readable snapshot since the first commit (time travel within the
    retention horizon): a crash must change none of them."""
    out = {}
    for csn in range(2, wh.readable_csn() + 1):
        try:
            out[csn] = (ids(wh.read(EVENTS_T, csn=csn)), ids(wh.read(ACCOUNTS_T, csn=csn)))
        except SnapshotTooOldError:  # vacuum(0) moved the horizon past it
            continue
    return out


def _parts_per_day(wh: Warehouse) -> dict[str, int]:
    """How many parts of sales.events each partition shows at the watermark."""
    watermark = wh.readable_csn()
    with wh.runtime.catalog.read() as conn:
        info = table_registry.get(conn, EVENTS_T)
        parts = part_records.visible_parts(conn, info.id, None, watermark)
    out: dict[str, int] = {}
    for part in parts:
        out[str(part.partition["day"])] = out.get(str(part.partition["day"]), 0) + 1
    return out


def _merges(wh: Warehouse) -> list[dict[str, Any]]:
    return [t for t in wh.transactions(limit=1000) if (t["label"] or "").startswith("compaction of")]


def _snapshot(wh: Warehouse) -> dict[str, pa.Table]:
    csn = wh.readable_csn()
    return {name: wh.read(name, csn=csn).sort_by("id") for name in (EVENTS_T, ACCOUNTS_T)}


def _parts(wh: Warehouse) -> list[part_records.PartRow]:
    with wh.runtime.catalog.read() as conn:
        return part_records.part_rows(conn.execute(select(schema.parts)))


def _last_csn(wh: Warehouse) -> int:
    with wh.runtime.catalog.read() as conn:
        return wh.runtime.oracle.last_csn(conn)


def _catalog_row(wh: Warehouse, tid: str) -> tuple[txn_records.TxnRow, commit_log.CommitRecord | None]:
    """The transaction's own catalog row and catalog commit record (no ZooKeeper resolution)."""
    with wh.runtime.catalog.read() as conn:
        return txn_records.fetch(conn, tid), commit_log.record_of(conn, tid)


def _unregistered(wh: Warehouse) -> list[str]:
    """The part files and write dirs no part row names, in every table (a killed writer's)."""
    with wh.runtime.catalog.read() as conn:
        tables = [info.name.qualified for info in table_registry.all_tables(conn)]
    return [f"{table}/{relative}" for table in tables for relative in unregistered_parts(wh, table)]


def _run_to_crash(spawn: Spawn, point: str, scenario: str, *args: object) -> list[dict[str, Any]]:
    """Start the scenario with the crash point armed; return what the worker said before it died."""
    child = spawn("crash", scenario, *args, crash_at=point)
    code = child.wait(CHILD_TIMEOUT)
    lines = child.messages()
    assert code == -signal.SIGKILL, f"{scenario} did not die at {point} (exit {code}): {lines}\n{child.stderr}"
    assert not any("survived" in m for m in lines), lines
    return lines


def _wait_for_lease_expiry(wh: Warehouse, tid: str) -> None:
    info = wh.transaction_info(tid)
    if info["state"] == "active":
        outlive_lease(wh, tid)


def _record_of(wh: Warehouse, tid: str) -> dict[str, Any] | None:
    return next((r for r in wh.commit_log(limit=1000) if r["tid"] == tid), None)


def _dir_of(wh: Warehouse, part: part_records.PartRow) -> str:
    with wh.runtime.catalog.read() as conn:
        return table_registry.by_id(conn, part.table_id).directory


def _check_vacuum_mid(wh: Warehouse) -> None:
    """vacuum.mid: one garbage part's files gone, both garbage rows still there."""
    garbage = [p for p in _parts(wh) if p.version.creation_csn == ROLLBACK_CSN or p.version.removal_csn]
    assert len(garbage) == 2, garbage
    gone = [p for p in garbage if wh.runtime.storage.missing_files(_dir_of(wh, p), p.path, p.files)]
    assert len(gone) == 1, f"expected one garbage part deleted before the kill, found {len(gone)}"


def _check_compact_before(wh: Warehouse, point: str, parts_before: dict[str, int]) -> None:
    """compact.after_files: the first merge wrote its files, nothing swapped; compact.after_swap: the first
    partition's parts are one merged part, the second partition's merge never began."""
    merges = _merges(wh)
    if point == crashpoints.COMPACT_AFTER_FILES:
        assert [m["state"] for m in merges] == ["active"], merges
        assert _parts_per_day(wh) == parts_before
    else:
        assert [m["state"] for m in merges] == ["committed"], merges
        assert _parts_per_day(wh) == {**parts_before, "2024-01-01": 1}, (parts_before, _parts_per_day(wh))


def _check_retry_before(wh: Warehouse, tid: str, root: Path | str) -> None:
    """The killed attempt 2 changed nothing in the catalog: attempt 1 is still staged, uncompensated
    (for stage.retry_mid_register: its compensation died with the catalog transaction)."""
    row, record = _catalog_row(wh, tid)
    assert row.state == txn_records.ACTIVE and record is None
    mine = [p for p in _parts(wh) if p.version.creation_tid == tid]
    assert len(mine) == 2 and {p.stage_attempt for p in mine} == {1}, mine
    assert all(p.version.creation_csn is None and p.version.removal_tid is None for p in mine), mine
    orphans = [f for f in _unregistered(wh) if RETRY_DAYS[2] in f]
    assert len(orphans) == 1, f"expected the unregistered part file of the killed attempt 2: {orphans}"


def _check_before_recovery(wh: Warehouse, point: str, tid: str, said: list[dict[str, Any]], root: Path | str,
                           last_before: int) -> None:
    """The crash left exactly the half-done state its point names (so the test is not vacuous)."""
    if point in RETRY_POINTS:
        _check_retry_before(wh, tid, root)
        return
    external = wh.runtime.oracle.external_log
    info = wh.transaction_info(tid)
    record = _record_of(wh, tid)
    row, catalog_record = _catalog_row(wh, tid)
    created = [p for p in info["parts"] if p["role"] == "created"]
    if point == crashpoints.STAGE_AFTER_FILES:
        assert info["state"] == "active" and not info["parts"]
        orphans = [f for f in _unregistered(wh) if CRASH_DAY in f]
        assert len(orphans) == 1, f"expected the unregistered part file of the killed append: {orphans}"
    elif point in (crashpoints.COMMIT_BEFORE_RECORD, crashpoints.COMMIT_MID_RECORD):
        assert info["state"] == "active" and record is None and len(created) == 2
        assert _last_csn(wh) == last_before, "a CSN was allocated (or mirrored) by a commit that has no record"
        if external is not None:
            assert external.commit_csn(tid) is None and external.last_logged_csn() == last_before
            committing = point == crashpoints.COMMIT_MID_RECORD
            assert (row.state == txn_records.COMMITTING) == committing, row
    elif external is None and point in (crashpoints.COMMIT_AFTER_RECORD, crashpoints.COMMIT_AFTER_MIRROR,
                                        crashpoints.COMMIT_MID_APPLY):
        # SQL oracle: record, state and stamps are one catalog transaction, so past the record all is applied
        assert info["state"] == "committed" and record is not None and record["applied"]
        assert catalog_record is not None and row.state == txn_records.COMMITTED, row
        assert {p["creation_csn"] for p in created} == {record["csn"]} and len(created) == 2, created
        assert wh.readable_csn() == record["csn"]
        seen = _snapshot(wh)
        assert set(CRASH_EVENT_IDS) <= set(ids(seen[EVENTS_T]))
        assert set(CRASH_ACCOUNT_IDS) <= set(ids(seen[ACCOUNTS_T]))
    elif point in (crashpoints.COMMIT_AFTER_RECORD, crashpoints.COMMIT_AFTER_MIRROR, crashpoints.COMMIT_MID_APPLY):
        assert info["state"] == "committed" and record is not None and not record["applied"]
        in_catalog = external is None or point != crashpoints.COMMIT_AFTER_RECORD
        assert (catalog_record is not None) == in_catalog, catalog_record
        assert row.state == (txn_records.COMMITTED if in_catalog else txn_records.COMMITTING), row
        stamped = {p["table"] for p in created if p["creation_csn"] == record["csn"]}
        assert len(stamped) == (1 if point == crashpoints.COMMIT_MID_APPLY else 0), created
        assert wh.readable_csn() == record["csn"] - 1, "the watermark passed an unapplied record"
        seen = _snapshot(wh)  # invariant 1 mid-apply: the stamped table must not show through
        assert not set(CRASH_EVENT_IDS) & set(ids(seen[EVENTS_T]))
        assert not set(CRASH_ACCOUNT_IDS) & set(ids(seen[ACCOUNTS_T]))
    elif point == crashpoints.ROLLBACK_MID:
        assert info["state"] == "rolled_back" and record is None
        assert {p["table"] for p in created if p["creation_csn"] == ROLLBACK_CSN} == {EVENTS_T}
        locked = [p for p in info["parts"] if p["role"] == "removed"]
        assert [p["table"] for p in locked] == [ACCOUNTS_T], "the update's removal lock should still be held"
    elif point == crashpoints.PUBLISH_MID_RUN:
        assert info["state"] == "committed" and record is not None and record["applied"]
        csn = next(m["csn"] for m in said if "csn" in m)
        assert record["csn"] == csn and wh.readable_csn() == csn
        progress = _iceberg_progress(wh)
        assert sorted(progress.values()) == [0, csn] or (len(progress) == 1 and list(progress.values()) == [csn]), (
            f"expected one table published at CSN {csn} and the other not: {progress}")
    elif point == crashpoints.LEASE_MID_RENEW:
        deadline = next(m["deadline"] for m in said if "deadline" in m)
        assert info["state"] == "active" and record is None and len(created) == 2
        assert abs(info["lease_deadline"] - deadline) < 1e-6, "the killed renewal extended the lease"
    else:
        pytest.fail(f"no before-recovery check for crash point {point}: add one")


# -- after recovery -------------------------------------------------------------------------------------
def _finish_retry(wh: Warehouse, tid: str) -> None:
    """Attempt 3 of the task (the parent, as Airflow's next try would) stages and the transaction commits."""
    t = wh.attach(tid).use_key(RETRY_KEY, attempt=3)
    t.append(EVENTS_T, events(CRASH_EVENT_IDS, day=CRASH_DAY))
    t.append(ACCOUNTS_T, accounts(dict.fromkeys(CRASH_ACCOUNT_IDS, 5)))
    t.commit()


def _check_outcome(wh: Warehouse, point: str, tid: str, committed: bool, before: dict[str, pa.Table]) -> None:
    """Invariant 3 after recovery: committed -> visible in every table; else invisible and rolled back."""
    record = _record_of(wh, tid)
    info = wh.transaction_info(tid)
    now = _snapshot(wh)
    assert (record is not None) == committed
    if committed:
        assert record is not None and record["applied"] and info["state"] == "committed"
        assert wh.readable_csn() >= record["csn"]
        assert ids(now[EVENTS_T]) == sorted(ids(before[EVENTS_T]) + CRASH_EVENT_IDS)
        assert ids(now[ACCOUNTS_T]) == sorted(ids(before[ACCOUNTS_T]) + CRASH_ACCOUNT_IDS)
        for part in info["parts"]:  # every part it created is either its commit or a compensated attempt
            if part["role"] == "created":
                assert part["creation_csn"] in (record["csn"], ROLLBACK_CSN), part
        for attempt_ids in RETRY_IDS.values():
            assert not set(attempt_ids) & set(ids(now[EVENTS_T])), "a killed or retried attempt shows through"
    else:
        assert info["state"] == "rolled_back" and info["cleanup_done"]
        assert now == before, "a transaction that never committed changed what readers see"
        for part in info["parts"]:
            if part["role"] == "created":
                assert part["creation_csn"] == ROLLBACK_CSN, part
            else:  # its removal locks are released
                assert part["removal_csn"] is not None, part
        external = wh.runtime.oracle.external_log
        if external is not None:
            assert external.commit_csn(tid) is None
        if external is not None and point == crashpoints.COMMIT_MID_RECORD:
            # it died committing: recovery recorded an abort decision, so the dead committer's append
            # (had it only stalled, a zombie) can never land
            with pytest.raises(AbortDecidedError):
                external.append(LogEntry(tid, (EVENTS_T,), time.time()))


def _check_no_orphans(wh: Warehouse, root: Path | str) -> None:
    before = _snapshot(wh)
    report = wh.vacuum(0)
    after_vacuum = wh.recover()
    assert after_vacuum["orphan_dirs"] == 0 and after_vacuum["missing_files"] == [], after_vacuum
    parts = {f for f in storage_files(root) if not f.startswith(".iceberg/")}  # published metadata: not parts
    assert parts == visible_part_files(wh), f"orphan or missing files after vacuum ({report})"
    assert _snapshot(wh) == before, "vacuum changed visible data"
    with wh.runtime.catalog.read() as conn:
        assert part_records.garbage(conn, wh.readable_csn(), 100) == [], "garbage part rows left behind"


def _as_now(wh: Warehouse, table: str, rows: pa.Table) -> pa.Table:
    """`rows` of the table's first schema as its schema is now (a committed table change renamed `value` to
    `amount` and added nullable columns): renamed, and the added columns null."""
    now = wh.schema(table)
    rows = rows.rename_columns(["amount" if n == "value" and "amount" in now.names else n for n in rows.column_names])
    return pa.table({f.name: rows[f.name] if f.name in rows.column_names else pa.nulls(rows.num_rows, f.type)
                     for f in now})


def _check_usable(wh: Warehouse) -> None:
    """CSNs stay dense (no record lost or skipped) and a new transaction commits and is read back."""
    with wh.begin() as t:
        t.append(EVENTS_T, _as_now(wh, EVENTS_T, events([900])))
    csns = sorted(r["csn"] for r in wh.commit_log(limit=1000))
    assert csns == list(range(2, 2 + len(csns))), f"CSNs not dense after recovery: {csns}"
    assert wh.transaction_info(t.tid)["commit_csn"] == csns[-1] == wh.readable_csn()
    assert 900 in ids(wh.read(EVENTS_T))


def _prepare(wh: Warehouse, scenario: Scenario) -> None:
    _baseline(wh)
    if scenario.worker == "vacuum":
        _garbage_of_two_parts(wh)
    if scenario.worker == "compact":
        _small_parts(wh)


def _check_crashed(wh: Warehouse, point: str, scenario: Scenario, said: list[dict[str, Any]], root: Path | str,
                   last_before: int, parts_before: dict[str, int]) -> str | None:
    """The state the kill left (before recovery); waits for the leases recovery must see expired.
    Returns the killed transaction's tid (None for maintenance)."""
    tid = next((m["tid"] for m in said if "tid" in m), None)
    assert (tid is None) == (scenario.committed is None), said
    if scenario.worker == "vacuum":
        _check_vacuum_mid(wh)
    elif scenario.worker == "compact":
        _check_compact_before(wh, point, parts_before)
        for merge in _merges(wh):  # the killed merge's own lease must run out before recovery ends it
            _wait_for_lease_expiry(wh, merge["tid"])
    else:
        assert tid is not None
        _check_before_recovery(wh, point, tid, said, root, last_before)
        if not scenario.parent_txn:
            _wait_for_lease_expiry(wh, tid)
    return tid


def _check_recovered(wh: Warehouse, point: str, scenario: Scenario, tid: str | None,
                     before: dict[str, pa.Table]) -> None:
    """Invariant 3 for the killed transaction, or (maintenance) nothing any reader sees changed."""
    if scenario.worker == "compact":
        assert [m["state"] for m in _merges(wh)] == (
            ["rolled_back"] if point == crashpoints.COMPACT_AFTER_FILES else ["committed"])
    if tid is None:
        assert _snapshot(wh) == before
        return
    assert scenario.committed is not None
    _check_outcome(wh, point, tid, scenario.committed, before)


def _publisher(wh: Warehouse) -> Warehouse:
    """A handle of the same warehouse that publishes to Iceberg (the test's own handle does not)."""
    return Warehouse.open(catalog=wh.config.catalog_url, root=wh.config.root, publish="iceberg")


def _iceberg_progress(wh: Warehouse) -> dict[str, int]:
    """{table: the CSN its Iceberg table says it published} for the tables published at all (read only)."""
    from pyiceberg.exceptions import NoSuchTableError

    with _publisher(wh) as pub:
        catalog = pub.iceberg_catalog()
        found = {}
        for table in (EVENTS_T, ACCOUNTS_T):
            try:
                found[table] = int(catalog.load_table(table).properties.get("airflow-txn.csn", "0"))
            except NoSuchTableError:
                continue
        return found


def _check_published(wh: Warehouse) -> None:
    """publish.mid_run: the next publishing run catches every table up, and each reads through pyiceberg exactly
    what wh.read reads."""
    with _publisher(wh) as pub:
        done = pub.publish()
        assert done["errors"] == {}, done
        csn = pub.readable_csn()
        published = pub.published(csn)
        for table in (EVENTS_T, ACCOUNTS_T):
            scanned = pub.iceberg_catalog().load_table(table).scan(snapshot_id=published[table]["iceberg_snapshot_id"])
            names = wh.schema(table).names
            assert sorted(ids(scanned.to_arrow().select(names))) == sorted(ids(wh.read(table))), table
        assert _iceberg_progress(wh) == {EVENTS_T: csn, ACCOUNTS_T: csn}


def _check_lock_released(wh: Warehouse) -> None:
    """rollback.mid: the released lock lets a new transaction take the part."""
    try:
        with wh.begin() as t:
            t.update(ACCOUNTS_T, pc.field("id") == 1, {"balance": 5})
    except SerializationError as exc:
        pytest.fail(f"recovery did not release the killed rollback's removal lock: {exc}")
    assert ids(wh.read(ACCOUNTS_T).filter(pc.field("balance") == 5)) == [1]


def _cell(point: str, wh: Warehouse, spawn: Spawn, root: Path | str) -> dict[str, Any]:
    """One cell; returns what it saw, for the evidence record."""
    scenario = SCENARIOS[point]
    _prepare(wh, scenario)
    before, history, parts_before, last_before = _snapshot(wh), _history(wh), _parts_per_day(wh), _last_csn(wh)
    parent = wh.begin(label="crash-retry", lease_seconds=PARENT_LEASE_SECONDS) if scenario.parent_txn else None
    said = _run_to_crash(spawn, point, scenario.worker, *([parent.tid] if parent else []))
    tid = _check_crashed(wh, point, scenario, said, root, last_before, parts_before)
    report = wh.recover()
    assert report["missing_files"] == [], report
    assert report["orphan_dirs"] == (1 if point in ORPHAN_POINTS else 0), report
    now = _history(wh)
    if scenario.worker != "vacuum":  # only vacuum moves the retention horizon
        assert set(history) <= set(now), "a snapshot became unreadable"
    assert {c: h for c, h in history.items() if c in now} == {c: h for c, h in now.items() if c in history}, (
        "recovery changed what a past snapshot shows")
    if parent is not None:
        assert parent.state == "active", "recovery rolled back a transaction whose lease is valid"
        _finish_retry(wh, parent.tid)
    _check_recovered(wh, point, scenario, tid, before)
    if point == crashpoints.PUBLISH_MID_RUN:
        _check_published(wh)
    _check_no_orphans(wh, root)
    if point == crashpoints.ROLLBACK_MID:
        _check_lock_released(wh)
    _check_usable(wh)
    return {"scenario": scenario.worker, "committed": scenario.committed,
            "recovery": {k: v for k, v in report.items() if k != "missing_files"}}


@pytest.mark.slow
@pytest.mark.parametrize("round_", range(SOAK_ROUNDS), ids=lambda r: f"r{r}")
@pytest.mark.parametrize("point", crashpoints.ALL)
def test_crash_matrix_cell(point: str, round_: int, wh: Warehouse, spawn: Spawn, root: Path | str) -> None:
    catalog = "postgres" if wh.runtime.catalog.dialect == "postgresql" else wh.runtime.catalog.dialect
    storage = "" if wh.runtime.storage.local is not None else f"|{wh.runtime.storage.location.scheme}"
    case = f"{point}|{catalog}|{wh.runtime.oracle.name}{storage}"
    started = time.monotonic()
    try:
        assert point in SCENARIOS, f"crash point {point} has no scenario in the crash matrix: add one"
        details = _cell(point, wh, spawn, root)
    except BaseException as exc:
        _cells.append((case, False))
        evidence.record("crash_matrix", case, False, round=round_, error=f"{type(exc).__name__}: {exc}"[:2000],
                        seconds=round(time.monotonic() - started, 2))
        raise
    _cells.append((case, True))
    evidence.record("crash_matrix", case, True, round=round_, seconds=round(time.monotonic() - started, 2),
                    **details)


@pytest.mark.slow
def test_reader_in_another_process_applies_killed_committers_records(wh: Warehouse, spawn: Spawn) -> None:
    """Two committers die right after their records; a reader process's read / wait_for_csn applies them."""
    if wh.runtime.oracle.external_log is None:
        pytest.skip("SQL oracle: a commit record and its apply are one catalog transaction, never apart")
    _baseline(wh)
    before = _snapshot(wh)
    records = []
    for _ in range(2):
        said = _run_to_crash(spawn, crashpoints.COMMIT_AFTER_RECORD, "commit")
        tid = next(m["tid"] for m in said if "tid" in m)
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


# -- statements through the crash points of a transaction's life ------------------------------------------
# A kind of statement (txn_worker.STATEMENTS: a MERGE rewriting a part and inserting in sales.events, a MERGE that
# deletes what its source lacks in sales.accounts; table changes, a rename and added columns, with rows under
# them) staged in both crash tables, the worker killed at each point of
# STATEMENT_POINTS: after recovery the tables read exactly as before (it never committed) or exactly as
# STATEMENT_RESULTS[kind] (it committed, a retry's attempt 3 included), no snapshot changed, no orphan file stays,
# every removal lock it took is released, and CSNs stay dense. A new kind (a schema change) is a function in
# txn_worker.STATEMENTS and its committed tables here.
STATEMENT_POINTS: dict[str, tuple[str, bool]] = {
    crashpoints.STAGE_AFTER_FILES: ("commit", False),  # the first merge's rewritten and inserted files written
    crashpoints.STAGE_RETRY_AFTER_FILES: ("retry", True),  # attempt 2's files written, attempt 1 still staged
    crashpoints.STAGE_RETRY_MID_REGISTER: ("retry", True),  # attempt 1 compensated inside the killed registration
    crashpoints.COMMIT_BEFORE_RECORD: ("commit", False),
    crashpoints.COMMIT_MID_RECORD: ("commit", False),
    crashpoints.COMMIT_AFTER_RECORD: ("commit", True),
    crashpoints.COMMIT_MID_APPLY: ("commit", True),
    crashpoints.ROLLBACK_MID: ("rollback", False),
}
"""point -> (how the worker ends the transaction, whether it is committed after recovery)."""
Rows = dict[str, list[tuple[Any, ...]]]
STATEMENT_RESULTS: dict[str, Rows] = {
    "merge": {EVENTS_T: [(1, "2024-01-01", 7.0), (2, "2024-01-01", 1.0),
                         *((i, CRASH_DAY, 7.0) for i in CRASH_EVENT_IDS)],
              ACCOUNTS_T: sorted([(1, 7), *((i, 7) for i in CRASH_ACCOUNT_IDS)])},
    "table_change": {EVENTS_T: [(1, "2024-01-01", 1.0, None), (2, "2024-01-01", 1.0, None),
                                *((i, CRASH_DAY, 7.0, "n7") for i in CRASH_EVENT_IDS)],
                     ACCOUNTS_T: sorted([(1, 10, "std"), (2, 20, "std"),
                                         *((i, 7, "gold") for i in CRASH_ACCOUNT_IDS)])},
}
"""The crash tables once the statement committed (from _baseline's), value STATEMENT_VALUES[2]."""


def _rows(wh: Warehouse, **at: Any) -> Rows:
    return {name: sorted(tuple(r.values()) for r in wh.read(name, **at).to_pylist()) for name in (EVENTS_T, ACCOUNTS_T)}


def test_every_statement_has_its_result() -> None:
    assert set(STATEMENT_RESULTS) == set(STATEMENTS)
    assert STATEMENT_VALUES[2] == 7, "STATEMENT_RESULTS are written for value 7"


def _statement_before_recovery(wh: Warehouse, point: str, tid: str) -> None:
    """The half-done state the point names: nothing registered, attempt 1 only, no record, or all committed."""
    info, record = wh.transaction_info(tid), _record_of(wh, tid)
    external = wh.runtime.oracle.external_log is not None
    if point == crashpoints.STAGE_AFTER_FILES:
        assert info["state"] == "active" and info["parts"] == [] and _unregistered(wh), info
    elif point in RETRY_POINTS:
        mine = [p for p in _parts(wh) if p.version.creation_tid == tid]
        assert info["state"] == "active" and record is None and mine, info
        assert {p.stage_attempt for p in mine} == {1}, mine
    elif point in (crashpoints.COMMIT_BEFORE_RECORD, crashpoints.COMMIT_MID_RECORD):
        assert info["state"] == "active" and record is None, info
    elif point in (crashpoints.COMMIT_AFTER_RECORD, crashpoints.COMMIT_MID_APPLY):
        assert info["state"] == "committed" and record is not None and record["applied"] != external, record
    else:
        assert point == crashpoints.ROLLBACK_MID and info["state"] == "rolled_back" and record is None, info


ORACLE_POINTS = (crashpoints.COMMIT_BEFORE_RECORD, crashpoints.COMMIT_MID_RECORD, crashpoints.COMMIT_AFTER_RECORD,
                 crashpoints.COMMIT_MID_APPLY)
"""The statement points where the oracle allocates, records or applies the commit: their statement cells run with
both oracles (ZooKeeper's external log differs from the SQL oracle exactly there); the other points (files written, a
retry's registration, the rollback) run on the object-store root instead, where what a statement leaves behind is
objects."""


def _statement_combinations() -> list[Any]:
    """(point, combination) of the statement cells: every point on both catalogs with the SQL oracle; the commit points
    (ORACLE_POINTS) also with ZooKeeper on both catalogs (PostgreSQL's on the s3:// root), the others also on the s3://
    root (with ZooKeeper: the production pairing). The cells left out repeat
    a cell of this list for the same kind of statement in what they check: before the commit the oracle is only
    asked for the abort decision of recovery's rollback, and the commit itself writes no file. Every crash point still
    runs on every combination (test_crash_matrix_cell), and every statement at every point on both catalogs."""
    out = []
    for point in STATEMENT_POINTS:
        wanted = {"sqlite-sql", "postgres-sql"} | (
            {"sqlite-zookeeper", PRODUCTION} if point in ORACLE_POINTS else {PRODUCTION})
        out += [pytest.param(point, c.values[0], id=f"{c.id}-{point}", marks=c.marks) for c in COMBINATIONS
                if c.id in wanted]
    return out


def test_every_statement_point_runs_on_both_catalogs_and_its_oracles_or_storage() -> None:
    """The statement cells' combinations: no point dropped, each on both catalogs, each with what it exercises."""
    ran: dict[str, set[str]] = {}
    for param in _statement_combinations():
        point, combination = param.values
        ran.setdefault(point, set()).add(combination)
    assert set(ran) == set(STATEMENT_POINTS)
    for point, combinations in ran.items():
        assert {"sqlite", "postgres"} <= combinations, (point, combinations)
        assert {"sqlite-zookeeper", PRODUCTION} <= combinations if point in ORACLE_POINTS else (
            PRODUCTION in combinations), (point, combinations)


@pytest.mark.slow
@pytest.mark.parametrize("round_", range(SOAK_ROUNDS), ids=lambda r: f"r{r}")
@pytest.mark.parametrize("kind", sorted(STATEMENTS))
@pytest.mark.parametrize(("point", "catalog_url"), _statement_combinations(), indirect=["catalog_url"])
def test_a_statement_killed_at_a_crash_point_recovers_all_or_nothing(
        point: str, kind: str, round_: int, wh: Warehouse, spawn: Spawn, root: Path | str) -> None:
    catalog = "postgres" if wh.runtime.catalog.dialect == "postgresql" else wh.runtime.catalog.dialect
    storage = "" if wh.runtime.storage.local is not None else f"|{wh.runtime.storage.location.scheme}"
    case = f"{kind} @ {point}|{catalog}|{wh.runtime.oracle.name}{storage}"
    started = time.monotonic()
    try:
        _statement_cell(point, kind, wh, spawn, root)
    except BaseException as exc:
        _cells.append((case, False))
        evidence.record("crash_matrix", case, False, round=round_, error=f"{type(exc).__name__}: {exc}"[:2000],
                        seconds=round(time.monotonic() - started, 2))
        raise
    _cells.append((case, True))
    evidence.record("crash_matrix", case, True, round=round_, seconds=round(time.monotonic() - started, 2),
                    statement=kind,
                    committed=STATEMENT_POINTS[point][1])


def _statement_cell(point: str, kind: str, wh: Warehouse, spawn: Spawn, root: Path | str) -> None:
    ending, committed = STATEMENT_POINTS[point]
    _baseline(wh)
    before, history = _rows(wh), _history(wh)
    parent = wh.begin(label="crash-retry", lease_seconds=PARENT_LEASE_SECONDS) if ending == "retry" else None
    said = _run_to_crash(spawn, point, "statement", kind, ending, *([parent.tid] if parent else []))
    tid = next(m["tid"] for m in said if "tid" in m)
    _statement_before_recovery(wh, point, tid)
    if parent is None:
        _wait_for_lease_expiry(wh, tid)
    report = wh.recover()
    assert report["missing_files"] == [], report
    assert bool(report["orphan_dirs"]) == (point in (crashpoints.STAGE_AFTER_FILES, *RETRY_POINTS)), report
    assert {c: h for c, h in _history(wh).items() if c in history} == history, "recovery changed a past snapshot"
    if parent is not None:
        assert parent.state == "active", "recovery rolled back a transaction whose lease is valid"
        STATEMENTS[kind](wh.attach(parent.tid).use_key(RETRY_KEY, attempt=3), STATEMENT_VALUES[2])
        parent.commit()
    info = wh.transaction_info(tid)
    assert info["state"] == ("committed" if committed else "rolled_back"), info
    assert _rows(wh) == (STATEMENT_RESULTS[kind] if committed else before)
    if not committed:
        assert info["cleanup_done"] and all(p["creation_csn"] == ROLLBACK_CSN if p["role"] == "created"
                                            else p["removal_csn"] is not None for p in info["parts"]), info
    _check_no_orphans(wh, root)
    value = "amount" if "amount" in wh.schema(EVENTS_T).names else "value"  # renamed by a committed table change
    with wh.begin() as t:  # every removal lock released: a statement rewriting every part of both tables commits
        t.update(EVENTS_T, pc.field("id") >= 0, {value: 0.0})
        t.update(ACCOUNTS_T, pc.field("id") >= 0, {"balance": 0})
    _check_usable(wh)
