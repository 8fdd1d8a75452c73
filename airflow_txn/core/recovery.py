"""Recovery: roll committed records forward, roll expired or half-rolled-back transactions back,
and reconcile storage with the catalog. Safe to run at any time, from any process, repeatedly."""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import Connection

from airflow_txn.catalog import commit_log, part_records, table_registry, txn_records
from airflow_txn.core import apply, log_mirror, rollback
from airflow_txn.core.runtime import Runtime
from airflow_txn.errors import OracleUnavailableError, TransactionClosedError
from airflow_txn.model.results import RecoveryReport
from airflow_txn.oracle import ExternalLog
from airflow_txn.storage.root import stored_unit
from airflow_txn.telemetry import logs

log = logs.get_logger(__name__)

Progress = Callable[[str, int, int], None]
"""progress(stage, done, total): called as long maintenance work advances (the CLI draws bars with it)."""


def _no_progress(_stage: str, _done: int, _total: int) -> None:
    return None


def roll_back_expired(rt: Runtime, progress: Progress | None = None) -> list[str]:
    tick = progress or _no_progress
    with rt.catalog.read() as conn:
        expired = txn_records.expired_active(conn)
    done = []
    for index, tid in enumerate(expired):
        tick("roll back expired", index, len(expired))
        try:
            if rollback.rollback(rt, tid, reason="lease expired"):
                done.append(tid)
        except TransactionClosedError:  # committed just now by its owner: nothing to do
            continue
        except OracleUnavailableError as exc:  # committing, and ZooKeeper cannot say how it ended: later
            log.warning("cannot settle the transaction now: %s", exc, extra=logs.fields(tid))
    tick("roll back expired", len(expired), len(expired))
    return done


def finish_rollbacks(rt: Runtime, progress: Progress | None = None) -> list[str]:
    tick = progress or _no_progress
    with rt.catalog.read() as conn:
        unfinished = txn_records.unfinished_rollbacks(conn)
    for index, tid in enumerate(unfinished):
        tick("finish rollbacks", index, len(unfinished))
        rollback.finish(rt, tid)
    tick("finish rollbacks", len(unfinished), len(unfinished))
    return unfinished


def _roll_forward(rt: Runtime, tick: Progress) -> int:
    with rt.catalog.read() as conn:
        pending = len(commit_log.unapplied(conn))
    tick("roll forward", 0, pending)
    done = apply.apply_pending(rt)
    tick("roll forward", done, max(done, pending))
    return done


def recover(rt: Runtime, check_files: bool = True, progress: Progress | None = None) -> RecoveryReport:
    """Converge to the invariants after any crash; return what was done and what was found.
    `progress(stage, done, total)` is told how each stage advances."""
    tick = progress or _no_progress
    rolled_forward = _roll_forward(rt, tick)
    rolled_back = roll_back_expired(rt, tick)
    finished = finish_rollbacks(rt, tick)
    report = RecoveryReport(rolled_forward=rolled_forward, rolled_back=rolled_back, finished_rollbacks=finished,
                            watermark=apply.readable_csn(rt))
    external = rt.oracle.external_log
    if external is not None:
        report["log_records_compacted"] = _compact(rt, external)
    if check_files:
        report["orphan_dirs"], report["missing_files"] = _reconcile_storage(rt, report["watermark"], tick)
    if rolled_forward or rolled_back or finished:
        log.info("recovery: %s", {k: v for k, v in report.items() if k != "missing_files"},
                 extra=logs.fields(csn=report["watermark"]))
    return report


def _compact(rt: Runtime, external: ExternalLog) -> int:
    try:
        return log_mirror.compact(rt, external)
    except OracleUnavailableError as exc:
        log.warning("log compaction skipped: %s", exc)
        return 0


def registered_units(conn: Connection, table_id: int) -> set[str]:
    """The write dirs and part files of a table the catalog registers (storage.root.stored_unit): what
    `Storage.stored_parts` lists that is not an orphan."""
    return {stored_unit(p) for p in part_records.registered_paths(conn, table_id)}


def _reconcile_storage(rt: Runtime, watermark: int, tick: Progress) -> tuple[int, list[str]]:
    """How many part files and write dirs are unregistered (vacuum removes them), and the files of visible parts that
    are gone (reported)."""
    orphans = 0
    missing: list[str] = []
    with rt.catalog.read() as conn:
        tables = table_registry.all_tables(conn)
    for index, info in enumerate(tables):
        tick("check storage", index, len(tables))
        with rt.catalog.read() as conn:
            registered = registered_units(conn, info.id)
            visible = part_records.visible_parts(conn, info.id, None, watermark)
        for entry in rt.storage.stored_parts(info.directory):
            if entry.relative not in registered:
                orphans += 1
                log.debug("unregistered part file or write dir %s", entry.path,
                          extra=logs.fields(rt.storage.writer_tid(entry)))
        for part in visible:
            missing += rt.storage.missing_files(info.directory, part.path, part.files)
    tick("check storage", len(tables), len(tables))
    if missing:
        log.error("%d file(s) of visible parts are missing, e.g. %s", len(missing), missing[0],
                  extra=logs.fields(csn=watermark))
    return orphans, missing
