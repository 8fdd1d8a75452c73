"""The catalog's named counters (txn_counters): every statement on them.

last_csn        the SQL oracle's CSN counter (oracle/sql.py); with an external log (ZooKeeper) the
                mirrored prefix: every record with CSN <= it is in the catalog (core/log_mirror.py)
vacuum_horizon  the stored global horizon, only ever raised (core/retention.py)
snapshot_gate   held in share mode by every `begin` and bumped by vacuum while it takes its horizons,
                so no transaction starts from an older snapshot meanwhile (core/vacuum.py)

The rows are seeded when the catalog is created (catalog/database.py). The statements of the hot path
(begin, commit, readers' watermark) are built once.
"""

from __future__ import annotations

from sqlalchemy import Connection, select, update

from airflow_txn.catalog import schema
from airflow_txn.catalog.database import Catalog

_c = schema.counters.c

LAST_CSN = select(_c.value).where(_c.name == schema.COUNTER_LAST_CSN)
"""The last_csn counter's value (a statement other catalog modules may embed: commit_log.readable_csn_of_counter)."""
_LAST_CSN_LOCKED = LAST_CSN.with_for_update()
_NEXT_CSN = (
    update(schema.counters)
    .where(_c.name == schema.COUNTER_LAST_CSN)
    .values(value=_c.value + 1)
    .returning(_c.value)
)
_GATE_SHARED = select(_c.value).where(_c.name == schema.COUNTER_SNAPSHOT_GATE).with_for_update(read=True)
_GATE_BUMP = update(schema.counters).where(_c.name == schema.COUNTER_SNAPSHOT_GATE).values(value=_c.value + 1)
_VACUUM_HORIZON = select(_c.value).where(_c.name == schema.COUNTER_VACUUM_HORIZON)
_VACUUM_HORIZON_LOCKED = _VACUUM_HORIZON.with_for_update()


# -- last_csn -----------------------------------------------------------------------------------------
def last_csn(conn: Connection, catalog: Catalog | None = None) -> int:
    """The last_csn counter; with a catalog, locked FOR UPDATE where the dialect has row locks."""
    locked = catalog is not None and catalog.supports_for_update
    return int(conn.execute(_LAST_CSN_LOCKED if locked else LAST_CSN).scalar_one())


def next_csn(conn: Connection) -> int:
    """`UPDATE ... SET value = value + 1 RETURNING value`: the next CSN, the row locked (PostgreSQL; the
    database lock on SQLite) until the caller's catalog transaction ends."""
    return int(conn.execute(_NEXT_CSN).scalar_one())


def set_last_csn(conn: Connection, value: int) -> None:
    conn.execute(update(schema.counters).where(_c.name == schema.COUNTER_LAST_CSN).values(value=value))


# -- snapshot_gate ------------------------------------------------------------------------------------
def share_snapshot_gate(conn: Connection, catalog: Catalog) -> None:
    """Hold the gate row in share mode until the caller's transaction ends (a `begin`). Nothing to do on
    SQLite: the writer's BEGIN IMMEDIATE already excludes a concurrent gate holder."""
    if catalog.supports_for_update:
        conn.execute(_GATE_SHARED)


def bump_snapshot_gate(conn: Connection) -> None:
    """Take the gate row exclusively (waiting for every `begin` holding it) by bumping its value."""
    conn.execute(_GATE_BUMP)


# -- vacuum_horizon -----------------------------------------------------------------------------------
def vacuum_horizon(conn: Connection, catalog: Catalog | None = None) -> int:
    """The stored global horizon; with a catalog, locked FOR UPDATE where the dialect has row locks."""
    locked = catalog is not None and catalog.supports_for_update
    return int(conn.execute(_VACUUM_HORIZON_LOCKED if locked else _VACUUM_HORIZON).scalar_one())


def set_vacuum_horizon(conn: Connection, value: int) -> None:
    conn.execute(update(schema.counters).where(_c.name == schema.COUNTER_VACUUM_HORIZON).values(value=value))
