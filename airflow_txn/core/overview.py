"""Read-only summaries for operators (the CLI's `tables`, `watermark` and `doctor`): what a table holds at
a snapshot, how far the readable watermark trails the oracle, and what recovery would have to do.

Nothing here writes to the catalog or to storage; every figure is one aggregate query.
"""

from __future__ import annotations

from sqlalchemy import func, select

from airflow_txn.catalog import commit_log, schema, table_registry, txn_records
from airflow_txn.catalog.clock import catalog_now
from airflow_txn.core.results import TableStats, WatermarkInfo
from airflow_txn.core.runtime import Runtime
from airflow_txn.core.visibility import visible_clause
from airflow_txn.errors import OracleUnavailableError

_p = schema.parts.c
_t = schema.transactions.c
_log = schema.commit_log.c


def table_summary(rt: Runtime, name: str, snapshot: int) -> TableStats:
    """Partitioning, last commit, and the visible parts, rows and bytes of table `name` at `snapshot`."""
    with rt.catalog.read() as conn:
        info = table_registry.get(conn, name)
        parts, rows, size = conn.execute(
            select(func.count(), func.coalesce(func.sum(_p.row_count), 0), func.coalesce(func.sum(_p.size_bytes), 0))
            .where(_p.table_id == info.id, visible_clause(None, snapshot))
        ).one()
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
        readable = commit_log.readable_csn(conn, rt.oracle)
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
    at = catalog_now() if now is None else now  # leases are judged by the catalog's clock
    with rt.catalog.read() as conn:
        expired = conn.execute(
            select(func.count()).where(_t.state.in_(txn_records.OPEN_STATES), _t.lease_deadline < at)
        ).scalar_one()
        unfinished = conn.execute(
            select(func.count()).where(_t.state == txn_records.ROLLED_BACK, _t.cleanup_done.is_(False))
        ).scalar_one()
        unapplied = conn.execute(select(func.count()).where(_log.applied.is_(False))).scalar_one()
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
