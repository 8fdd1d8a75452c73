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

from sqlalchemy import Connection, select

from airflow_txn import apply, commit_log, crashpoints, part_records, rollback, table_registry, txn_records
from airflow_txn.catalog import schema
from airflow_txn.errors import LeaseExpiredError, SerializationError, StorageError
from airflow_txn.partitioning import WHOLE_TABLE
from airflow_txn.runtime import Runtime

_rs = schema.read_set.c


def commit(rt: Runtime, tid: str) -> int:
    """Commit `tid`; return its CSN (a read-only transaction returns its snapshot CSN)."""
    external = rt.oracle.external_log
    if external is not None:  # ZooKeeper: the record lives outside the catalog (commit_external.py)
        from airflow_txn.commit_external import commit_external

        return commit_external(rt, tid, external)
    try:
        _check(rt, tid)
        crashpoints.hit(crashpoints.COMMIT_BEFORE_RECORD)
        csn, wrote = _record(rt, tid)
    except (LeaseExpiredError, SerializationError) as exc:
        rollback.rollback(rt, tid, reason=f"commit failed: {exc}")
        raise
    if not wrote:
        return csn
    crashpoints.hit(crashpoints.COMMIT_AFTER_RECORD)
    apply.apply_record(rt, csn, tid)
    apply.apply_pending(rt, up_to=csn)
    return csn


def _check(rt: Runtime, tid: str) -> None:
    with rt.catalog.read() as conn:
        txn_records.require_usable(txn_records.fetch(conn, tid))
        staged = part_records.staged_created(conn, tid)
        directories = {tid_: table_registry.by_id(conn, tid_).directory for tid_ in {t for t, _ in staged}}
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


def _record(rt: Runtime, tid: str) -> tuple[int, bool]:
    """Step 2. Returns (csn, wrote_anything)."""
    with rt.catalog.write() as conn:
        row = txn_records.fetch(conn, tid, rt.catalog)
        txn_records.require_usable(row)
        table_ids = part_records.tables_touched(conn, tid)
        if not table_ids:
            txn_records.cas_state(conn, tid, txn_records.COMMITTED, commit_csn=None)
            return row.snapshot_csn, False
        csn = rt.oracle.next_csn(conn)
        if row.isolation == "serializable":
            _validate_read_set(conn, tid, row.snapshot_csn)
        names = [(t, table_registry.by_id(conn, t).name.qualified) for t in table_ids]
        commit_log.write_record(conn, csn, tid, names)
        if not txn_records.cas_state(conn, tid, txn_records.COMMITTED, commit_csn=csn):
            raise AssertionError(f"transaction {tid} changed state under its row lock")
        return csn, True


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
