"""The commit protocol with an external commit log (ZooKeeper), as small named steps.

1. check     usable, every staged file present (as with the SQL oracle) and the log reachable:
             a failure here leaves the transaction active, nothing written anywhere
2. prepare   catalog compare-and-swap active -> committing: from here on a rollback by anyone
             must first record an abort decision in the log (it fails if a commit decision exists)
3. validate  serializable only (Isolation.tracks_reads): read the log version, mirror every
             record, validate the read set
4. record    ONE multi-op: decision `commit` + the sequential record (+ the claim of the tag name the
             commit names): THE COMMIT POINT (serializable: only if the log version has not moved since
             step 3, else back to 3). A claimed name fails it: TagExistsError, nothing decided, the
             transaction stays committing (commit again without the tag, or roll back)
5. mirror    the record into the catalog, state committed, the tag made; then apply and catch up (apply.py)
A commit() that finds the transaction `committing` (an earlier attempt lost ZooKeeper, or its
process died) resumes at step 3; the append is idempotent per tid, so nothing commits twice.
"""

from __future__ import annotations

import random
import time

from sqlalchemy import Connection

from airflow_txn.catalog import table_versions, txn_records
from airflow_txn.catalog.clock import wall_time
from airflow_txn.core import apply, commit, crashpoints, log_mirror, retries, rollback, tags, versions
from airflow_txn.core.isolation import Isolation
from airflow_txn.core.runtime import Runtime
from airflow_txn.errors import (
    LeaseExpiredError,
    OracleUnavailableError,
    SerializationError,
    TagExistsError,
    TransactionClosedError,
    TxnError,
)
from airflow_txn.oracle.base import AbortDecidedError, ExternalLog, LogEntry, LogMovedError, LogRecord, LogTag
from airflow_txn.telemetry import logs

log = logs.get_logger(__name__)

MAX_VALIDATIONS = 50
"""Serializable commits re-validate when another commit lands in between; this bounds the retries."""


def commit_external(rt: Runtime, tid: str, external: ExternalLog, tag: tags.CommitTag | None = None) -> int:
    """Commit `tid` through `external`; return its CSN (a read-only transaction returns its snapshot). With
    `tag`, the record names it (module doc, step 4); a read-only commit claims the name, then tags its
    snapshot in the catalog transaction that commits it (`_prepare`)."""
    started = time.perf_counter()
    with rt.catalog.read() as conn:  # one read for the row and its staged files (or, committing, its tables)
        row = txn_records.fetch(conn, tid)
        if row.state == txn_records.COMMITTING:
            tables, changed = _tables(conn, row)
        else:
            staged = commit.staged_files(rt, conn, tid)
            writes = bool(staged) or bool(versions.touched(conn, tid).tables)
    if row.state != txn_records.COMMITTING:
        try:
            txn_records.require_usable(row)  # fail fast; checked again under the row lock in _prepare
            commit.check_files(rt, tid, staged)
            if writes:  # a read-only commit needs no record, so no ZooKeeper either
                external.check_available()
            crashpoints.hit(crashpoints.COMMIT_BEFORE_RECORD)
            read_only_csn, tables, changed = _prepare(rt, tid, external, tag)
        except LeaseExpiredError as exc:
            commit.failed(tid, exc)
            rollback.rollback(rt, tid, reason=f"commit failed: {exc}")
            raise
        if read_only_csn is not None:
            return read_only_csn
    # committing: nothing can be staged any more, so `tables` and `changed` (read under the row lock by _prepare,
    # or after the state was committing) are final: the record's tables, D27's check and the apply take them
    entry = entry_of(tid, tables, tag)
    table_ids = list(tables)
    crashpoints.hit(crashpoints.COMMIT_MID_RECORD)
    try:
        csn = _record(rt, external, entry, row, changed)
    except TagExistsError as exc:  # the multi-op decided nothing: no commit, no abort
        raise TagExistsError(f"{exc}; transaction {tid} stays committing: commit it again without the tag (or "
                             "with another name), or roll it back") from exc
    crashpoints.hit(crashpoints.COMMIT_AFTER_RECORD)
    log_mirror.mirror(rt, [LogRecord(csn, entry)])
    crashpoints.hit(crashpoints.COMMIT_AFTER_MIRROR)
    # behind: an older record unapplied or not mirrored: catch up
    if apply.apply_record(rt, csn, tid, table_ids, versions=bool(changed.version_rows)):
        apply.apply_pending(rt, up_to=csn)
    commit.committed(rt, tid, csn, started)
    if external.compaction_due():
        _compact_quietly(rt, external)
    return csn


def _prepare(rt: Runtime, tid: str, external: ExternalLog,
             tag: tags.CommitTag | None) -> tuple[int | None, dict[int, str], table_versions.Touched]:
    """Step 2. Returns (the snapshot CSN for a read-only transaction, committed here, else None; the
    tables it changed, {id: name}, and what it touched, read under its row lock: final, since it is now
    committing). A read-only commit with `tag` claims the name in the log and makes the tag in this catalog
    transaction; the claim is released if that transaction fails."""
    claimed = False
    try:
        with rt.catalog.write() as conn:
            row = txn_records.fetch(conn, tid, rt.catalog)
            txn_records.require_usable(row)
            retries.require_nothing_to_rerun(conn, tid)
            tables, changed = _tables(conn, row)
            if not tables:
                txn_records.cas_state(conn, tid, txn_records.COMMITTED, commit_csn=None)
                if tag is not None:
                    external.claim_tag(tag.name, tid)
                    claimed = True
                    tags.tag_in_commit(conn, tag, row.snapshot_csn, [])
                return row.snapshot_csn, tables, changed
            if not txn_records.cas_state(conn, tid, txn_records.COMMITTING):
                raise AssertionError(f"transaction {tid} changed state under its row lock")
            return None, tables, changed
    except BaseException:
        if claimed and tag is not None:
            tags.release_quietly(rt, tag.name)
        raise


def entry_of(tid: str, tables: dict[int, str], tag: tags.CommitTag | None) -> LogEntry:
    """The commit record of `tid` that changed `tables` ({id: name} in its own view): the names sorted, each with its
    table id (the mirror files the record by id, whoever holds a name by then), and the tag it names."""
    ordered = sorted(tables.items(), key=lambda item: item[1])
    named = None if tag is None else LogTag(tag.name, tag.note)
    return LogEntry(tid, tuple(name for _, name in ordered), wall_time(), named,
                    tuple(table_id for table_id, _ in ordered))


def _tables(conn: Connection, row: txn_records.TxnRow) -> tuple[dict[int, str], table_versions.Touched]:
    """{table id: qualified name} of the tables transaction `row` changed, each by its name in that transaction's
    view (commit.table_names), and what it touched (versions.touched)."""
    changed = versions.touched(conn, row.tid)
    return commit.table_names(conn, row.tid, row.snapshot_csn, changed.tables), changed


def _record(rt: Runtime, external: ExternalLog, entry: LogEntry, row: txn_records.TxnRow,
            changed: table_versions.Touched) -> int:
    """Steps 3 and 4; a conflict or an abort decision rolls the transaction back. `changed`: what the transaction
    touched, read once it was committing (final)."""
    try:
        return _validated_append(rt, external, entry, row, changed)
    except SerializationError as exc:
        commit.failed(entry.tid, exc)
        _roll_back_quietly(rt, entry.tid, f"commit failed: {exc}")
        raise
    except AbortDecidedError:
        _roll_back_quietly(rt, entry.tid, "rolled back while committing")
        with rt.catalog.read() as conn:
            expired = txn_records.fetch(conn, entry.tid).lease_expired()
        if expired:
            raise LeaseExpiredError(f"the lease of transaction {entry.tid} expired while it was committing: "
                                    "it was rolled back; begin a new one") from None
        raise TransactionClosedError(f"transaction {entry.tid} was rolled back by another process while "
                                     "committing") from None


def _validated_append(rt: Runtime, external: ExternalLog, entry: LogEntry, row: txn_records.TxnRow,
                      changed: table_versions.Touched) -> int:
    level = Isolation(row.isolation)
    with rt.catalog.read() as conn:
        validated = level.validates(conn, entry.tid)
        if not validated:  # D27's check against the table changes mirrored so far (docs/DESIGN.md), then append
            versions.validate(conn, entry.tid, row.snapshot_csn, changed)  # at any log version
    if not validated:
        return external.append(entry)
    for _ in range(MAX_VALIDATIONS):
        version = external.version()
        log_mirror.catch_up(rt)  # every record appended before `version` is now in the catalog
        with rt.catalog.read() as conn:
            level.validate(conn, entry.tid, row.snapshot_csn)
            versions.validate(conn, entry.tid, row.snapshot_csn, changed)
        try:
            return external.append(entry, expect_version=version)
        except LogMovedError:  # a commit landed after the validation: validate again
            time.sleep(random.uniform(0.0, 0.02))
    raise SerializationError(f"{level} transaction {entry.tid} could not validate against a quiet log in "
                             f"{MAX_VALIDATIONS} tries (heavy commit traffic); retry the transaction")


def _roll_back_quietly(rt: Runtime, tid: str, reason: str) -> None:
    try:
        rollback.rollback(rt, tid, reason=reason)
    except (OracleUnavailableError, TransactionClosedError) as exc:  # recovery settles it later
        log.warning("rollback after a failed commit did not finish: %s", exc, extra=logs.fields(tid))


def _compact_quietly(rt: Runtime, external: ExternalLog) -> None:
    try:
        log_mirror.compact(rt, external)
    except TxnError as exc:  # compaction is housekeeping: the next commit or recover() does it
        log.warning("log compaction failed: %s", exc)
