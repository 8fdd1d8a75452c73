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

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from sqlalchemy import Connection, delete, func, insert, select, update

from airflow_txn.catalog import Catalog, commit_log, schema, table_registry, txn_records
from airflow_txn.core.bounds import catalog_int
from airflow_txn.core.results import RetentionInfo
from airflow_txn.core.runtime import Runtime
from airflow_txn.errors import SnapshotTooOldError, TxnError
from airflow_txn.model.csn import PREHISTORIC_CSN
from airflow_txn.oracle import CsnOracle

_c = schema.counters.c
_r = schema.table_retention.c
_tc = schema.table_commits.c


@dataclass(frozen=True, slots=True)
class Policy:
    """A table's own retention: None in a field means no rule of that kind."""

    seconds: float | None = None
    versions: int | None = None

    @property
    def empty(self) -> bool:
        return self.seconds is None and self.versions is None


def validate(seconds: object, versions: object) -> Policy:
    """Check a policy completely before anything is written (TxnError naming the bad value)."""
    if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, int | float)
                                or not math.isfinite(seconds) or seconds < 0):
        raise TxnError(f"retention seconds must be a number >= 0 or None, got {seconds!r}")
    count = None if versions is None else catalog_int(versions, "retention versions", 1)
    return Policy(None if seconds is None else float(seconds), count)


def _global_stored(conn: Connection, catalog: Catalog | None = None) -> int:
    """The stored global horizon; with a catalog, locked FOR UPDATE (policies and vacuum serialize on it)."""
    stmt = select(_c.value).where(_c.name == schema.COUNTER_VACUUM_HORIZON)
    if catalog is not None:
        stmt = catalog.lock_for_update(stmt)
    return int(conn.execute(stmt).scalar_one())


def set_policy(rt: Runtime, table: str, seconds: object = None, versions: object = None) -> RetentionInfo:
    """Set (or, with both None, clear) the table's own policy; returns `describe`."""
    policy = validate(seconds, versions)
    with rt.catalog.write() as conn:
        info = table_registry.get(conn, table)
        global_horizon = _global_stored(conn, rt.catalog)
        values = {"seconds": policy.seconds, "versions": policy.versions, "updated_at": time.time()}
        if conn.execute(update(schema.table_retention).where(_r.table_id == info.id).values(**values)).rowcount == 0:
            # the table followed the global horizon so far: files up to it may be gone already
            conn.execute(insert(schema.table_retention).values(table_id=info.id, horizon=global_horizon, **values))
    return describe(rt, table)


def describe(rt: Runtime, table: str) -> RetentionInfo:
    """The table's policy and its stored horizon (the oldest CSN a read of it may ask for)."""
    with rt.catalog.read() as conn:
        info = table_registry.get(conn, table)
        row = conn.execute(select(schema.table_retention).where(_r.table_id == info.id)).first()
        horizon = table_horizon(conn, info.id)
    return RetentionInfo(
        table=info.name.qualified,
        seconds=None if row is None or row.seconds is None else float(row.seconds),
        versions=None if row is None or row.versions is None else int(row.versions),
        horizon=horizon,
    )


def table_horizon(conn: Connection, table_id: int) -> int:
    """The stored horizon of one table: its own row's, else the global one."""
    own = conn.execute(select(_r.horizon).where(_r.table_id == table_id)).scalar()
    return int(own) if own is not None else _global_stored(conn)


def min_horizon(conn: Connection) -> int:
    """The lowest stored horizon of any table: no CSN below it is readable anywhere."""
    lowest = conn.execute(select(func.min(_r.horizon))).scalar()
    stored = _global_stored(conn)
    return stored if lowest is None else min(stored, int(lowest))


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
            info = table_registry.get(conn, name)
            horizon = table_horizon(conn, info.id)
            if csn < horizon:
                raise SnapshotTooOldError(
                    f"table {info.name}: CSN {csn} is older than its retention horizon {horizon}: vacuum may "
                    f"have removed its files; read CSN {horizon} or newer (Warehouse.set_retention keeps more)"
                )


def horizon_of(rt: Runtime, table: str) -> int:
    with rt.catalog.read() as conn:
        return table_horizon(conn, table_registry.get(conn, table).id)


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


def _nth_newest_commit(conn: Connection, table_id: int, n: int, at_or_below: int) -> int:
    stmt = (select(_tc.csn).where(_tc.table_id == table_id, _tc.csn <= at_or_below)
            .order_by(_tc.csn.desc()).offset(n - 1).limit(1))
    value = conn.execute(stmt).scalar()
    return PREHISTORIC_CSN if value is None else int(value)


def compute(conn: Connection, catalog: Catalog, oracle: CsnOracle, retention_seconds: float,
            store: bool) -> Horizons:
    """The horizons of a vacuum run (module doc), computed in the caller's write transaction; with
    `store` the stored horizons are raised to them (never lowered) and rows of cleared policies go."""
    now = time.time()
    stored_global = _global_stored(conn, catalog if store else None)
    watermark = commit_log.readable_csn(conn, oracle)
    bounds = [watermark, commit_log.csn_at_time(conn, now - retention_seconds) or PREHISTORIC_CSN]
    oldest = txn_records.oldest_active_snapshot(conn)
    if oldest is not None:
        bounds.append(oldest)
    global_horizon = min(bounds)
    own: dict[int, tuple[int, float]] = {}
    cleared: list[int] = []
    for row in conn.execute(select(schema.table_retention)).all():
        table_id = int(row.table_id)
        if row.seconds is None and row.versions is None:
            cleared.append(table_id)
            continue
        horizon, window = global_horizon, retention_seconds
        if row.seconds is not None:
            window = max(window, float(row.seconds))
            horizon = min(horizon, commit_log.csn_at_time(conn, now - float(row.seconds)) or PREHISTORIC_CSN)
        if row.versions is not None:
            horizon = min(horizon, _nth_newest_commit(conn, table_id, int(row.versions), watermark))
        own[table_id] = (horizon, window)
        if store and horizon > int(row.horizon):
            conn.execute(update(schema.table_retention).where(_r.table_id == table_id).values(horizon=horizon))
    if store:
        if global_horizon > stored_global:
            conn.execute(update(schema.counters).where(_c.name == schema.COUNTER_VACUUM_HORIZON)
                         .values(value=global_horizon))
        if cleared:  # the global horizon (just raised, and never below their rows) applies to them again
            conn.execute(delete(schema.table_retention).where(_r.table_id.in_(cleared)))
    return Horizons(global_horizon, retention_seconds, own)
