"""The visibility rule of invariant 2 (docs/DESIGN.md) as SQL: the WHERE clauses every read of parts uses.

Part p is visible to transaction T with snapshot S iff
    (p.creation_tid == T.tid and p.removal_tid != T.tid)
 or (p.creation_csn set and <= S and not (p.removal_csn set and <= S) and p.removal_tid != T.tid).
A reader outside any transaction uses tid None, which matches no part's tids.

The same rule as a pure Python function is core/visibility.py's `is_visible`. The SQL form lives here,
apart from it, because the catalog owns every statement on its tables (part_records.py and the
overview's totals build on these clauses); tests/core/test_visibility.py checks that the two agree on
every combination of the version columns.
"""

from __future__ import annotations

from sqlalchemy import ColumnElement, Table, and_, or_

from airflow_txn.catalog import schema


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
