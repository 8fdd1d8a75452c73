"""Tag rows (txn_tags, txn_tag_tables): named snapshots, each a CSN and the tables it holds, and the clause
vacuum keeps their parts by. What a tag may name and how reads use one is core/tags.py's business."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, Connection, and_, delete, exists, insert, select
from sqlalchemy.exc import IntegrityError

from airflow_txn.catalog import schema, table_versions
from airflow_txn.errors import TagExistsError

_g = schema.tags.c
_gt = schema.tag_tables.c
_t = schema.tables.c
_p = schema.parts.c


@dataclass(frozen=True, slots=True)
class TagRow:
    name: str
    csn: int
    created_at: float
    note: str | None
    tables: tuple[str, ...]  # qualified names, sorted
    table_ids: tuple[int, ...]


def insert_tag(conn: Connection, name: str, csn: int, table_ids: Sequence[int], created_at: float,
               note: str | None) -> None:
    """Record the tag; TagExistsError when the name is taken (checked, and by the primary key on a race)."""
    if conn.execute(select(_g.name).where(_g.name == name)).first() is not None:
        raise TagExistsError(f"tag {name!r} exists already (a tag never moves): untag it first or pick another name")
    try:
        conn.execute(insert(schema.tags).values(name=name, csn=csn, created_at=created_at, note=note))
    except IntegrityError as exc:
        raise TagExistsError(f"tag {name!r} exists already") from exc
    conn.execute(insert(schema.tag_tables), [{"tag": name, "table_id": i} for i in sorted(set(table_ids))])


def _rows(conn: Connection, name: str | None) -> list[TagRow]:
    stmt = (select(_g.name, _g.csn, _g.created_at, _g.note, _t.id, _t.name.label("table"))
            .join(schema.tag_tables, _gt.tag == _g.name).join(schema.tables, _t.id == _gt.table_id))
    if name is not None:
        stmt = stmt.where(_g.name == name)
    by_name: dict[str, list[Any]] = {}
    for row in conn.execute(stmt.order_by(_g.csn.desc(), _g.name, _t.name)):
        by_name.setdefault(str(row.name), []).append(row)
    named = _names_at_csns(conn, {(int(r.csn), int(r.id)) for rows in by_name.values() for r in rows})
    found = []
    for tag, rows in by_name.items():
        csn = int(rows[0].csn)
        held = sorted((named.get((csn, int(r.id)), str(r.table)), int(r.id)) for r in rows)
        found.append(TagRow(name=tag, csn=csn, created_at=float(rows[0].created_at), note=rows[0].note,
                            tables=tuple(n for n, _ in held), table_ids=tuple(i for _, i in held)))
    return found


def _names_at_csns(conn: Connection, held: set[tuple[int, int]]) -> dict[tuple[int, int], str]:
    """{(CSN, table id): the name of the table's version visible at that CSN}: a tag lists its tables by the names
    they had at its CSN (docs/DESIGN.md D27: txn_tables.name is the newest name, a renamed table's, or `~<id>` for
    a table that gave its name up). One query per distinct CSN; none on a catalog without versions (no renames)."""
    if not held or not table_versions.present(conn):
        return {}
    by_csn: dict[int, list[int]] = {}
    for csn, table_id in held:
        by_csn.setdefault(csn, []).append(table_id)
    return {(csn, table_id): row.name for csn, ids in by_csn.items()
            for table_id, row in table_versions.visible(conn, sorted(ids), None, csn).items()}


def find(conn: Connection, name: str) -> TagRow | None:
    found = _rows(conn, name)
    return found[0] if found else None


def all_tags(conn: Connection) -> list[TagRow]:
    """Every tag, the newest CSN first (then by name)."""
    return _rows(conn, None)


def delete_tag(conn: Connection, name: str) -> bool:
    """Forget the tag; False when there was none."""
    conn.execute(delete(schema.tag_tables).where(_gt.tag == name))
    return conn.execute(delete(schema.tags).where(_g.name == name)).rowcount > 0


def pinned_by_a_tag() -> ColumnElement[bool]:
    """A WHERE clause over txn_parts: some tag holding the part's table can see the part (created at or
    before the tag's CSN and removed after it). Vacuum deletes no such part."""
    return exists(
        select(_gt.tag).join(schema.tags, _g.name == _gt.tag).where(
            _gt.table_id == _p.table_id,
            and_(_p.creation_csn.is_not(None), _p.creation_csn <= _g.csn),
            and_(_p.removal_csn.is_not(None), _p.removal_csn > _g.csn),
        )
    )


def keeps_table_commit(table_id: int, csn: ColumnElement[int]) -> ColumnElement[bool]:
    """A WHERE clause over txn_table_commits rows of `table_id`: the row at `csn` is the table's newest commit
    at or below some tag holding the table, so `last_commit_csn` at the tag's CSN (the version lineage names)
    needs it. Vacuum purges no such row."""
    later = schema.table_commits.alias("later_commit")
    return exists(
        select(_gt.tag).join(schema.tags, _g.name == _gt.tag).where(
            _gt.table_id == table_id, csn <= _g.csn,
            ~exists(select(later.c.csn).where(later.c.table_id == table_id, later.c.csn > csn,
                                              later.c.csn <= _g.csn).correlate_except(later)),
        )
    )
