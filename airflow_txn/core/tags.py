"""Named snapshots (tags): a name for one CSN of a set of tables, readable by that name for as long as the tag
exists, whatever the retention (docs/DESIGN.md, D18).

A tag is made at a readable CSN (default: the readable watermark) no older than the stored horizon of any
table it holds, checked and recorded in one catalog transaction that locks the global horizon counter as
vacuum does when it stores horizons: so vacuum either stored its horizons first (and the tag is refused
with SnapshotTooOldError) or sees the tag when it picks garbage (catalog/tag_records.pinned_by_a_tag keeps
every part the tag sees). A tag never moves: `untag` and tag again. Untagging releases its parts: the next
vacuum deletes those no horizon, retention policy or other tag keeps.

Reads at a tag (`resolve`, then `confirm` after the files were read) need no horizon check: the parts are
pinned while the tag exists, and a read that finds the tag gone (or replaced) when it is done raises
TagNotFoundError rather than return what a vacuum in between may have cut short. Manifests are written at a
tag the same way (manifests.py, through the read planner), or at a CSN below the retention horizon where tags at
exactly that CSN hold every table below it (`holding`); vacuum keeps the manifests of a tagged CSN (`held`) and the
table-commit row each held table's last commit at or below the tag's CSN needs (its lineage version).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import Connection

from airflow_txn.catalog import counters, table_registry, tag_records
from airflow_txn.catalog.table_registry import TableInfo
from airflow_txn.catalog.tag_records import TagRow
from airflow_txn.core import apply, bounds, retention
from airflow_txn.core.runtime import Runtime
from airflow_txn.errors import (
    InvalidArgumentError,
    InvalidNameError,
    SnapshotTooOldError,
    TableNotInTagError,
    TagExistsError,
    TagNotFoundError,
)
from airflow_txn.model.csn import PREHISTORIC_CSN
from airflow_txn.model.names import MAX_LABEL_LENGTH, check_tag_name, parse_table_name
from airflow_txn.model.results import TagInfo
from airflow_txn.telemetry import logs

log = logs.get_logger(__name__)


def info_of(row: TagRow) -> TagInfo:
    return TagInfo(name=row.name, csn=row.csn, tables=list(row.tables), created_at=row.created_at, note=row.note)


def _table_names(tables: object) -> list[str] | None:
    """The `tables` argument checked: None (every table) or a non-empty list of table names."""
    if tables is None:
        return None
    if isinstance(tables, str) or not isinstance(tables, Sequence):
        raise InvalidNameError(f"tables must be a list of table names (or None: every table), got {tables!r}")
    names = [parse_table_name(t).qualified for t in tables]
    if not names:
        raise InvalidArgumentError("tables is empty: a tag holds at least one table (None: every table)")
    return sorted(set(names))


def create(rt: Runtime, name: str, csn: int | None = None, tables: Sequence[str] | None = None,
           note: str | None = None) -> TagInfo:
    """Name snapshot `csn` (None: the readable watermark) of `tables` (None: every table); every argument
    is checked before anything is written (module doc)."""
    check_tag_name(name)
    wanted = None if csn is None else bounds.catalog_int(csn, "csn", PREHISTORIC_CSN)
    names = _table_names(tables)
    _check_note(note)
    watermark = apply.readable_csn(rt)
    if wanted is not None and wanted > watermark:
        apply.apply_pending(rt, up_to=wanted)  # a committed record not applied yet: apply it, as a read would
        watermark = apply.readable_csn(rt)
        if wanted > watermark:
            raise InvalidArgumentError(f"csn {wanted} is above the readable watermark {watermark}: a tag names a "
                                       "committed, readable snapshot (wait_for_csn first)")
    snapshot = watermark if wanted is None else wanted
    with rt.catalog.write() as conn:
        counters.vacuum_horizon(conn, rt.catalog)  # locked: vacuum stores its horizons under this lock too
        infos = table_registry.all_tables(conn) if names is None else [table_registry.get(conn, n) for n in names]
        if not infos:
            raise InvalidArgumentError("there is no table to tag: create a table first")
        for info in infos:
            horizon = retention.table_horizon(conn, info.id)
            if snapshot < horizon:
                raise SnapshotTooOldError(f"table {info.name}: CSN {snapshot} is older than its retention horizon "
                                          f"{horizon}: vacuum may have removed its files; tag CSN {horizon} or newer")
        created_at = time.time()
        tag_records.insert_tag(conn, name, snapshot, [i.id for i in infos], created_at, note)
    log.info("tagged CSN %d as %r (%d table(s))", snapshot, name, len(infos), extra=logs.fields(csn=snapshot))
    return TagInfo(name=name, csn=snapshot, tables=sorted(i.name.qualified for i in infos), created_at=created_at,
                   note=note)


@dataclass(frozen=True)
class CommitTag:
    """A tag to make with a commit (`Transaction.commit(tag=)`), checked before anything is written."""

    name: str
    note: str | None = None


def commit_tag(name: str | None, note: str | None) -> CommitTag | None:
    """The checked tag of a commit (None: no tag): InvalidNameError, InvalidArgumentError."""
    if name is None:
        if note is not None:
            raise InvalidArgumentError("tag_note without a tag: name the tag too (tag=...)")
        return None
    check_tag_name(name)
    _check_note(note)
    return CommitTag(name, note)


def tag_in_commit(conn: Connection, tag: CommitTag, csn: int, table_ids: Sequence[int]) -> None:
    """Inside the commit's own catalog transaction (SQL oracle): record `tag` at `csn` holding `table_ids` (none:
    every table). TagExistsError rolls the whole catalog transaction back, the commit with it. No horizon lock
    is needed: `csn` is the commit's CSN, above the watermark, or (a commit that wrote nothing) the snapshot of a
    transaction still usable here, which no stored horizon exceeds (invariant 8); checked all the same."""
    ids = list(table_ids) or [i.id for i in table_registry.all_tables(conn)]
    if not ids:
        raise InvalidArgumentError("there is no table to tag: create a table first")
    for table_id in ids:
        horizon = retention.table_horizon(conn, table_id)
        if csn < horizon:
            raise SnapshotTooOldError(f"CSN {csn} is older than a table's retention horizon {horizon}: not tagged")
    tag_records.insert_tag(conn, tag.name, csn, ids, time.time(), tag.note)
    log.info("tagged CSN %d as %r with its commit (%d table(s))", csn, tag.name, len(ids),
             extra=logs.fields(csn=csn))


def require_free(rt: Runtime, name: str) -> None:
    """TagExistsError when a tag `name` exists (ZooKeeper's check before a commit that names one)."""
    with rt.catalog.read() as conn:
        row = tag_records.find(conn, name)
    if row is not None:
        raise TagExistsError(f"tag {name!r} names CSN {row.csn} already (a tag never moves): untag it first or pick "
                             "another name; nothing was committed")


def tag_after_commit(rt: Runtime, tag: CommitTag, csn: int, tables: Sequence[str]) -> None:
    """ZooKeeper: tag the applied commit `csn` (holding `tables`; none: every table). A name another caller took
    since `require_free` raises TagExistsError saying the commit stands (docs/DESIGN.md D18)."""
    try:
        create(rt, tag.name, csn, list(tables) or None, tag.note)
    except TagExistsError as exc:
        raise TagExistsError(f"the commit at CSN {csn} stands, but tag {tag.name!r} was taken meanwhile: "
                             f"{exc}") from exc


def all_tags(rt: Runtime) -> list[TagInfo]:
    """Every tag, the newest CSN first."""
    with rt.catalog.read() as conn:
        return [info_of(r) for r in tag_records.all_tags(conn)]


def get(rt: Runtime, name: str) -> TagInfo:
    """The tag `name`; TagNotFoundError when there is none."""
    check_tag_name(name)
    with rt.catalog.read() as conn:
        return info_of(_found(tag_records.find(conn, name), name))


def find(rt: Runtime, name: str) -> TagInfo | None:
    """The tag `name`, None when there is none (a sensor's question)."""
    check_tag_name(name)
    with rt.catalog.read() as conn:
        row = tag_records.find(conn, name)
    return None if row is None else info_of(row)


def drop(rt: Runtime, name: str) -> TagInfo:
    """Remove the tag (its parts are vacuum's again); returns what it was. TagNotFoundError when none."""
    check_tag_name(name)
    with rt.catalog.write() as conn:
        row = _found(tag_records.find(conn, name), name)
        tag_records.delete_tag(conn, name)
    log.info("untagged %r (CSN %d)", name, row.csn, extra=logs.fields(csn=row.csn))
    return info_of(row)


def resolve(rt: Runtime, name: str, table: str) -> tuple[TagRow, TableInfo]:
    """The tag and the table a read at tag `name` reads: TagNotFoundError, TableNotFoundError, and
    TableNotInTagError when the tag does not hold `table`."""
    check_tag_name(name)
    with rt.catalog.read() as conn:
        info = table_registry.get(conn, table)
        row = _found(tag_records.find(conn, name), name)
    if info.id not in row.table_ids:
        raise TableNotInTagError(f"tag {name!r} (CSN {row.csn}) does not hold table {info.name}; it holds "
                                 f"{', '.join(row.tables)}", table=info.name.qualified, tag=name)
    return row, info


def confirm(rt: Runtime, row: TagRow) -> None:
    """After a read at `row`'s tag: the same tag still exists, so vacuum kept every file the read listed;
    TagNotFoundError otherwise (the tag was removed, or removed and made again, while the read ran)."""
    with rt.catalog.read() as conn:
        now = tag_records.find(conn, row.name)
    if now is None or (now.csn, now.created_at) != (row.csn, row.created_at):
        raise TagNotFoundError(f"tag {row.name!r} was removed while it was read (vacuum may have deleted files the "
                               "read listed); read again")


def held(rt: Runtime) -> set[tuple[int, int]]:
    """(CSN, table id) of every tag and each table it holds: vacuum keeps a manifest of that CSN listing it."""
    with rt.catalog.read() as conn:
        return {(row.csn, table_id) for row in tag_records.all_tags(conn) for table_id in row.table_ids}


def holding(rt: Runtime, csn: int, tables: Sequence[str] | None) -> list[TagRow]:
    """The tags at exactly `csn` holding the tables of `tables` (None: every table) that `csn` is below the
    retention horizon of; SnapshotTooOldError naming the tables below it that no such tag holds."""
    with rt.catalog.read() as conn:
        infos = table_registry.all_tables(conn) if tables is None else [table_registry.get(conn, t) for t in tables]
        below = [i for i in infos if csn < retention.table_horizon(conn, i.id)]
        rows = [r for r in tag_records.all_tags(conn) if r.csn == csn]
    missing = sorted({i.name.qualified for i in below if not any(i.id in r.table_ids for r in rows)})
    if missing:
        raise SnapshotTooOldError(f"CSN {csn} is older than the retention horizon of {', '.join(missing)} and no tag "
                                  "holds them at that CSN: vacuum may have removed their files; use a newer CSN")
    return [r for r in rows if any(i.id in r.table_ids for i in below)]


def _check_note(note: object) -> None:
    if note is not None and (not isinstance(note, str) or len(note) > MAX_LABEL_LENGTH or "\x00" in note):
        raise InvalidArgumentError(f"a tag's note must be text up to {MAX_LABEL_LENGTH} characters without NUL, "
                                   f"got {note!r:.200}")


def _found(row: TagRow | None, name: str) -> TagRow:
    if row is None:
        raise TagNotFoundError(f"no tag {name!r} in this warehouse: Warehouse.tags() (`airflow-txn tags`) lists them")
    return row
