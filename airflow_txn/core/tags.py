"""Named snapshots (tags): a name for one CSN of a set of tables, readable by that name for as long as the tag
exists, whatever the retention (docs/DESIGN.md, D18).

A tag is made at a readable CSN (default: the readable watermark) no older than the stored horizon of any
table it holds, checked and recorded in one catalog transaction that locks the global horizon counter as
vacuum does when it stores horizons: so vacuum either stored its horizons first (and the tag is refused
with SnapshotTooOldError) or sees the tag when it picks garbage (catalog/tag_records.pinned_by_a_tag keeps
every part the tag sees). A tag never moves: `untag` and tag again. Untagging releases its parts: the next
vacuum deletes those no horizon, retention policy or other tag keeps.

With an external log (ZooKeeper) a tag's name is also claimed in the log (ExternalLog.claim_tag): a commit
naming a tag claims it in its own commit multi-op and the record's mirror makes the tag (log_mirror.py), so
the commit and its tag stand or fall together; `create` claims the name before its catalog transaction (and
releases it if that fails), `drop` deletes the catalog's tag, then the claim (docs/DESIGN.md D18).

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

from airflow_txn.catalog import counters, table_registry, tag_records, txn_records
from airflow_txn.catalog.table_registry import TableInfo
from airflow_txn.catalog.tag_records import TagRow
from airflow_txn.core import apply, bounds, retention, versions
from airflow_txn.core.runtime import Runtime
from airflow_txn.errors import (
    InvalidArgumentError,
    InvalidNameError,
    SnapshotTooOldError,
    TableNotInTagError,
    TagExistsError,
    TagNotFoundError,
    TransactionNotFoundError,
    TxnError,
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
    external = rt.oracle.external_log
    if external is not None:
        external.claim_tag(name)  # TagExistsError: taken, by a tag or by a commit naming it
    try:
        made = _insert(rt, name, snapshot, names, note)
    except BaseException:
        if external is not None:
            release_quietly(rt, name)
        raise
    log.info("tagged CSN %d as %r (%d table(s))", snapshot, name, len(made["tables"]), extra=logs.fields(csn=snapshot))
    return made


def _insert(rt: Runtime, name: str, snapshot: int, names: list[str] | None, note: str | None) -> TagInfo:
    """`create`'s catalog transaction."""
    with rt.catalog.write() as conn:
        counters.vacuum_horizon(conn, rt.catalog)  # locked: vacuum stores its horizons under this lock too
        infos = versions.tables_seen(conn, None, snapshot) if names is None else _named_at(conn, names, snapshot)
        if not infos:
            raise InvalidArgumentError("there is no table to tag: create a table first")
        for info in infos:
            horizon = retention.table_horizon(conn, info.id)
            if snapshot < horizon:
                raise SnapshotTooOldError(f"table {info.name}: CSN {snapshot} is older than its retention horizon "
                                          f"{horizon}: vacuum may have removed its files; tag CSN {horizon} or newer")
        created_at = time.time()
        tag_records.insert_tag(conn, name, snapshot, [i.id for i in infos], created_at, note)
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
    ids = list(table_ids) or [i.id for i in table_registry.listed_tables(conn)]
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
    """TagExistsError when a tag `name` exists, or (external log) its name is claimed: the check before a commit
    that names one, so the common refusal leaves the transaction active (a name taken after it fails the commit's
    multi-op instead, docs/DESIGN.md D18)."""
    with rt.catalog.read() as conn:
        row = tag_records.find(conn, name)
    if row is not None:
        raise TagExistsError(f"tag {name!r} names CSN {row.csn} already (a tag never moves): untag it first or pick "
                             "another name; nothing was committed")
    external = rt.oracle.external_log
    claim = None if external is None else external.tag_claim(name)
    if claim is not None:
        by = "a tag being made" if claim.tid is None else f"the commit of transaction {claim.tid}"
        raise TagExistsError(f"tag {name!r} is claimed in the commit log by {by} (untag it if it was left behind "
                             "by an interrupted untag); nothing was committed")


def release_quietly(rt: Runtime, name: str) -> None:
    """Release the log's claim on `name` after the catalog's tag failed; a failure leaves a claim `drop` removes."""
    external = rt.oracle.external_log
    if external is None:
        return
    try:
        external.release_tag(name)
    except TxnError as exc:
        log.warning("could not release the claim on tag name %r (untag it to release it): %s", name, exc)


LEFTOVER_CLAIM_AGE = 600.0
"""Seconds after which a `Warehouse.tag` claim with no tag in the catalog is left over (its maker died)."""


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
    """Remove the tag (its parts are vacuum's again), then its name's claim in the log; returns what it was.
    TagNotFoundError when none (after releasing a claim left behind: see `_release_leftover`)."""
    check_tag_name(name)
    with rt.catalog.write() as conn:
        row = tag_records.find(conn, name)
        if row is not None:
            tag_records.delete_tag(conn, name)
    if row is None:
        _release_leftover(rt, name)
        _found(row, name)
    assert row is not None
    release_quietly(rt, name)
    log.info("untagged %r (CSN %d)", name, row.csn, extra=logs.fields(csn=row.csn))
    return info_of(row)


def _release_leftover(rt: Runtime, name: str) -> None:
    """No tag `name` in the catalog: release a claim on it that nothing will turn into a tag (an untag or a
    `create` interrupted between the catalog and the log, a commit mirrored by an airflow_txn that did not make
    tags from records). A claim still on its way to a tag (its commit not mirrored yet, a recent `create`) stays."""
    external = rt.oracle.external_log
    claim = None if external is None else external.tag_claim(name)
    if external is None or claim is None:
        return
    if claim.tid is None:
        leftover = time.time() - claim.at > LEFTOVER_CLAIM_AGE
    else:  # mirrored (committed), rolled back or purged: its commit will make no tag any more
        with rt.catalog.read() as conn:
            try:
                leftover = txn_records.fetch(conn, claim.tid).state not in (txn_records.ACTIVE,
                                                                             txn_records.COMMITTING)
            except TransactionNotFoundError:
                leftover = True
    if leftover:
        external.release_tag(name)
        log.warning("released the claim on tag name %r that no tag holds", name)


def resolve(rt: Runtime, name: str, table: str) -> tuple[TagRow, TableInfo]:
    """The tag and the table a read at tag `name` reads: TagNotFoundError, TableNotFoundError, and
    TableNotInTagError when the tag does not hold `table`."""
    check_tag_name(name)
    with rt.catalog.read() as conn:
        named = table_registry.get(conn, table)
        row = _found(tag_records.find(conn, name), name)
        watermark = (rt.oracle.readable_csn(conn) if rt.oracle.external_log is not None
                     else row.csn)
        # the table the name meant at the tag's CSN (a renamed table's old name there), as a read there resolves it
        info = versions.table_at(conn, named, None, row.csn) if row.csn <= watermark else None
    if info is None:  # made by its commit's mirror, not applied yet (log_mirror._tag): apply it, as a read would
        apply.apply_pending(rt, up_to=row.csn)
        with rt.catalog.read() as conn:
            info = versions.table_at(conn, named, None, row.csn)
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
        infos = versions.tables_seen(conn, None, csn) if tables is None else _named_at(conn, tables, csn)
        below = [i for i in infos if csn < retention.table_horizon(conn, i.id)]
        rows = [r for r in tag_records.all_tags(conn) if r.csn == csn]
    missing = sorted({i.name.qualified for i in below if not any(i.id in r.table_ids for r in rows)})
    if missing:
        raise SnapshotTooOldError(f"CSN {csn} is older than the retention horizon of {', '.join(missing)} and no tag "
                                  "holds them at that CSN: vacuum may have removed their files; use a newer CSN")
    return [r for r in rows if any(i.id in r.table_ids for i in below)]


def _named_at(conn: Connection, names: Sequence[str], csn: int) -> list[TableInfo]:
    """The tables `names` name at snapshot `csn`, as a read there resolves them (versions.table_at: a renamed table's
    old name names it only before the rename, docs/DESIGN.md D27); TableNotFoundError for a name with none there."""
    return [versions.table_at(conn, table_registry.get(conn, n), None, csn) for n in names]


def _check_note(note: object) -> None:
    if note is not None and (not isinstance(note, str) or len(note) > MAX_LABEL_LENGTH or "\x00" in note):
        raise InvalidArgumentError(f"a tag's note must be text up to {MAX_LABEL_LENGTH} characters without NUL, "
                                   f"got {note!r:.200}")


def _found(row: TagRow | None, name: str) -> TagRow:
    if row is None:
        raise TagNotFoundError(f"no tag {name!r} in this warehouse: Warehouse.tags() (`airflow-txn tags`) lists them")
    return row
