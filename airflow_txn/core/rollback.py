"""Rollback (invariant 5): a metadata-only compare-and-swap to rolled_back, then per-table stamps.

Step 1 (the decision) flips state active -> rolled_back; from then on nothing of the transaction
can become visible. Step 2 stamps RollbackCSN on its created parts and releases its removal locks,
one table per catalog transaction, and finally sets cleanup_done. A crash between the steps is
finished by recovery. Files are never touched here: vacuum deletes them later.
"""

from __future__ import annotations

import functools

from sqlalchemy import Connection

from airflow_txn.catalog import part_records, table_versions, txn_records
from airflow_txn.core import apply, crashpoints, versions
from airflow_txn.core.runtime import Runtime
from airflow_txn.errors import TransactionClosedError, TxnError
from airflow_txn.telemetry import logs, metrics

log = logs.get_logger(__name__)


def rollback(rt: Runtime, tid: str, reason: str | None = None) -> bool:
    """Roll back `tid`; False when it was already rolled back. Committed transactions cannot be.

    A transaction `committing` through an external log (ZooKeeper) may already have its record: the
    rollback first records an abort decision there (outside any catalog transaction); if a commit
    decision exists instead, the commit stands, is rolled forward, and TransactionClosedError says so.
    """
    aborted = False
    for _ in range(3):  # at most: find it committing, record the abort, then flip
        with rt.catalog.write() as conn:
            row = txn_records.fetch(conn, tid, rt.catalog)
            if row.state == txn_records.COMMITTED:
                raise TransactionClosedError(
                    f"transaction {tid} is committed (CSN {row.commit_csn}); it cannot roll back"
                )
            if row.state != txn_records.COMMITTING or aborted:
                flipped = row.state in txn_records.OPEN_STATES and txn_records.cas_state(
                    conn, tid, txn_records.ROLLED_BACK, from_state=row.state,
                    failed_reason=row.failed_reason or reason,
                )
                if not flipped and row.cleanup_done:
                    return False
                break
        aborted = _decide_abort(rt, tid)
    else:
        raise AssertionError(f"transaction {tid} stayed committing after its abort decision")
    if flipped:
        metrics.incr(metrics.ROLLBACKS)
        log.info("rolled back: %s", row.failed_reason or reason or "no reason given", extra=logs.fields(tid))
    finish(rt, tid)
    return flipped


def _decide_abort(rt: Runtime, tid: str) -> bool:
    """Record the abort decision in the external log; roll forward and refuse if it committed."""
    external = rt.oracle.external_log
    if external is None:
        raise TxnError(f"transaction {tid} was committing through an external commit log (ZooKeeper): "
                       "open the warehouse with that oracle to settle it")
    if external.decide_abort(tid):
        return True
    apply.apply_pending(rt)
    raise TransactionClosedError(f"transaction {tid} is committed (its commit record exists); it cannot roll back")


def _stamp(conn: Connection, tid: str, table_id: int) -> None:
    part_records.stamp_rollback(conn, tid, table_id)
    table_versions.stamp_rollback(conn, tid, table_id)


def finish(rt: Runtime, tid: str) -> None:
    """Step 2 of rollback; idempotent, so recovery can run it again after a crash."""
    with rt.catalog.read() as conn:
        tables = versions.pending_tables(conn, tid)
    for index, table_id in enumerate(tables):
        rt.catalog.write_retrying(functools.partial(_stamp, tid=tid, table_id=table_id), "rolling back a transaction")
        if index == 0:
            crashpoints.hit(crashpoints.ROLLBACK_MID)
    with rt.catalog.write() as conn:
        txn_records.set_cleanup_done(conn, tid)
    log.debug("rollback stamps done on %d table(s)", len(tables), extra=logs.fields(tid))
