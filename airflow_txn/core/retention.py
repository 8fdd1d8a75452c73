"""Retention: how far back each table stays readable, and the horizons vacuum stores (invariant 8).

Global rules, for every table: the readable watermark, the oldest open transaction's snapshot, and
the snapshot that was current `retention_seconds` ago (vacuum's argument). A table may keep MORE with
a policy of its own (`Warehouse.set_retention`): `seconds` (the snapshot current that long ago stays
readable) and `versions` (its last N commits stay readable). Its horizon is the minimum of the global
rules and its own, so a policy never lets vacuum delete what vacuum's own rules keep.

Stored horizons only ever rise: the global one in the `vacuum_horizon` counter, a table's own in its
policy row. A table without a row follows the global one. Files vacuum deleted are gone, so a longer
policy set later keeps versions from then on; it cannot bring back what was deleted. Readers check
the stored horizon of the table they read (`check_readable`): a CSN below it raises SnapshotTooOldError.
Policies and vacuum serialize on the counter row (FOR UPDATE), so a policy is never half-seen.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from sqlalchemy import Connection

from airflow_txn.catalog import Catalog, commit_log, counters, retention_records, table_registry, txn_records
from airflow_txn.catalog.clock import wall_time
from airflow_txn.catalog.table_registry import TableInfo
from airflow_txn.core import versions
from airflow_txn.core.bounds import catalog_int, retention_seconds
from airflow_txn.core.runtime import Runtime
from airflow_txn.errors import SnapshotTooOldError
from airflow_txn.model.csn import PREHISTORIC_CSN
from airflow_txn.model.results import RetentionInfo
from airflow_txn.oracle import CsnOracle


@dataclass(frozen=True, slots=True)
class Policy:
    """A table's own retention: None in a field means no rule of that kind."""

    seconds: float | None = None
    versions: int | None = None

    @property
    def empty(self) -> bool:
        return self.seconds is None and self.versions is None


def validate(seconds: object, versions: object) -> Policy:
    """Check a policy completely before anything is written (InvalidArgumentError naming the bad value)."""
    window = None if seconds is None else retention_seconds(seconds, "retention seconds")
    count = None if versions is None else catalog_int(versions, "retention versions", 1)
    return Policy(window, count)


def set_policy(rt: Runtime, table: str, seconds: object = None, versions: object = None) -> RetentionInfo:
    """Set (or, with both None, clear) the table's own policy; returns `describe`."""
    policy = validate(seconds, versions)
    with rt.catalog.write() as conn:
        info = _named_now(conn, rt.oracle, table)
        global_horizon = counters.vacuum_horizon(conn, rt.catalog)  # locked: policies and vacuum serialize on it
        # a table new to the rows followed the global horizon so far: files up to it may be gone already
        retention_records.save_policy(conn, info.id, global_horizon, seconds=policy.seconds,
                                      versions=policy.versions, updated_at=time.time())
    return describe(rt, table)


def describe(rt: Runtime, table: str) -> RetentionInfo:
    """The table's policy and its stored horizon (the oldest CSN a read of it may ask for)."""
    with rt.catalog.read() as conn:
        info = _named_now(conn, rt.oracle, table)
        row = retention_records.of_table(conn, info.id)
        horizon = table_horizon(conn, info.id)
    return RetentionInfo(
        table=info.name.qualified,
        seconds=None if row is None or row.seconds is None else float(row.seconds),
        versions=None if row is None or row.versions is None else int(row.versions),
        horizon=horizon,
    )


def _named_now(conn: Connection, oracle: CsnOracle, table: str) -> TableInfo:
    """The table `table` names at the readable watermark, as a read there resolves it (versions.table_at): a
    renamed table's old name names nothing now (TableNotFoundError), only at older snapshots (docs/DESIGN.md, D27)."""
    named = table_registry.get(conn, table)
    return versions.table_at(conn, named, None, oracle.readable_csn(conn))


def table_horizon(conn: Connection, table_id: int) -> int:
    """The stored horizon of one table: its own row's, else the global one."""
    own = retention_records.own_horizon(conn, table_id)
    return own if own is not None else counters.vacuum_horizon(conn)


def min_horizon(conn: Connection) -> int:
    """The lowest stored horizon of any table: no CSN below it is readable anywhere."""
    lowest = retention_records.lowest_horizon(conn)
    stored = counters.vacuum_horizon(conn)
    return stored if lowest is None else min(stored, lowest)


def check_readable(rt: Runtime, csn: int, tables: Sequence[str] | None = None) -> None:
    """Raise SnapshotTooOldError if `csn` is below the horizon of one of `tables` (None: of every table)."""
    with rt.catalog.read() as conn:
        if tables is None:
            horizon = min_horizon(conn)
            if csn < horizon:
                raise SnapshotTooOldError(
                    f"CSN {csn} is older than the retention horizon {horizon}: vacuum may have removed its files"
                )
            return
        for name in tables:
            info = versions.table_at(conn, table_registry.get(conn, name), None, csn)  # the table `name` meant at csn
            check_table_readable(str(info.name), csn, table_horizon(conn, info.id))


def check_table_readable(table: str, csn: int, horizon: int) -> None:
    """SnapshotTooOldError if `csn` is below `horizon`, the retention horizon of `table`."""
    if csn < horizon:
        raise SnapshotTooOldError(
            f"table {table}: CSN {csn} is older than its retention horizon {horizon}: vacuum may "
            f"have removed its files; read CSN {horizon} or newer (Warehouse.set_retention keeps more)"
        )


def horizon_of(rt: Runtime, table_id: int) -> int:
    """The stored horizon of table `table_id` (by id: a planned read's table is the one its name meant at its
    snapshot, which another table may have the name of today, docs/DESIGN.md D27)."""
    with rt.catalog.read() as conn:
        return table_horizon(conn, table_id)


@dataclass(frozen=True, slots=True)
class Horizons:
    """What one vacuum run may delete: per table, the horizon and the time window (seconds)."""

    global_horizon: int
    retention_seconds: float
    own: dict[int, tuple[int, float]] = field(default_factory=dict)  # table_id -> (horizon, window)

    def of(self, table_id: int) -> int:
        return self.own[table_id][0] if table_id in self.own else self.global_horizon

    def window(self, table_id: int) -> float:
        return self.own[table_id][1] if table_id in self.own else self.retention_seconds


def compute(conn: Connection, catalog: Catalog, oracle: CsnOracle, retention_seconds: float,
            store: bool) -> Horizons:
    """The horizons of a vacuum run (module doc), computed in the caller's write transaction; with
    `store` the stored horizons are raised to them (never lowered) and rows of cleared policies go."""
    now = wall_time()
    stored_global = counters.vacuum_horizon(conn, catalog if store else None)
    watermark = oracle.readable_csn(conn)
    bounds = [watermark, commit_log.csn_at_time(conn, now - retention_seconds) or PREHISTORIC_CSN]
    oldest = txn_records.oldest_active_snapshot(conn)
    if oldest is not None:
        bounds.append(oldest)
    global_horizon = min(bounds)
    own: dict[int, tuple[int, float]] = {}
    cleared: list[int] = []
    for row in retention_records.all_rows(conn):
        table_id = row.table_id
        if row.seconds is None and row.versions is None:
            cleared.append(table_id)
            continue
        horizon, window = global_horizon, retention_seconds
        if row.seconds is not None:
            window = max(window, row.seconds)
            horizon = min(horizon, commit_log.csn_at_time(conn, now - row.seconds) or PREHISTORIC_CSN)
        if row.versions is not None:
            nth = commit_log.nth_newest_commit(conn, table_id, row.versions, watermark)
            horizon = min(horizon, PREHISTORIC_CSN if nth is None else nth)
        own[table_id] = (horizon, window)
        if store and horizon > row.horizon:
            retention_records.raise_horizon(conn, table_id, horizon)
    if store:
        if global_horizon > stored_global:
            counters.set_vacuum_horizon(conn, global_horizon)
        if cleared:  # the global horizon (just raised, and never below their rows) applies to them again
            retention_records.forget(conn, cleared)
    return Horizons(global_horizon, retention_seconds, own)
