"""Read-set rows (txn_read_set): what a transaction read, per table and partition key, for the commit
check of its isolation level (core/isolation.py); vacuum drops those of ended transactions."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, Select, String, bindparam, delete, exists, insert, select

from airflow_txn.catalog import schema
from airflow_txn.catalog.txn_records import ENDED_STATES

_rs = schema.read_set.c
_t = schema.transactions.c


def add_reads(conn: Connection, tid: str, table_id: int, keys: list[str]) -> None:
    """Add the partition keys `tid` read of `table_id` to its read set (keys it holds already are skipped)."""
    present = {r.partition_key
               for r in conn.execute(select(_rs.partition_key).where(_rs.tid == tid, _rs.table_id == table_id))}
    new = [k for k in dict.fromkeys(keys) if k not in present]
    if new:
        conn.execute(insert(schema.read_set), [{"tid": tid, "table_id": table_id, "partition_key": k} for k in new])


_HAS_READS = select(_rs.tid).where(_rs.tid == bindparam("b_tid", type_=String())).limit(1)
_READS = select(_rs.table_id, _rs.partition_key).where(_rs.tid == bindparam("b_tid", type_=String()))
"""The commit's read-set lookups, built once (the commit path: every commit asks)."""


def has_reads(conn: Connection, tid: str) -> bool:
    """Whether `tid` has a read set at all."""
    return conn.execute(_HAS_READS, {"b_tid": tid}).first() is not None


def reads(conn: Connection, tid: str) -> dict[int, set[str]]:
    """{table id: partition keys} of `tid`'s read set."""
    out: dict[int, set[str]] = {}
    for r in conn.execute(_READS, {"b_tid": tid}):
        out.setdefault(int(r.table_id), set()).add(str(r.partition_key))
    return out


# -- history vacuum may purge (core/vacuum.py) ----------------------------------------------------------
def of_ended_transactions() -> Select[Any]:
    """Transactions that ended and still have read-set rows: only their own serializable commit read them."""
    ended = select(_t.tid).where(_t.tid == _rs.tid, _t.state.in_(ENDED_STATES))
    return select(_rs.tid).where(exists(ended)).distinct()


def forget(conn: Connection, tids: list[str]) -> int:
    """Drop the read-set rows of these transactions (vacuum); returns the rows deleted."""
    return int(conn.execute(delete(schema.read_set).where(_rs.tid.in_(tids))).rowcount)
