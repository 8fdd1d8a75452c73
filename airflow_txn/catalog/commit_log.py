"""The commit log in the catalog: records (the commit point), their applied flag, and the watermark.

Invariant 4: the readable watermark W is the largest CSN such that every record with CSN <= W is
applied. It is computed, never stored: read the last allocated CSN first, then the smallest
unapplied record; both lookups are index seeks, so their cost does not grow with history.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Select, bindparam, delete, func, insert, select, update

from airflow_txn.catalog import counters, meta_records, schema, tag_records
from airflow_txn.catalog.clock import wall_time

_log = schema.commit_log.c
_tc = schema.table_commits.c


@dataclass(frozen=True, slots=True)
class CommitRecord:
    csn: int
    tid: str
    tables: tuple[str, ...]
    committed_at: float
    applied: bool


_INSERT_RECORD = insert(schema.commit_log)
_INSERT_TABLE_COMMITS = insert(schema.table_commits)
_LOWEST_UNAPPLIED = select(func.min(_log.csn)).where(_log.applied.is_(False))
_READABLE = select(counters.LAST_CSN.scalar_subquery(), _LOWEST_UNAPPLIED.scalar_subquery())
_UNAPPLIED_BELOW = select(_log.csn).where(_log.applied.is_(False), _log.csn < bindparam("b_csn")).limit(1)


def write_record(conn: Connection, csn: int, tid: str, tables: Sequence[tuple[int, str]],
                 committed_at: float | None = None, applied: bool = False) -> None:
    """Insert the commit record and its per-table index rows: from here on the transaction is committed.
    (With an external log this is its mirror, and `committed_at` is the time the log record says.)
    `applied`: the caller stamps the parts in this same catalog transaction (the SQL oracle's commit)."""
    conn.execute(_INSERT_RECORD, {
        "csn": csn, "tid": tid, "tables": json.dumps(sorted(name for _, name in tables)),
        "committed_at": wall_time() if committed_at is None else committed_at, "applied": applied,
    })
    if tables:
        conn.execute(_INSERT_TABLE_COMMITS, [{"table_id": tid_, "csn": csn} for tid_, _ in tables])


def mark_applied(conn: Connection, csn: int) -> None:
    conn.execute(update(schema.commit_log).where(_log.csn == csn).values(applied=True))


def unapplied_below(conn: Connection, csn: int) -> bool:
    """Whether a record older than `csn` is still unapplied (one index seek)."""
    return conn.execute(_UNAPPLIED_BELOW, {"b_csn": csn}).first() is not None


def readable_csn_of_counter(conn: Connection) -> int:
    """readable_csn with the last CSN from the catalog's own counter (the SQL oracle's), both in one statement, so in
    one snapshot of the catalog (a `begin` asks this: one round trip instead of two)."""
    last, lowest_unapplied = conn.execute(_READABLE).one()
    return _below_unapplied(int(last), lowest_unapplied)


def readable_csn(conn: Connection, last: int) -> int:
    """The readable watermark, given the last allocated CSN `last` (the oracle's `last_csn(conn)`, read
    first, by the caller: the catalog does not know the oracle)."""
    return _below_unapplied(last, conn.execute(_LOWEST_UNAPPLIED).scalar())


def _below_unapplied(last: int, lowest_unapplied: int | None) -> int:
    """The watermark: `last`, or just below the oldest record not applied yet if there is one."""
    return last if lowest_unapplied is None else min(last, int(lowest_unapplied) - 1)


def unapplied(conn: Connection, up_to: int | None = None, limit: int = 1000) -> list[CommitRecord]:
    stmt = select(schema.commit_log).where(_log.applied.is_(False))
    if up_to is not None:
        stmt = stmt.where(_log.csn <= up_to)
    rows = conn.execute(stmt.order_by(_log.csn).limit(limit))
    return [_record(r) for r in rows]


def count_unapplied(conn: Connection) -> int:
    return int(conn.execute(select(func.count()).where(_log.applied.is_(False))).scalar_one())


def present_csns(conn: Connection, csns: list[int]) -> set[int]:
    """Which of these CSNs already have their record in the catalog."""
    if not csns:
        return set()
    return {int(c) for c in conn.execute(select(_log.csn).where(_log.csn.in_(csns))).scalars()}


def csns_after(conn: Connection, csn: int, limit: int) -> list[int]:
    """The CSNs of the first `limit` records above `csn`, in order."""
    return [int(c) for c in conn.execute(select(_log.csn).where(_log.csn > csn).order_by(_log.csn).limit(limit))
            .scalars().all()]


def tids_between(conn: Connection, low: int, high: int) -> list[str]:
    """The tids of the records with low <= CSN <= high."""
    return [str(t) for t in conn.execute(select(_log.tid).where(_log.csn >= low, _log.csn <= high)).scalars()]


def records_with_metadata(conn: Connection, after_csn: int, up_to: int,
                          limit: int) -> list[tuple[CommitRecord, str | None]]:
    """The first `limit` records with after_csn < CSN <= up_to, oldest first, each with its transaction's
    metadata as stored (None: none recorded, or the transaction's row was purged)."""
    tx = schema.transactions.c
    stmt = (select(schema.commit_log, tx.metadata_json)
            .join(schema.transactions, tx.tid == _log.tid, isouter=True)
            .where(_log.csn > after_csn, _log.csn <= up_to).order_by(_log.csn).limit(limit))
    return [(_record(r), r.metadata_json) for r in conn.execute(stmt)]


def record_of(conn: Connection, tid: str) -> CommitRecord | None:
    row = conn.execute(select(schema.commit_log).where(_log.tid == tid)).first()
    return None if row is None else _record(row)


def recent(conn: Connection, limit: int = 20) -> list[CommitRecord]:
    rows = conn.execute(select(schema.commit_log).order_by(_log.csn.desc()).limit(limit))
    return [_record(r) for r in rows]


def last_commit_csn(conn: Connection, table_id: int, at_or_below: int) -> int | None:
    stmt = select(func.max(_tc.csn)).where(_tc.table_id == table_id, _tc.csn <= at_or_below)
    value = conn.execute(stmt).scalar()
    return None if value is None else int(value)


PURGED_BELOW_KEY = "table_commits_purged_below"
"""The txn_meta key of the highest `keep` a vacuum purged table-commit rows below (purgeable_table_commits)."""


def note_purge_below(conn: Connection, keep: int) -> None:
    """Record, before purging, that table-commit rows below `keep` may go (the highest such `keep` stays)."""
    found = meta_records.value(conn, PURGED_BELOW_KEY)
    if found is None or int(found) < keep:
        meta_records.put(conn, PURGED_BELOW_KEY, str(keep))


def version_at(conn: Connection, table_id: int, at: int) -> int | None:
    """`last_commit_csn` at snapshot `at` where the rows left answer it exactly; None where a purge may have
    taken the answer: `at` below the newest row kept under the purge point, and no tag at exactly `at` holding
    the table (whose row the purge keeps: purgeable_table_commits). Never an older commit's CSN the snapshot
    did not show."""
    found = last_commit_csn(conn, table_id, at)
    purged = meta_records.value(conn, PURGED_BELOW_KEY)
    if found is None or purged is None or at >= int(purged):
        return found
    newest_kept = last_commit_csn(conn, table_id, int(purged) - 1)
    if newest_kept is None or at >= newest_kept:
        return found
    held = any(tag.csn == at and table_id in tag.table_ids for tag in tag_records.all_tags(conn))
    return found if held else None


def tables_of(conn: Connection, csn: int) -> list[int]:
    """The ids of the tables the record with this CSN touched."""
    return [int(r.table_id) for r in conn.execute(select(_tc.table_id).where(_tc.csn == csn))]


def nth_newest_commit(conn: Connection, table_id: int, n: int, at_or_below: int) -> int | None:
    """The CSN of the table's n-th newest commit at or below `at_or_below` (None: it has fewer)."""
    stmt = (select(_tc.csn).where(_tc.table_id == table_id, _tc.csn <= at_or_below)
            .order_by(_tc.csn.desc()).offset(n - 1).limit(1))
    value = conn.execute(stmt).scalar()
    return None if value is None else int(value)


def commits_after(conn: Connection, table_ids: Sequence[int], after_csn: int) -> list[tuple[int, str]]:
    """(table_id, tid) of every commit with CSN > after_csn that touched one of the tables."""
    if not table_ids:
        return []
    stmt = (
        select(_tc.table_id, _log.tid)
        .join(schema.commit_log, _log.csn == _tc.csn)
        .where(_tc.table_id.in_(list(table_ids)), _tc.csn > after_csn)
    )
    return [(int(r.table_id), str(r.tid)) for r in conn.execute(stmt)]


def csn_at_time(conn: Connection, at: float) -> int | None:
    """The CSN of the last commit at or before time `at` (the snapshot that was current then)."""
    stmt = select(_log.csn).where(_log.committed_at <= at).order_by(_log.committed_at.desc()).limit(1)
    value = conn.execute(stmt).scalar()
    return None if value is None else int(value)


def _record(row: object) -> CommitRecord:
    return CommitRecord(
        csn=int(row.csn),  # type: ignore[attr-defined]
        tid=str(row.tid),  # type: ignore[attr-defined]
        tables=tuple(json.loads(row.tables)),  # type: ignore[attr-defined]
        committed_at=float(row.committed_at),  # type: ignore[attr-defined]
        applied=bool(row.applied),  # type: ignore[attr-defined]
    )


# -- history vacuum may purge (vacuum.py) -------------------------------------------------------------
def purgeable_records(keep_csn: int, committed_before: float) -> Select[Any]:
    """Applied records below `keep_csn` (below every running snapshot and every stored horizon: no read,
    watermark or serializable check looks at them) committed before `committed_before`."""
    return select(_log.csn).where(_log.applied.is_(True), _log.csn < keep_csn, _log.committed_at < committed_before)


def purge_records(conn: Connection, csns: list[int]) -> int:
    return int(conn.execute(delete(schema.commit_log).where(_log.csn.in_(csns), _log.applied.is_(True))).rowcount)


def purgeable_table_commits(table_id: int, keep_csn: int) -> Select[Any]:
    """A table's commit rows below `keep_csn` except its newest one there: `last_commit_csn` at any readable
    snapshot and the `versions` retention rule (whose horizon is never above the N-th newest) stay exact; and
    except the newest one at or below each tag holding the table: `last_commit_csn` at the tag's CSN (its
    lineage version) stays exact too (docs/DESIGN.md D18)."""
    below = schema.table_commits.alias("below")  # not correlated with the rows being selected
    newest_below = (select(func.max(below.c.csn)).where(below.c.table_id == table_id, below.c.csn < keep_csn)
                    .scalar_subquery())
    return select(_tc.csn).where(_tc.table_id == table_id, _tc.csn < newest_below,
                                 ~tag_records.keeps_table_commit(table_id, _tc.csn))


def purge_table_commits(conn: Connection, table_id: int, csns: list[int]) -> int:
    stmt = delete(schema.table_commits).where(_tc.table_id == table_id, _tc.csn.in_(csns))
    return int(conn.execute(stmt).rowcount)


def table_commit_csns(conn: Connection, table_id: int, after: int, upto: int) -> list[int]:
    """The CSNs in (after, upto] of the commits that touched `table_id`, in order (the publishers')."""
    stmt = (select(_tc.csn).where(_tc.table_id == table_id, _tc.csn > after, _tc.csn <= upto).order_by(_tc.csn))
    return [int(c) for c in conn.execute(stmt).scalars()]


def committed_at(conn: Connection, csns: Sequence[int]) -> list[float]:
    """The commit times of the commits `csns` (those the log still holds)."""
    if not csns:
        return []
    return [float(t) for t in conn.execute(select(_log.committed_at).where(_log.csn.in_(sorted(set(csns))))).scalars()]
