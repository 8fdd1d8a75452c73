"""The commit protocol (invariant 3), as small named steps.

1. check      every staged part's files are present (a catalog read, then storage)
2. record     in ONE catalog transaction: lock the row and check it is usable, allocate the CSN
              (oracle), validate what the isolation level checks (isolation.py: the serializable read
              set), write the commit record, flip state to committed, and (SQL oracle) apply: stamp
              the CSN on the parts. The record is the commit point; with the SQL oracle the record,
              the stamps and the watermark share that one transaction (docs/DESIGN.md, decision
              D1), so a SQL commit is never half applied.
3. catch up   apply any older record still pending, so the committer reads its own commit
With an external log (ZooKeeper, commit_external.py) apply is a step of its own, table by table
(apply.py), and anyone may finish it. A failure before step 2 leaves the transaction active (or rolls
it back when the failure means it can never commit); after step 2 the commit stands.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from sqlalchemy import Connection

from airflow_txn.catalog import commit_log, part_records, read_sets, table_registry, table_versions, txn_records
from airflow_txn.core import apply, crashpoints, retries, rollback, tags, versions
from airflow_txn.core.isolation import Isolation
from airflow_txn.core.runtime import Runtime
from airflow_txn.errors import LeaseExpiredError, SerializationError, StorageError
from airflow_txn.storage.root import is_plain_part
from airflow_txn.telemetry import logs, metrics

log = logs.get_logger(__name__)

def commit(rt: Runtime, tid: str, tag: tags.CommitTag | None = None) -> int:
    """Commit `tid`; return its CSN (a read-only transaction returns its snapshot CSN). With `tag`, the
    commit and its tag stand or fall together (TagExistsError: nothing committed): the SQL oracle writes the
    tag in the commit's catalog transaction, ZooKeeper claims the name in the commit's multi-op and the
    record's mirror makes the tag (docs/DESIGN.md D18). The SQL oracle's protocol: with an external log
    (ZooKeeper) commit_route.py runs commit_external.py's instead."""
    started = time.perf_counter()
    try:
        _check(rt, tid)
        crashpoints.hit(crashpoints.COMMIT_BEFORE_RECORD)
        csn, table_ids, behind = rt.catalog.write_retrying(
            lambda conn: _record_and_apply(rt, conn, tid, tag=tag), "committing")
    except (LeaseExpiredError, SerializationError) as exc:
        failed(tid, exc)
        rollback.rollback(rt, tid, reason=f"commit failed: {exc}")
        raise
    if not table_ids:
        return csn
    log.debug("recorded and applied to %d table(s) in one catalog transaction", len(table_ids),
              extra=logs.fields(tid, csn))
    # The SQL record, its catalog row and its stamps are one catalog transaction: a kill at any of
    # these points leaves the transaction committed and applied (crashpoints.py).
    crashpoints.hit(crashpoints.COMMIT_AFTER_RECORD)
    crashpoints.hit(crashpoints.COMMIT_AFTER_MIRROR)
    crashpoints.hit(crashpoints.COMMIT_MID_APPLY)
    if metrics.enabled():  # one more catalog read, only when someone collects the gauge
        apply.report_lag(rt)
    if behind:  # an older record still unapplied (left by a committer of an older airflow_txn): catch up
        apply.apply_pending(rt, up_to=csn)
    committed(rt, tid, csn, started)
    return csn


def committed(rt: Runtime, tid: str, csn: int, started: float) -> None:
    """Report a commit that is applied: its log line and its latency (from `started`, perf_counter)."""
    elapsed_ms = (time.perf_counter() - started) * 1000.0
    metrics.timing(metrics.COMMIT_LATENCY, elapsed_ms, {"oracle": rt.oracle.name})
    log.info("committed in %.1f ms", elapsed_ms, extra=logs.fields(tid, csn))


def failed(tid: str, exc: Exception) -> None:
    """Report a commit that cannot succeed (it is rolled back next); conflicts are counted."""
    if isinstance(exc, SerializationError):
        metrics.incr(metrics.CONFLICTS)
    log.warning("commit failed: %s", exc, extra=logs.fields(tid))


StagedFiles = list[tuple[str, str, tuple[str, ...]]]
"""(table directory, part path, file names) of every part a transaction staged."""


def _check(rt: Runtime, tid: str) -> None:
    """Step 1: every staged part's files are present (the transaction itself is checked under its
    row lock in step 2). A missing file fails the transaction: it can never commit."""
    with rt.catalog.read() as conn:
        staged = staged_files(rt, conn, tid)
    check_files(rt, tid, staged)


def staged_files(rt: Runtime, conn: Connection, tid: str) -> StagedFiles:
    """Step 1's catalog read, in the caller's catalog transaction."""
    staged = part_records.staged_files(conn, tid)
    directories = table_directories(rt, conn, {table_id for table_id, _, _ in staged})
    return [(directories[table_id], part_path, files) for table_id, part_path, files in staged]


def check_files(rt: Runtime, tid: str, staged: StagedFiles) -> None:
    """Step 1's storage check of what `staged_files` read; a missing file fails the transaction. Plain part
    files (D8) are not looked at: their writer saw each complete before registering it, and nothing deletes a
    staged part of a transaction that can still commit, so no request per part is spent on the commit path
    (docs/DESIGN.md, "Storage on object stores"). Parts in write dirs (an engine's files) are checked."""
    missing = [
        path
        for directory, part_path, files in staged
        if not is_plain_part(part_path)
        for path in rt.storage.missing_files(directory, part_path, files)
    ]
    if missing:
        with rt.catalog.write() as conn:
            txn_records.mark_failed(conn, tid, f"{len(missing)} staged file(s) missing, e.g. {missing[0]}")
        raise StorageError(
            f"transaction {tid} cannot commit: {len(missing)} staged file(s) are missing, e.g. {missing[0]}; "
            "roll it back and run the job again"
        )


def table_names(conn: Connection, tid: str, snapshot: int, table_ids: Iterable[int]) -> dict[int, str]:
    """{table id: qualified name} of each table as transaction `tid` (at `snapshot`) sees it: the name of its version
    visible there, `tid`'s own staged rename included (one query; docs/DESIGN.md D27), never a cached name. A table
    with no version visible there (one `tid` created and dropped again) keeps its newest name; so does every table
    of a catalog without versions, where names never change."""
    wanted = list(table_ids)
    named = table_versions.visible_names(conn, wanted, tid, snapshot)
    if named is not None and all(t in named for t in wanted):
        return {t: named[t] for t in wanted}
    newest = {t: name for t, (name, _) in table_registry.names_and_directories(conn, wanted).items()}
    return {t: (named or {}).get(t, newest[t]) for t in wanted}


def table_directories(rt: Runtime, conn: Connection, table_ids: Iterable[int]) -> dict[int, str]:
    """{table id: directory}, from this process's cache (a table's directory never changes, whatever its name)."""
    cache = rt.table_directories
    wanted = list(table_ids)
    unknown = [t for t in wanted if t not in cache]
    if unknown:
        found = table_registry.names_and_directories(conn, sorted(unknown))
        cache.update({t: directory for t, (_, directory) in found.items()})
    return {t: cache[t] for t in wanted}


def _record(rt: Runtime, tid: str) -> tuple[int, bool]:
    """Step 2 without its apply: the commit point alone, as a committer that stopped right after its
    record leaves it with an external log (or an older airflow_txn, which applied separately).
    Returns (csn, wrote_anything). Used by tests and tools that need such a record."""
    csn, table_ids, _ = rt.catalog.write_retrying(
        lambda conn: _record_and_apply(rt, conn, tid, apply_now=False), "writing a commit record")
    return csn, bool(table_ids)


def _record_and_apply(rt: Runtime, conn: Connection, tid: str, apply_now: bool = True,
                      tag: tags.CommitTag | None = None) -> tuple[int, list[int], bool]:
    """Step 2 in the caller's catalog transaction. Returns (csn, the tables the record names, whether
    an older record is still unapplied); no tables: read-only, committed at its snapshot. With `tag`, the
    tag is written last, in the same catalog transaction (tags.tag_in_commit)."""
    row = txn_records.fetch(conn, tid, rt.catalog)
    txn_records.require_usable(row)
    retries.require_nothing_to_rerun(conn, tid)
    changed = versions.touched(conn, tid)
    table_ids = changed.tables
    if not table_ids:
        txn_records.cas_state(conn, tid, txn_records.COMMITTED, commit_csn=None)
        if tag is not None:
            tags.tag_in_commit(conn, tag, row.snapshot_csn, [])
        return row.snapshot_csn, [], False
    # Before the counter lock, so that it is held less (every commit queues on it): the names and the read set,
    # both final under the row lock. Under it: the checks against what committed since, then the writes.
    names = table_names(conn, tid, row.snapshot_csn, table_ids)
    level = Isolation(row.isolation)
    reads = read_sets.reads(conn, tid)
    csn = rt.oracle.next_csn(conn)
    crashpoints.hit(crashpoints.COMMIT_MID_RECORD)
    level.validate(conn, tid, row.snapshot_csn, reads)
    versions.validate(conn, tid, row.snapshot_csn, changed)
    commit_log.write_record(conn, csn, tid, [(t, names[t]) for t in table_ids], applied=apply_now)
    if not txn_records.cas_state(conn, tid, txn_records.COMMITTED, commit_csn=csn):
        raise AssertionError(f"transaction {tid} changed state under its row lock")
    if not apply_now:
        return csn, table_ids, False
    part_records.stamp_commit_all(conn, tid, csn)
    if changed.version_rows:  # read under the row lock: nothing of tid's can be staged since
        table_versions.stamp_commit(conn, tid, None, csn)
    if tag is not None:
        tags.tag_in_commit(conn, tag, csn, table_ids)
    return csn, table_ids, commit_log.unapplied_below(conn, csn)
