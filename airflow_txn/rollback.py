"""Rollback (invariant 5): a metadata-only compare-and-swap to rolled_back, then per-table stamps.

Step 1 (the decision) flips state active -> rolled_back; from then on nothing of the transaction
can become visible. Step 2 stamps RollbackCSN on its created parts and releases its removal locks,
one table per catalog transaction, and finally sets cleanup_done. A crash between the steps is
finished by recovery. Files are never touched here: vacuum deletes them later.
"""

from __future__ import annotations

from airflow_txn import crashpoints, part_records, txn_records
from airflow_txn.errors import TransactionClosedError
from airflow_txn.runtime import Runtime


def rollback(rt: Runtime, tid: str, reason: str | None = None) -> bool:
    """Roll back `tid`; False when it was already rolled back. Committed transactions cannot be."""
    with rt.catalog.write() as conn:
        row = txn_records.fetch(conn, tid, rt.catalog)
        if row.state == txn_records.COMMITTED:
            raise TransactionClosedError(f"transaction {tid} is committed (CSN {row.commit_csn}); it cannot roll back")
        flipped = row.state == txn_records.ACTIVE and txn_records.cas_state(
            conn, tid, txn_records.ROLLED_BACK, failed_reason=row.failed_reason or reason
        )
        if not flipped and row.cleanup_done:
            return False
    finish(rt, tid)
    return flipped


def finish(rt: Runtime, tid: str) -> None:
    """Step 2 of rollback; idempotent, so recovery can run it again after a crash."""
    with rt.catalog.read() as conn:
        tables = part_records.pending_tables(conn, tid)
    for index, table_id in enumerate(tables):
        with rt.catalog.write() as conn:
            part_records.stamp_rollback(conn, tid, table_id)
        if index == 0:
            crashpoints.hit(crashpoints.ROLLBACK_MID)
    with rt.catalog.write() as conn:
        txn_records.set_cleanup_done(conn, tid)
