"""Cleanup (invariant 8): delete the files no snapshot can see, and orphans of dead writers.

The horizon H is the oldest snapshot anyone may still read: min(readable watermark, the snapshot
that was current `retention_seconds` ago, the oldest running transaction's snapshot). A part is
garbage when it was rolled back (RollbackCSN) or removed at a CSN <= H. Taking the horizon bumps
the snapshot gate row that `begin` holds in share mode, so no transaction can start from an older
snapshot while the horizon is computed. Files go first, the catalog row after: a crash in between
leaves a row whose files are already gone, which the next vacuum finishes.
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import select, update

from airflow_txn import commit_log, crashpoints, part_records, recovery, table_registry, txn_records
from airflow_txn.catalog import schema
from airflow_txn.csn import PREHISTORIC_CSN
from airflow_txn.runtime import Runtime
from airflow_txn.storage import dir_age_seconds, read_sidecar, write_dir_of
from airflow_txn.table_registry import TableInfo

ORPHAN_GRACE_SECONDS = 60.0
"""Write dirs with no sidecar or an unknown tid are left this long at least (a writer may be starting)."""

_c = schema.counters.c


def horizon(rt: Runtime, retention_seconds: float) -> int:
    """Compute H (see module doc) and raise the stored vacuum horizon to it."""
    with rt.catalog.write() as conn:
        conn.execute(
            update(schema.counters).where(_c.name == schema.COUNTER_SNAPSHOT_GATE).values(value=_c.value + 1)
        )
        bounds = [commit_log.readable_csn(conn, rt.oracle)]
        bounds.append(commit_log.csn_at_time(conn, time.time() - retention_seconds) or PREHISTORIC_CSN)
        oldest = txn_records.oldest_active_snapshot(conn)
        if oldest is not None:
            bounds.append(oldest)
        result = min(bounds)
        stored = conn.execute(select(_c.value).where(_c.name == schema.COUNTER_VACUUM_HORIZON)).scalar_one()
        if result > stored:
            conn.execute(
                update(schema.counters).where(_c.name == schema.COUNTER_VACUUM_HORIZON).values(value=result)
            )
        return result


def stored_horizon(rt: Runtime) -> int:
    with rt.catalog.read() as conn:
        return int(conn.execute(select(_c.value).where(_c.name == schema.COUNTER_VACUUM_HORIZON)).scalar_one())


def vacuum(rt: Runtime, retention_seconds: float, batch: int = 500) -> dict[str, Any]:
    if retention_seconds < 0:
        raise ValueError(f"retention_seconds must be >= 0, got {retention_seconds}")
    recovery.roll_back_expired(rt)
    recovery.finish_rollbacks(rt)
    h = horizon(rt, retention_seconds)
    removed, freed = _remove_garbage_parts(rt, h, batch)
    orphans, orphan_bytes = _remove_orphans(rt, retention_seconds)
    return {"horizon": h, "parts_removed": removed, "orphan_dirs_removed": orphans,
            "bytes_freed": freed + orphan_bytes}


def _remove_garbage_parts(rt: Runtime, h: int, batch: int) -> tuple[int, int]:
    removed = freed = 0
    directories: dict[int, str] = {}
    while True:
        with rt.catalog.read() as conn:
            parts = part_records.garbage(conn, h, batch)
            for part in parts:
                if part.table_id not in directories:
                    directories[part.table_id] = table_registry.by_id(conn, part.table_id).directory
        if not parts:
            return removed, freed
        for part in parts:
            freed += rt.storage.delete_part(directories[part.table_id], part.path)
            crashpoints.hit(crashpoints.VACUUM_MID)
            with rt.catalog.write() as conn:
                part_records.forget(conn, part.id)
            removed += 1


def _remove_orphans(rt: Runtime, retention_seconds: float) -> tuple[int, int]:
    with rt.catalog.read() as conn:
        tables = table_registry.all_tables(conn)
    count = freed = 0
    for info in tables:
        for relative in _orphan_candidates(rt, info, retention_seconds):
            freed += rt.storage.delete_write_dir(info.directory, relative)
            count += 1
    return count, freed


def _orphan_candidates(rt: Runtime, info: TableInfo, retention_seconds: float) -> list[str]:
    """Write dirs whose writer can no longer register them; registration is checked LAST, after the
    writer's transaction was seen closed, so a registration cannot slip in between."""
    candidates = []
    now = time.time()
    for relative, full in rt.storage.write_dirs(info.directory):
        tid = (read_sidecar(full) or {}).get("tid")
        with rt.catalog.read() as conn:
            row = conn.execute(
                select(schema.transactions.c.state, schema.transactions.c.lease_deadline)
                .where(schema.transactions.c.tid == str(tid))
            ).first()
        if row is None:
            if dir_age_seconds(full) > max(retention_seconds, ORPHAN_GRACE_SECONDS):
                candidates.append(relative)
        elif row.state != txn_records.ACTIVE or row.lease_deadline < now:
            candidates.append(relative)
    if not candidates:
        return []
    with rt.catalog.read() as conn:
        registered = {write_dir_of(p) for p in part_records.registered_paths(conn, info.id)}
    return [c for c in candidates if c not in registered]
