"""Mirroring an external commit log (ZooKeeper) into the catalog: the first step of apply.

A record in the external log IS the commit (invariant 3). Mirroring copies it into txn_commit_log
(applied = false) with its per-table rows, flips the transaction committing -> committed and makes the
tag the record names (its name was claimed in the commit's multi-op: docs/DESIGN.md D18); apply
then stamps the parts exactly as with the SQL oracle. The catalog's last_csn counter is the
*mirrored prefix*: every record with CSN <= it is in the catalog. So the watermark,
min(prefix, lowest unapplied - 1), never passes a record that is not applied, and readers compute it
from the catalog alone (they keep working while ZooKeeper is down). Anyone may mirror any record,
any number of times: rows are inserted only if absent, the state flip is a compare-and-swap.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection

from airflow_txn.catalog import commit_log, counters, table_registry, table_versions, tag_records, txn_records
from airflow_txn.core import versions
from airflow_txn.core.runtime import Runtime
from airflow_txn.errors import OracleUnavailableError, TransactionNotFoundError
from airflow_txn.oracle.base import ExternalLog, LogEntry, LogRecord
from airflow_txn.telemetry import logs

log = logs.get_logger(__name__)


def mirror(rt: Runtime, records: Sequence[LogRecord]) -> int:
    """Copy log records into the catalog (one catalog transaction) and advance the prefix; return how many
    were new."""
    if not records:
        return 0
    with rt.catalog.write() as conn:
        prefix = counters.last_csn(conn, rt.catalog)  # locked: one mirror at a time moves the prefix
        wanted = [r for r in records if r.csn > prefix]
        present = commit_log.present_csns(conn, [r.csn for r in wanted])
        new = [r for r in wanted if r.csn not in present]
        for record in new:
            _write(rt, conn, record)
        _advance_prefix(conn, prefix)
    return len(new)


def _write(rt: Runtime, conn: Connection, record: LogRecord) -> None:
    entry = record.entry
    tables = []
    by_name = _table_ids(conn, entry)
    for name in entry.tables:
        table_id = by_name.get(name)
        if table_id is None:
            log.error("commit record names unknown table %s", name, extra=logs.fields(entry.tid, record.csn))
            continue
        tables.append((table_id, name))
    commit_log.write_record(conn, record.csn, entry.tid, tables, committed_at=entry.committed_at)
    _tag(conn, record, [table_id for table_id, _ in tables])
    if txn_records.cas_state(conn, entry.tid, txn_records.COMMITTED, from_state=txn_records.COMMITTING,
                             commit_csn=record.csn):
        return
    row = txn_records.fetch(conn, entry.tid)
    if row.state != txn_records.COMMITTED or row.commit_csn != record.csn:
        log.error("commit record found the transaction %s (CSN %s): the log and the catalog disagree",
                  row.state, row.commit_csn, extra=logs.fields(entry.tid, record.csn))


def _table_ids(conn: Connection, entry: LogEntry) -> dict[str, int]:
    """{name: table id} of the tables a record names: the ids it carries; a record written before they were (no
    `table_ids`) is read in its transaction's own view (the tables it changed, by the names it saw them under), a
    name it does not hold there by today's holder. Never by a name cached by this process: a name can be given to
    another table before the record is mirrored (docs/DESIGN.md D27)."""
    if entry.table_ids is not None and len(entry.table_ids) == len(entry.tables):
        return dict(zip(entry.tables, entry.table_ids, strict=True))
    found: dict[str, int] = {}
    try:
        row = txn_records.fetch(conn, entry.tid)
    except TransactionNotFoundError:
        row = None
    if row is not None:
        touched = versions.tables_touched(conn, entry.tid)
        named = table_versions.visible_names(conn, touched, entry.tid, row.snapshot_csn)
        found = {name: table_id for table_id, name in (named or {}).items()}
    for name in entry.tables:
        if name not in found:
            info = table_registry.find(conn, name)
            if info is not None:
                found[name] = info.id
    return found


def _tag(conn: Connection, record: LogRecord, table_ids: Sequence[int]) -> None:
    """The tag the record names, at its CSN, holding its tables: made exactly once, by the mirror that writes the
    record (mirrors are serialized by the prefix lock). Its CSN may be above the watermark until the record is
    applied: a read at the tag applies it first (tags.resolve). A tag of the name already in the catalog (made
    by an airflow_txn that did not claim names in the log) is left as it is and reported."""
    tag = record.entry.tag
    if tag is None:
        return
    existing = tag_records.find(conn, tag.name)
    if existing is not None or not table_ids:
        log.error("commit record names tag %r, which %s: the commit stands untagged", tag.name,
                  f"names CSN {existing.csn} already" if existing is not None else "holds no known table",
                  extra=logs.fields(record.entry.tid, record.csn))
        return
    tag_records.insert_tag(conn, tag.name, record.csn, table_ids, record.entry.committed_at, tag.note)
    log.info("tagged CSN %d as %r with its commit (%d table(s))", record.csn, tag.name, len(table_ids),
             extra=logs.fields(record.entry.tid, record.csn))


def _advance_prefix(conn: Connection, prefix: int) -> None:
    """Move the prefix over every record that now follows it without a gap."""
    new = prefix
    while True:
        rows = commit_log.csns_after(conn, new, limit=500)
        advanced = 0
        for csn in rows:
            if csn != new + 1:
                break
            new, advanced = csn, advanced + 1
        if advanced < 500:  # a gap, or no more records
            break
    if new > prefix:
        counters.set_last_csn(conn, new)


def prefix(rt: Runtime) -> int:
    with rt.catalog.read() as conn:
        return rt.oracle.last_csn(conn)


def catch_up(rt: Runtime, up_to: int | None = None) -> int:
    """Mirror every log record past the prefix (up to `up_to`): redo what dead committers left undone."""
    external = rt.oracle.external_log
    if external is None:
        return 0
    start = prefix(rt)
    if up_to is not None and start >= up_to:
        return 0
    return mirror(rt, external.records(after=start, up_to=up_to))


def unmirrored(rt: Runtime) -> list[LogRecord]:
    """Records in the external log that the catalog does not hold yet (for introspection)."""
    external = rt.oracle.external_log
    if external is None:
        return []
    start = prefix(rt)
    records = external.records(after=start)
    with rt.catalog.read() as conn:
        present = commit_log.present_csns(conn, [r.csn for r in records])
    return [r for r in records if r.csn not in present]


def logged_commit_csn(rt: Runtime, row: txn_records.TxnRow) -> int | None:
    """The commit CSN of a transaction whose catalog row says committing, if its record exists in the
    external log (then it is committed, whatever the catalog says yet); else None."""
    external = rt.oracle.external_log
    if row.state != txn_records.COMMITTING or external is None:
        return None
    try:
        return external.commit_csn(row.tid)
    except OracleUnavailableError:  # cannot tell: not committed as far as anyone can know now
        return None


def compact(rt: Runtime, external: ExternalLog) -> int:
    """Remove log records every reader already has: those at or below the readable watermark."""
    with rt.catalog.read() as conn:
        watermark = rt.oracle.readable_csn(conn)

    def tids_between(low: int, high: int) -> list[str]:
        with rt.catalog.read() as conn:
            return commit_log.tids_between(conn, low, high)

    def is_rolled_back(tid: str) -> bool:
        with rt.catalog.read() as conn:
            try:
                return txn_records.fetch(conn, tid).state == txn_records.ROLLED_BACK
            except TransactionNotFoundError:  # purged by vacuum, which purges only ended rows, and an
                return True  # abort decision means it did not commit: it was rolled back

    return external.compact(watermark, tids_between, is_rolled_back)
