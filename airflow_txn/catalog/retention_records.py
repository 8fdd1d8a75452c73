"""Per-table retention rows (txn_table_retention): a table's own policy (seconds, versions) and its stored
vacuum horizon, which only ever rises. What the policies mean and how horizons are computed is
core/retention.py's business; a table without a row follows the global horizon (catalog/counters.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, delete, func, insert, select, update

from airflow_txn.catalog import schema

_r = schema.table_retention.c


@dataclass(frozen=True, slots=True)
class RetentionRow:
    table_id: int
    seconds: float | None
    versions: int | None
    horizon: int


def _from_row(row: Any) -> RetentionRow:
    return RetentionRow(int(row.table_id), None if row.seconds is None else float(row.seconds),
                        None if row.versions is None else int(row.versions), int(row.horizon))


def save_policy(conn: Connection, table_id: int, horizon_if_new: int, **values: Any) -> None:
    """Set the policy columns (`values`) of the table's row, creating the row with `horizon_if_new` as
    its stored horizon when the table has none yet."""
    if conn.execute(update(schema.table_retention).where(_r.table_id == table_id).values(**values)).rowcount == 0:
        conn.execute(insert(schema.table_retention).values(table_id=table_id, horizon=horizon_if_new, **values))


def of_table(conn: Connection, table_id: int) -> RetentionRow | None:
    row = conn.execute(select(schema.table_retention).where(_r.table_id == table_id)).first()
    return None if row is None else _from_row(row)


def own_horizon(conn: Connection, table_id: int) -> int | None:
    """The table's stored horizon, None when it has no row (it follows the global one)."""
    own = conn.execute(select(_r.horizon).where(_r.table_id == table_id)).scalar()
    return None if own is None else int(own)


def lowest_horizon(conn: Connection) -> int | None:
    """The lowest stored horizon of a table with a row, None when no table has one."""
    lowest = conn.execute(select(func.min(_r.horizon))).scalar()
    return None if lowest is None else int(lowest)


def all_rows(conn: Connection) -> list[RetentionRow]:
    return [_from_row(r) for r in conn.execute(select(schema.table_retention)).all()]


def raise_horizon(conn: Connection, table_id: int, horizon: int) -> None:
    """Store the table's new horizon (the caller checked it is higher)."""
    conn.execute(update(schema.table_retention).where(_r.table_id == table_id).values(horizon=horizon))


def forget(conn: Connection, table_ids: list[int]) -> None:
    """Drop the rows of these tables: they follow the global horizon again."""
    conn.execute(delete(schema.table_retention).where(_r.table_id.in_(table_ids)))
