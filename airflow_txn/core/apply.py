"""Applying commit records: stamping a committed transaction's CSN on its parts, table by table.

Commit then apply (docs/DESIGN.md): the record makes a transaction durable, applying makes it readable.
Any process may apply any record, any number of times (every step is idempotent), so a commit
never depends on its committer surviving. The watermark only passes a record once it is applied.
With an external log (ZooKeeper) every commit is applied here after its record; the SQL oracle
stamps in the record's own catalog transaction (commit.py) and comes here only to catch up on a
record left unapplied (by an older airflow_txn, or a tool that wrote the record alone).
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection

from airflow_txn.catalog import commit_log, part_records, table_versions
from airflow_txn.core import crashpoints, log_mirror
from airflow_txn.core.runtime import Runtime
from airflow_txn.errors import OracleUnavailableError
from airflow_txn.telemetry import logs, metrics

log = logs.get_logger(__name__)


def apply_record(rt: Runtime, csn: int, tid: str, table_ids: Sequence[int] | None = None,
                 versions: bool = True) -> bool:
    """Stamp every table of one record: the first table in one catalog transaction, the others in a
    second that also marks the record applied (a single table: one transaction), so a crash between
    them leaves some tables stamped and others not (commit.mid_apply), as recovery must handle.
    Returns whether the watermark may still be below the record: an older record is unapplied, or
    (external log) not yet mirrored. `table_ids`: the record's tables, when the caller knows them
    (saves a catalog read); `versions=False`: the caller read, once the transaction was committing (so
    could stage nothing more), that no version of a schema names it: none to stamp."""
    if table_ids is None:
        with rt.catalog.read() as conn:
            table_ids = commit_log.tables_of(conn, csn)
    ordered = sorted(table_ids)
    if len(ordered) > 1:
        first = ordered[0]
        rt.catalog.write_retrying(lambda conn: _stamp(conn, tid, first, csn, versions), "applying a commit")
        crashpoints.hit(crashpoints.COMMIT_MID_APPLY)
        ordered = ordered[1:]
    behind = rt.catalog.write_retrying(lambda conn: _stamp_and_check(rt, conn, tid, ordered, csn, versions),
                                       "applying a commit")
    log.debug("applied to %d table(s)", len(table_ids), extra=logs.fields(tid, csn))
    if metrics.enabled():  # one more catalog read, only when someone collects the gauge
        report_lag(rt)
    return behind


def _stamp_and_check(rt: Runtime, conn: Connection, tid: str, table_ids: Sequence[int], csn: int,
                     versions: bool) -> bool:
    """The last tables of a record stamped, the record marked applied; whether the watermark may lag."""
    for table_id in table_ids:
        _stamp(conn, tid, table_id, csn, versions)
    commit_log.mark_applied(conn, csn)
    # The oracle's last CSN (with an external log, the mirrored prefix) and the unapplied records, read in that order
    # or in one statement (one snapshot): the other order let a record mirrored between the two reads pass unseen
    # (commit returned before its CSN was readable; test_commit_returns_only_once_its_csn_is_readable_...). The
    # record is applied in this catalog transaction, so the watermark is below it only if the prefix or an older
    # record is.
    return rt.oracle.readable_csn(conn) < csn


def _stamp(conn: Connection, tid: str, table_id: int, csn: int, versions: bool) -> None:
    """One table of a record: its CSN on the parts and the versions of the table's schema the transaction staged
    (docs/DESIGN.md, D27: versions are stamped with the parts, in the same catalog transaction; `versions=False`:
    the committer knows there are none)."""
    part_records.stamp_commit(conn, tid, table_id, csn)
    if versions:
        table_versions.stamp_commit(conn, tid, table_id, csn)


def report_lag(rt: Runtime) -> None:
    """Gauge airflow_txn.watermark_lag: committed CSNs not yet readable."""
    with rt.catalog.read() as conn:
        last = rt.oracle.last_csn(conn)
        lag = last - commit_log.readable_csn(conn, last)
    metrics.gauge(metrics.WATERMARK_LAG, max(0, lag))


def apply_pending(rt: Runtime, up_to: int | None = None) -> int:
    """Apply every unapplied record with CSN <= up_to (all when None), oldest first; return how many.
    With an external log (ZooKeeper) its records past the catalog's mirrored prefix are mirrored first."""
    try:
        log_mirror.catch_up(rt, up_to)
    except OracleUnavailableError as exc:  # what the catalog already holds can still be applied
        log.warning("cannot read the commit log to catch up: %s", exc, extra=logs.fields(csn=up_to))
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
        return rt.oracle.readable_csn(conn)
