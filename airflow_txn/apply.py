"""Applying commit records: stamping a committed transaction's CSN on its parts, table by table.

Seed 003's commit-then-apply: the record makes a transaction durable, applying makes it readable.
Any process may apply any record, any number of times (every step is idempotent), so a commit
never depends on its committer surviving. The watermark only passes a record once it is applied.
"""

from __future__ import annotations

import logging

from sqlalchemy import select

from airflow_txn import commit_log, crashpoints, log_mirror, part_records
from airflow_txn.catalog import schema
from airflow_txn.errors import OracleUnavailableError
from airflow_txn.runtime import Runtime

log = logging.getLogger(__name__)

_tc = schema.table_commits.c


def apply_record(rt: Runtime, csn: int, tid: str) -> None:
    """Stamp every table of one record (one catalog transaction each), then mark the record applied."""
    with rt.catalog.read() as conn:
        table_ids = [int(r.table_id) for r in conn.execute(select(_tc.table_id).where(_tc.csn == csn))]
    for index, table_id in enumerate(sorted(table_ids)):
        with rt.catalog.write() as conn:
            part_records.stamp_commit(conn, tid, table_id, csn)
        if index == 0:
            crashpoints.hit(crashpoints.COMMIT_MID_APPLY)
    with rt.catalog.write() as conn:
        commit_log.mark_applied(conn, csn)


def apply_pending(rt: Runtime, up_to: int | None = None) -> int:
    """Apply every unapplied record with CSN <= up_to (all when None), oldest first; return how many.
    With an external log (ZooKeeper) its records past the catalog's mirrored prefix are mirrored first."""
    try:
        log_mirror.catch_up(rt, up_to)
    except OracleUnavailableError as exc:  # what the catalog already holds can still be applied
        log.warning("cannot read the commit log to catch up: %s", exc)
    done = 0
    while True:
        with rt.catalog.read() as conn:
            pending = commit_log.unapplied(conn, up_to)
        if not pending:
            return done
        for record in pending:
            apply_record(rt, record.csn, record.tid)
            done += 1


def readable_csn(rt: Runtime) -> int:
    with rt.catalog.read() as conn:
        return commit_log.readable_csn(conn, rt.oracle)
