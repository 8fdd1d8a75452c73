"""The commit protocol (invariant 3), as small named steps.

1. check      the transaction is usable and every staged part's files are present
2. record     in ONE catalog transaction: lock the row, allocate the CSN (oracle), validate the
              serializable read set, write the commit record, flip state to committed.
              The record is the commit point.
3. apply      stamp the CSN on the parts, table by table; mark the record applied
4. catch up   apply any older record still pending, so the committer reads its own commit
A failure before step 2 leaves the transaction active (or rolls it back when the failure means it
can never commit); after step 2 the commit stands and anyone may finish step 3.
"""

from __future__ import annotations

import time

from sqlalchemy import Connection, select

from airflow_txn import (
    apply,
    commit_log,
    crashpoints,
    logs,
    metrics,
    part_records,
    rollback,
    table_registry,
    txn_records,
)
from airflow_txn.catalog import schema
from airflow_txn.errors import LeaseExpiredError, SerializationError, StorageError
from airflow_txn.partitioning import WHOLE_TABLE
from airflow_txn.runtime import Runtime

log = logs.get_logger(__name__)

_rs = schema.read_set.c


def commit(rt: Runtime, tid: str) -> int:
    """Commit `tid`; return its CSN (a read-only transaction returns its snapshot CSN)."""
    external = rt.oracle.external_log
    if external is not None:  # ZooKeeper: the record lives outside the catalog (commit_external.py)
        from airflow_txn.commit_external import commit_external

        return commit_external(rt, tid, external)
    started = time.perf_counter()
    try:
        names = _check(rt, tid)
        crashpoints.hit(crashpoints.COMMIT_BEFORE_RECORD)
        csn, table_ids = _write_record(rt, tid, names)
    except (LeaseExpiredError, SerializationError) as exc:
        failed(tid, exc)
        rollback.rollback(rt, tid, reason=f"commit failed: {exc}")
        raise
    if not table_ids:
        return csn
    crashpoints.hit(crashpoints.COMMIT_AFTER_RECORD)
    crashpoints.hit(crashpoints.COMMIT_AFTER_MIRROR)  # the SQL record is the catalog row: same state
    if apply.apply_record(rt, csn, tid, table_ids):  # an older record still unapplied: catch up
        apply.apply_pending(rt, up_to=csn)
    committed(rt, tid, csn, started)
    return csn


def committed(rt: Runtime, tid: str, csn: int, started: float) -> None:
    """Report a commit that is applied: its log line and its latency (from `started`, perf_counter)."""
    elapsed_ms = (time.perf_counter() - started) * 1000.0
    metrics.timing(metrics.COMMIT_LATENCY, elapsed_ms,
                   {"oracle": "sql" if rt.oracle.external_log is None else "zookeeper"})
    log.info("committed in %.1f ms", elapsed_ms, extra=logs.fields(tid, csn))


def failed(tid: str, exc: Exception) -> None:
    """Report a commit that cannot succeed (it is rolled back next); conflicts are counted."""
    if isinstance(exc, SerializationError):
        metrics.incr(metrics.CONFLICTS)
    log.warning("commit failed: %s", exc, extra=logs.fields(tid))


def _check(rt: Runtime, tid: str) -> dict[int, str]:
    """Step 1; returns {table id: name} of the tables with staged parts (a table never changes once created)."""
    with rt.catalog.read() as conn:
        txn_records.require_usable(txn_records.fetch(conn, tid))
        staged = part_records.staged_created(conn, tid)
        known = table_registry.names_and_directories(conn, sorted({t for t, _ in staged}))
        directories = {t: directory for t, (_, directory) in known.items()}
    missing = [
        path
        for table_id, part in staged
        for path in rt.storage.missing_files(directories[table_id], part.path, part.files)
    ]
    if missing:
        with rt.catalog.write() as conn:
            txn_records.mark_failed(conn, tid, f"{len(missing)} staged file(s) missing, e.g. {missing[0]}")
        raise StorageError(
            f"transaction {tid} cannot commit: {len(missing)} staged file(s) are missing, e.g. {missing[0]}; "
            "roll it back and run the job again"
        )
    return {t: name for t, (name, _) in known.items()}


def _record(rt: Runtime, tid: str) -> tuple[int, bool]:
    """Step 2. Returns (csn, wrote_anything)."""
    csn, table_ids = _write_record(rt, tid)
    return csn, bool(table_ids)


def _write_record(rt: Runtime, tid: str, names_known: dict[int, str] | None = None) -> tuple[int, list[int]]:
    """Step 2. Returns (csn, the tables the record names); no tables: read-only, committed at its snapshot.
    `names_known`: table names the caller already has (step 1), so only the others are looked up."""
    with rt.catalog.write() as conn:
        row = txn_records.fetch(conn, tid, rt.catalog)
        txn_records.require_usable(row)
        table_ids = part_records.tables_touched(conn, tid)
        if not table_ids:
            txn_records.cas_state(conn, tid, txn_records.COMMITTED, commit_csn=None)
            return row.snapshot_csn, []
        known = dict(names_known or {})
        missing = [t for t in table_ids if t not in known]  # tables with only removals (overwrite, delete)
        if missing:  # before the counter lock: held less
            known.update({t: name for t, (name, _) in table_registry.names_and_directories(conn, missing).items()})
        names = [(t, known[t]) for t in table_ids]
        csn = rt.oracle.next_csn(conn)
        crashpoints.hit(crashpoints.COMMIT_MID_RECORD)
        if row.isolation == "serializable":
            _validate_read_set(conn, tid, row.snapshot_csn)
        commit_log.write_record(conn, csn, tid, names)
        if not txn_records.cas_state(conn, tid, txn_records.COMMITTED, commit_csn=csn):
            raise AssertionError(f"transaction {tid} changed state under its row lock")
        return csn, table_ids


def _validate_read_set(conn: Connection, tid: str, snapshot: int) -> None:
    """Serializable: abort if a transaction committed after our snapshot wrote anything we read."""
    reads: dict[int, set[str]] = {}
    for r in conn.execute(select(_rs.table_id, _rs.partition_key).where(_rs.tid == tid)):
        reads.setdefault(int(r.table_id), set()).add(str(r.partition_key))
    for table_id, other in commit_log.commits_after(conn, list(reads), snapshot):
        if other == tid:
            continue
        keys = reads[table_id]
        if WHOLE_TABLE in keys or keys & part_records.written_partitions(conn, other, table_id):
            name = table_registry.by_id(conn, table_id).name
            raise SerializationError(
                f"serializable transaction {tid} read {name}, which transaction {other} changed after "
                f"snapshot {snapshot}; retry the transaction"
            )
