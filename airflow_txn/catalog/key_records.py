"""Staging-key rows in the catalog: txn_keys, per (transaction, key), the newest attempt started under
the key (the zombie fence) and, when a retry of another key withdrew this key's work, which key did and
at which attempt (the key must run again before commit); txn_scans, what each statement of a
transaction scanned, numbered in statement order. Callers hold the transaction's row lock, so the
read-then-write upserts and the statement numbers here never race within a transaction."""

from __future__ import annotations

import functools
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Connection,
    Select,
    String,
    and_,
    bindparam,
    delete,
    exists,
    func,
    insert,
    or_,
    select,
    true,
    union,
    update,
)

from airflow_txn.catalog import schema
from airflow_txn.catalog.txn_records import OPEN_STATES
from airflow_txn.model.partitioning import WHOLE_TABLE

_k = schema.keys.c
_s = schema.scans.c

NOTHING_SCANNED = ""
"""The partition key of an append's scan row: it scanned nothing, the row only records its place in order."""
WRITE, READ = "write", "read"


@dataclass(frozen=True, slots=True)
class KeyRow:
    key: str
    attempt: int | None
    invalidated_by: str | None
    invalidated_attempt: int | None


def fetch(conn: Connection, tid: str, key: str) -> KeyRow | None:
    row = conn.execute(select(schema.keys).where(_k.tid == tid, _k.key == key)).first()
    if row is None:
        return None
    return KeyRow(str(row.key), _int(row.attempt), row.invalidated_by, _int(row.invalidated_attempt))


def _int(value: object) -> int | None:
    return None if value is None else int(value)  # type: ignore[call-overload]


def start_attempt(conn: Connection, tid: str, key: str, attempt: int, known: KeyRow | None) -> None:
    """Record that `attempt` started under `key` (kept: the highest attempt seen). `known`: the row as
    the caller just fetched it."""
    if known is None:
        conn.execute(insert(schema.keys).values(tid=tid, key=key, attempt=attempt))
    elif known.attempt is None or known.attempt < attempt:
        conn.execute(update(schema.keys).where(_k.tid == tid, _k.key == key).values(attempt=attempt))


def invalidate(conn: Connection, tid: str, withdrawn_by: Mapping[str, str]) -> None:
    """Mark each key of `withdrawn_by` as withdrawn by the retry of its value: the attempt current now
    may not go on, and commit waits until the key runs again."""
    for key, by in withdrawn_by.items():
        known = fetch(conn, tid, key)
        if known is None:
            conn.execute(insert(schema.keys).values(tid=tid, key=key, invalidated_by=by))
        else:
            conn.execute(update(schema.keys).where(_k.tid == tid, _k.key == key)
                         .values(invalidated_by=by, invalidated_attempt=known.attempt))


def clear(conn: Connection, tid: str, key: str) -> None:
    """`key` ran again: nothing of it is left to re-run."""
    conn.execute(update(schema.keys).where(_k.tid == tid, _k.key == key, _k.invalidated_by.is_not(None))
                 .values(invalidated_by=None, invalidated_attempt=None))


# commit's check (retries.require_nothing_to_rerun) runs it once per commit: built once
_INVALIDATED = select(_k.key, _k.invalidated_by).where(_k.tid == bindparam("b_tid", type_=String()),
                                                      _k.invalidated_by.is_not(None))


def invalidated(conn: Connection, tid: str) -> dict[str, str]:
    """{key: the key whose retry withdrew it} for every key of `tid` that must run again."""
    rows = conn.execute(_INVALIDATED, {"b_tid": tid})
    return {str(r.key): str(r.invalidated_by) for r in rows}


def record_scan(conn: Connection, tid: str, key: str | None, attempt: int | None, table_id: int,
                scanned: Sequence[str], kind: str) -> None:
    """Number the statement after every earlier one of `tid` and record what it scanned (partition
    keys, WHOLE_TABLE, or nothing: NOTHING_SCANNED)."""
    last = conn.execute(select(func.max(_s.seq)).where(_s.tid == tid)).scalar()
    seq = 1 if last is None else int(last) + 1
    conn.execute(insert(schema.scans), [
        {"tid": tid, "seq": seq, "table_id": table_id, "partition_key": p, "key": key, "attempt": attempt,
         "kind": kind}
        for p in dict.fromkeys(scanned or [NOTHING_SCANNED])
    ])


def tables_read(conn: Connection, tid: str, key: str | None = None, attempt: int | None = None) -> list[int]:
    """The ids of the tables `tid` read through keyed handles (`key`: only that key's reads; `attempt`: only
    that attempt's), reads a retry withdrew excluded (their rows are gone)."""
    where = [_s.tid == tid, _s.kind == READ]
    if key is not None:
        where.append(_s.key == key)
    if attempt is not None:
        where.append(_s.attempt == attempt)
    return sorted(int(r.table_id) for r in conn.execute(select(_s.table_id).where(*where).distinct()))


def _older(column: ColumnElement[int], attempt: int | None) -> ColumnElement[bool]:
    return true() if attempt is None else or_(column.is_(None), column < attempt)


@functools.cache
def _staged_before_stmt(versions: bool, every_attempt: bool) -> Select[Any]:
    """staged_before's statement, built once per shape (its values bound at execution)."""
    tid, key, attempt = (bindparam("b_tid", type_=String()), bindparam("b_key", type_=String()),
                         bindparam("b_attempt", type_=BigInteger()))

    def older(column: ColumnElement[int]) -> ColumnElement[bool]:
        return true() if every_attempt else or_(column.is_(None), column < attempt)

    p, v = schema.parts.c, schema.table_versions.c
    found = [exists().where(p.creation_tid == tid, p.stage_key == key, older(p.stage_attempt)),
             exists().where(p.removal_tid == tid, p.removal_key == key, older(p.removal_attempt)),
             exists().where(_s.tid == tid, _s.key == key, older(_s.attempt))]
    if versions:
        found += [exists().where(v.creation_tid == tid, v.stage_key == key, older(v.stage_attempt)),
                  exists().where(v.removal_tid == tid, v.removal_key == key, older(v.removal_attempt))]
    return select(or_(*found))


def staged_before(conn: Connection, tid: str, key: str, attempt: int | None, versions: bool) -> bool:
    """Whether `key`'s attempts before `attempt` (None: every attempt) left anything in `tid`: a part staged or
    removal-locked, a statement's scan, or (`versions`: the catalog has txn_table_versions, schema version 7) a
    version of a table's schema staged or locked. False means withdrawing them would change nothing and nothing
    built on them (retries.py): one lookup instead of the withdrawal's nine statements (docs/BENCHMARKS.md, B11)."""
    params: dict[str, Any] = {"b_tid": tid, "b_key": key}
    if attempt is not None:
        params["b_attempt"] = attempt
    return bool(conn.execute(_staged_before_stmt(versions, attempt is None), params).scalar())


def first_statements(conn: Connection, tid: str, key: str, attempt: int | None) -> dict[int, int]:
    """{table id: the number of the first statement} of `key`'s attempts before `attempt` (None: every
    attempt), per table it wrote or read."""
    rows = conn.execute(select(_s.table_id, func.min(_s.seq).label("seq"))
                        .where(_s.tid == tid, _s.key == key, _older(_s.attempt, attempt)).group_by(_s.table_id))
    return {int(r.table_id): int(r.seq) for r in rows}


def scanned_after(conn: Connection, tid: str, since: Mapping[int, int], partitions: Collection[tuple[int, str]],
                  kinds: Sequence[str], other_than: str) -> set[str | None]:
    """Keys (None: a write with no key) other than `other_than` whose statements of a kind in `kinds`
    scanned one of `partitions` ((table id, partition key); a whole-table scan covers every partition)
    after statement `since[table id]`."""
    by_table: dict[int, set[str]] = {}
    for table_id, partition in partitions:
        if table_id in since:
            by_table.setdefault(table_id, {WHOLE_TABLE}).add(partition)
    if not by_table:
        return set()
    covered = or_(*[and_(_s.table_id == t, _s.seq > since[t], _s.partition_key.in_(sorted(keys)))
                    for t, keys in by_table.items()])
    stmt = select(_s.key).where(_s.tid == tid, _s.kind.in_(list(kinds)), covered,
                                or_(_s.key.is_(None), _s.key != other_than)).distinct()
    return {r.key for r in conn.execute(stmt)}


def forget_scans(conn: Connection, tid: str, key: str, attempt: int | None, writes_only: bool) -> None:
    """Drop what `key`'s attempts before `attempt` scanned (their work is withdrawn); `writes_only` keeps
    its reads (an explicit key's read precedes the write that withdraws the key's earlier writes)."""
    where = [_s.tid == tid, _s.key == key, _older(_s.attempt, attempt)]
    if writes_only:
        where.append(_s.kind == WRITE)
    conn.execute(delete(schema.scans).where(*where))


def of_ended_transactions() -> Select[Any]:
    """The transactions with key or scan rows that are no longer open (or whose row is gone): only a
    running transaction's retries read these rows, so vacuum drops them."""
    t = schema.transactions.c
    tids = union(select(_k.tid), select(_s.tid)).subquery()
    still_open = select(t.tid).where(t.tid == tids.c.tid, t.state.in_(OPEN_STATES))
    return select(tids.c.tid).where(~exists(still_open))


def forget(conn: Connection, tids: list[str]) -> int:
    """Drop the key and scan rows of ended transactions (vacuum); returns the rows deleted."""
    if not tids:
        return 0
    scans = conn.execute(delete(schema.scans).where(_s.tid.in_(tids))).rowcount
    return int(scans) + int(conn.execute(delete(schema.keys).where(_k.tid.in_(tids))).rowcount)
