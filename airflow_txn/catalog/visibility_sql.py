"""The visibility rule of invariant 2 (docs/DESIGN.md) as SQL: the WHERE clauses every read of parts uses.

Part p is visible to transaction T with snapshot S iff
    (p.creation_tid == T.tid and p.removal_tid != T.tid)
 or (p.creation_csn set and <= S and not (p.removal_csn set and <= S) and p.removal_tid != T.tid).
A reader outside any transaction uses tid None, which matches no part's tids.

The same rule as a pure Python function is model/visibility.py's `is_visible`. The SQL form lives here,
apart from it, because the catalog owns every statement on its tables (part_records.py and the
overview's totals build on these clauses); tests/core/test_visibility.py checks that the two agree on
every combination of the version columns.

`visible_selects` runs the rule as a lookup whose cost follows the parts visible at the snapshot, not the
table's history (docs/DESIGN.md, D31): a committed part visible at S either still lives (removal_csn NULL,
creation_csn <= S: the few live parts of the table) or ended after S (creation_csn <= S < removal_csn). An
ended part of span level k (schema.SPAN_LEVEL_SQL: 2**k <= removal_csn - creation_csn < 2**(k+1)) visible
at S was created in (S - 2**(k+1), S]: one creation_csn range of index ix_txn_parts_span per level, whose
entries the part ended by S are at most the parts of level k visible at S - 2**k (each of them was).
`visible_branches` is the older form (removal_csn > S: every part removed after S, half the history at a
mid snapshot), kept for catalogs without that index (index version below 3: D23, they are used as they are).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from sqlalchemy import (
    CTE,
    BigInteger,
    ColumnElement,
    Integer,
    Select,
    Table,
    and_,
    column,
    literal_column,
    or_,
    select,
    text,
    true,
)

from airflow_txn.catalog import schema
from airflow_txn.model.csn import INT64_MAX


def visible_clause(tid: str | ColumnElement[str] | None, snapshot: int | ColumnElement[int]) -> ColumnElement[bool]:
    """The rule as a WHERE clause over the parts table (bound parameters only; `tid` and `snapshot`
    may be bindparams, for a statement built once and executed with values)."""
    return _rule(schema.parts, tid, snapshot)


def version_visible_clause(tid: str | ColumnElement[str] | None,
                           snapshot: int | ColumnElement[int]) -> ColumnElement[bool]:
    """The same rule over txn_table_versions: a table's schema at a snapshot is its one version visible there
    (docs/DESIGN.md, D27), by the parts' rule and no other (`tid` and `snapshot` may be bindparams)."""
    return _rule(schema.table_versions, tid, snapshot)


def _rule(table: Table, tid: str | ColumnElement[str] | None,
          snapshot: int | ColumnElement[int]) -> ColumnElement[bool]:
    p = table.c
    committed = and_(
        p.creation_csn.is_not(None),
        p.creation_csn <= snapshot,
        or_(p.removal_csn.is_(None), p.removal_csn > snapshot),
    )
    if tid is None:
        return committed
    not_removed_by_me = or_(p.removal_tid.is_(None), p.removal_tid != tid)
    return and_(not_removed_by_me, or_(p.creation_tid == tid, committed))


def visible_branches(tid: str | ColumnElement[str] | None,
                     snapshot: int | ColumnElement[int]) -> list[ColumnElement[bool]]:
    """visible_clause as disjoint clauses whose union it is: the reader's own parts, and the committed
    parts of others. Selected as a UNION ALL, each branch gets its own index (creation_tid; table_id +
    removal_csn); under the OR of visible_clause SQLite scans every part of the table instead."""
    p = schema.parts.c
    if tid is None:
        return [visible_clause(None, snapshot)]
    not_removed_by_me = or_(p.removal_tid.is_(None), p.removal_tid != tid)
    return [and_(p.creation_tid == tid, not_removed_by_me),
            and_(p.creation_tid != tid, visible_clause(None, snapshot), not_removed_by_me)]


_SPAN_LEVEL: ColumnElement[Any] = literal_column(schema.SPAN_LEVEL_SQL)
"""The span level in the exact text of ix_txn_parts_span's expression (unqualified: the index's own columns)."""


@functools.cache
def _levels(dialect: str) -> CTE:
    """(k, w): each span level and the width of the creation_csn window its visible parts lie in, (S - w, S]. The top
    level holds every longer life: its window is every CSN (S - INT64_MAX < 1 for every snapshot S >= 0)."""
    top = schema.SPAN_LEVELS
    if dialect == "postgresql":
        # generated, not listed: the lookup's text then stays under psycopg's 4,096-character limit for caching a
        # statement's conversion (a listed VALUES made it 4,670 long: converted anew at every lookup)
        rows_sql = (f"SELECT k, CASE WHEN k < {top} THEN CAST(2 AS BIGINT) << k ELSE {INT64_MAX} END AS w "  # noqa: S608
                    f"FROM generate_series(0, {top}) AS k")  # integers of this module
    else:
        rows = [(k, 2 ** (k + 1)) for k in range(top)] + [(top, INT64_MAX)]
        # as text: SQLAlchemy caches a statement holding it compiled (its VALUES construct made every lookup compile
        # anew); one VALUES list (SQLite names its columns column1, column2) plans faster than a UNION ALL
        listed = ", ".join(f"({k}, {w})" for k, w in rows)  # integers of this module
        rows_sql = f"SELECT column1 AS k, column2 AS w FROM (VALUES {listed}) AS span_level_rows"  # noqa: S608
    return text(rows_sql).columns(column("k", Integer()), column("w", BigInteger())).cte("span_levels")


def _ended_select(wanted: Sequence[Any], where: Sequence[ColumnElement[bool]], snapshot: int | ColumnElement[int],
                  dialect: str) -> Select[Any]:
    """The parts matching `where` that ended after `snapshot` and were created by it: per span level, one range of
    ix_txn_parts_span. `removal_csn + 0` keeps the planners off the removal_csn indexes (their range is the
    history after S). PostgreSQL gets the levels as a LATERAL subquery (OFFSET 0 keeps it one: a nested loop
    of index probes, where a join of the same tables plans a hash join over the table's history); SQLite
    has no LATERAL and plans the join as a loop over the levels."""
    p, lv = schema.parts.c, _levels(dialect)
    ended = [lv.c.k == _SPAN_LEVEL, p.creation_csn <= snapshot, p.creation_csn > snapshot - lv.c.w,
             p.removal_csn + literal_column("0") > snapshot, *where]
    if dialect == "postgresql":
        probe = select(*wanted).where(*ended).offset(0).lateral("ended_parts")
        return select(*probe.c).select_from(lv.join(probe, true()))
    return select(*wanted).select_from(lv.join(schema.parts, and_(*ended)))


def visible_selects(wanted: Sequence[Any], where: Sequence[ColumnElement[bool]], tid: str | ColumnElement[str] | None,
                    snapshot: int | ColumnElement[int], dialect: str) -> list[Select[Any]]:
    """SELECTs of the `wanted` part columns whose UNION ALL is exactly the parts matching `where` (the table, its
    partitions) visible to `tid` at `snapshot`, each part once, by index ix_txn_parts_span (which the catalog must
    have: index version 3). `dialect`: the catalog's database ("sqlite", "postgresql")."""
    p = schema.parts.c
    live = [p.removal_csn.is_(None), p.creation_csn <= snapshot]
    if tid is None:
        return [select(*wanted).where(*where, *live), _ended_select(wanted, where, snapshot, dialect)]
    not_removed_by_me = or_(p.removal_tid.is_(None), p.removal_tid != tid)
    others = [*where, p.creation_tid != tid, not_removed_by_me]
    return [select(*wanted).where(*where, p.creation_tid == tid, not_removed_by_me),
            select(*wanted).where(*others, *live),
            _ended_select(wanted, others, snapshot, dialect)]
