"""The embedded CSN oracle: a counter row in the catalog, bumped in the commit record's transaction."""

from __future__ import annotations

from sqlalchemy import Connection, select, update

from airflow_txn.catalog import Catalog, schema
from airflow_txn.oracle.base import CsnOracle

_counter = schema.counters.c
_NEXT = (
    update(schema.counters)
    .where(_counter.name == schema.COUNTER_LAST_CSN)
    .values(value=_counter.value + 1)
    .returning(_counter.value)
)
_LAST = select(_counter.value).where(_counter.name == schema.COUNTER_LAST_CSN)


class SqlOracle(CsnOracle):
    """CSNs from `UPDATE txn_counters SET value = value + 1 ... RETURNING value` (a row lock on PostgreSQL,
    the database lock on SQLite), so the record that takes CSN n is visible before any with n+1."""

    name = "sql"

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog

    def next_csn(self, conn: Connection) -> int:
        return int(conn.execute(_NEXT).scalar_one())

    def last_csn(self, conn: Connection) -> int:
        return int(conn.execute(_LAST).scalar_one())
