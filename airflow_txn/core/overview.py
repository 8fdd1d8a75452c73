"""Read-only summaries for operators (the CLI's `tables`, `watermark` and `doctor`): what a table holds at
a snapshot, how far the readable watermark trails the oracle, and what recovery would have to do.

Nothing here writes to the catalog or to storage; every figure is one aggregate query.
"""

from __future__ import annotations

from airflow_txn.catalog import commit_log, part_records, table_registry, txn_records
from airflow_txn.core import versions
from airflow_txn.core.runtime import Runtime
from airflow_txn.errors import OracleUnavailableError
from airflow_txn.model.results import TableStats, WatermarkInfo


def table_summary(rt: Runtime, name: str, snapshot: int) -> TableStats:
    """Partitioning, last commit, and the visible parts, rows and bytes of table `name` at `snapshot` (the table the
    name meant there, as a read resolves it: a renamed table's old name only before the rename)."""
    with rt.catalog.read() as conn:
        info = versions.table_at(conn, table_registry.get(conn, name), None, snapshot)
        parts, rows, size = part_records.visible_totals(conn, info.id, snapshot)
        last = commit_log.last_commit_csn(conn, info.id, snapshot)
    return TableStats(table=info.name.qualified, partition_by=list(info.partition_by), last_commit_csn=last,
                      parts=int(parts), rows=int(rows), bytes=int(size), csn=snapshot)


def watermark(rt: Runtime) -> WatermarkInfo:
    """The readable CSN, the oracle's latest CSN and the lag between them.

    SQL oracle: the latest CSN is the last one allocated (ahead of the watermark while records are
    being applied). ZooKeeper: the last CSN in the log, which may not be mirrored into the catalog
    yet; if ZooKeeper cannot be reached, `oracle_csn` and `lag` are None and `oracle_error` says why
    (readers do not need ZooKeeper, so the watermark itself is still known).
    """
    with rt.catalog.read() as conn:
        readable = rt.oracle.readable_csn(conn)
        allocated = rt.oracle.last_csn(conn)
    name = rt.oracle.name
    external = rt.oracle.external_log
    if external is None:
        return WatermarkInfo(readable_csn=readable, oracle=name, oracle_csn=allocated, lag=max(0, allocated - readable))
    try:
        logged = external.last_logged_csn()
    except OracleUnavailableError as exc:
        return WatermarkInfo(readable_csn=readable, oracle=name, oracle_csn=None, mirrored_csn=allocated, lag=None,
                             oracle_error=str(exc))
    return WatermarkInfo(readable_csn=readable, oracle=name, oracle_csn=logged, mirrored_csn=allocated,
                         lag=max(0, logged - readable))


def recovery_backlog(rt: Runtime, now: float | None = None) -> dict[str, int]:
    """What `recover` would do now: expired open transactions, unfinished rollbacks, unapplied records
    (and, with ZooKeeper, log records not mirrored into the catalog; -1 if ZooKeeper cannot be reached)."""
    with rt.catalog.read() as conn:
        expired = txn_records.count_expired(conn, now)  # None: leases are judged by the catalog's clock
        unfinished = txn_records.count_unfinished_rollbacks(conn)
        unapplied = commit_log.count_unapplied(conn)
        mirrored = rt.oracle.last_csn(conn)
    out = {"expired_transactions": int(expired), "unfinished_rollbacks": int(unfinished),
           "unapplied_records": int(unapplied)}
    external = rt.oracle.external_log
    if external is not None:
        try:
            out["unmirrored_records"] = max(0, external.last_logged_csn() - mirrored)
        except OracleUnavailableError:
            out["unmirrored_records"] = -1
    return out
