"""Versions of a table's schema in the catalog (docs/DESIGN.md, D27): rows stamped like parts.

A table's schema at snapshot S, to transaction T, is its one version visible by the parts' rule (invariant 2,
visibility_sql.py). A DDL statement stages version n+1 under its transaction and staging key, and takes the
removal lock on version n by the same compare-and-swap as a part's (`removal_tid IS NULL`): of two transactions
changing one table at once the second is refused (SerializationError naming the table and the change). The commit's
apply stamps versions with the parts (same CSN, same catalog transaction), rollback stamps them RollbackCSN, a keyed
retry withdraws them with the key's parts. txn_tables keeps the newest committed version as a cache (`apply`).

A catalog older than schema version 7 has no txn_table_versions (D23: this package still uses it): `present` says
so, and a table's only schema there is the one txn_tables holds, its version 1.
"""

from __future__ import annotations

import functools
import json
import time
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import pyarrow as pa
from sqlalchemy import (
    BigInteger,
    BindParameter,
    ColumnElement,
    Connection,
    Engine,
    Integer,
    Select,
    String,
    and_,
    bindparam,
    case,
    delete,
    exists,
    func,
    insert,
    inspect,
    literal,
    or_,
    select,
    true,
    tuple_,
    union_all,
    update,
)

from airflow_txn.catalog import schema
from airflow_txn.catalog.txn_states import COMMITTING, ENDED_STATES
from airflow_txn.catalog.visibility_sql import version_visible_clause
from airflow_txn.errors import SerializationError
from airflow_txn.model import evolution
from airflow_txn.model.csn import PREHISTORIC_CSN, ROLLBACK_CSN
from airflow_txn.model.visibility import VersionInfo, is_visible

_v = schema.table_versions.c
_p = schema.parts.c
_t = schema.transactions.c

RELEASED = "~"
"""How txn_tables.name of a table that gave its name up starts (table_registry.release): never a table name."""

NO_TRANSACTION = "-"
"""The creation_tid of a version made outside any transaction (Warehouse.create_table, the schema_v7 backfill)."""

_PRESENT: weakref.WeakKeyDictionary[Engine, bool] = weakref.WeakKeyDictionary()


def note(engine: Engine, schema_version: int | None) -> None:
    """Record which schema the catalog behind `engine` is at (Catalog.probe, Catalog.upgrade): below version 7 it
    has no txn_table_versions and no txn_parts.schema_version, and no statement here may name them."""
    _PRESENT[engine] = schema_version is None or schema_version >= schema.VERSIONED_SINCE


def present(conn: Connection) -> bool:
    """Whether the catalog has txn_table_versions (schema version 7 or newer): as the Catalog found it, else looked
    up once per engine."""
    found = _PRESENT.get(conn.engine)
    if found is None:
        found = _PRESENT[conn.engine] = bool(inspect(conn).has_table(schema.table_versions.name))
    return found


@dataclass(frozen=True, slots=True)
class VersionRow:
    """One version of a table's schema."""

    table_id: int
    version: int
    schema: pa.Schema
    partition_by: tuple[str, ...]
    name: str
    dropped: bool
    change: str | None
    compatible: bool
    state: VersionInfo
    stage_key: str | None = None
    stage_attempt: int | None = None
    removal_key: str | None = None
    removal_attempt: int | None = None


def encode(arrow_schema: pa.Schema) -> bytes:
    return bytes(arrow_schema.serialize().to_pybytes())


def decode(blob: bytes) -> pa.Schema:
    return pa.ipc.read_schema(pa.py_buffer(blob))


def _row(r: object) -> VersionRow:
    return VersionRow(
        table_id=int(r.table_id), version=int(r.version), schema=decode(r.schema_ipc),  # type: ignore[attr-defined]
        partition_by=tuple(json.loads(r.partition_by)), name=str(r.name),  # type: ignore[attr-defined]
        dropped=bool(r.dropped), change=r.change, compatible=bool(r.compatible),  # type: ignore[attr-defined]
        state=VersionInfo(r.creation_tid, r.creation_csn, r.removal_tid, r.removal_csn),  # type: ignore[attr-defined]
        stage_key=r.stage_key, stage_attempt=r.stage_attempt,  # type: ignore[attr-defined]
        removal_key=r.removal_key, removal_attempt=r.removal_attempt,  # type: ignore[attr-defined]
    )


def create_first(conn: Connection, table_id: int, arrow_schema: pa.Schema, partition_by: Sequence[str],
                 name: str) -> None:
    """Version 1 of a table created outside any transaction: committed at the prehistoric snapshot, so every read
    of the table, at any CSN, reads it under this schema (as before versions existed)."""
    conn.execute(insert(schema.table_versions).values(
        table_id=table_id, version=1, schema_ipc=encode(arrow_schema), partition_by=json.dumps(list(partition_by)),
        name=name, dropped=False, change=None, compatible=True, creation_tid=NO_TRANSACTION,
        creation_csn=PREHISTORIC_CSN, created_at=time.time()))


# the statements of a table change (visible_for_statement, stage) and of its commit (stamp_commit), built once: a
# change runs them per table, and building them per call was a third of its CPU (benchmarks/b15_changing_tables.py)
_TABLE, _TID, _CSN = (bindparam("b_table", type_=BigInteger()), bindparam("b_tid", type_=String()),
                      bindparam("b_csn", type_=BigInteger()))
_LOCK = (update(schema.table_versions)
         .where(_v.table_id == _TABLE, _v.version == bindparam("b_version", type_=BigInteger()),
                _v.removal_tid.is_(None))
         .values(removal_tid=_TID, removal_key=bindparam("b_key", type_=String()),
                 removal_attempt=bindparam("b_attempt", type_=BigInteger())))
_NEWEST = select(func.max(_v.version)).where(_v.table_id == _TABLE)
_INSERT = insert(schema.table_versions)


def _stamps(by_table: bool) -> tuple[Any, Any, Any]:
    """stamp_commit's statements (of one table, or of every table): the creation CSN, the removal CSN, the versions
    the commit made newest."""
    where = [_v.table_id == _TABLE] if by_table else []
    created = update(schema.table_versions).where(
        *where, _v.creation_tid == _TID, _v.creation_csn.is_(None)).values(creation_csn=_CSN)
    removed = update(schema.table_versions).where(
        *where, _v.removal_tid == _TID, _v.removal_csn.is_(None)).values(removal_csn=_CSN)
    newest = select(_v.table_id, _v.schema_ipc, _v.partition_by).where(
        *where, _v.creation_tid == _TID, _v.creation_csn == _CSN, _v.removal_csn.is_(None))
    return created, removed, newest


_STAMPS = {True: _stamps(True), False: _stamps(False)}
_FOR_STATEMENT = select(schema.table_versions).where(  # visible_for_statement's candidates
    _v.table_id == _TABLE, or_(_v.creation_tid == _TID, _v.removal_tid == _TID,
                               version_visible_clause(None, bindparam("b_snapshot", type_=BigInteger()))))
_CACHE_SCHEMA = (update(schema.tables).where(schema.tables.c.id == _TABLE)
                 .values(schema_ipc=bindparam("b_schema"), partition_by=bindparam("b_partition_by", type_=String())))


_IDS: BindParameter[int] = bindparam("b_ids", expanding=True, type_=BigInteger())
_SNAPSHOT = bindparam("b_snapshot", type_=BigInteger())
_VISIBLE = {own: select(schema.table_versions).where(_v.table_id.in_(_IDS),
                                                     version_visible_clause(_TID if own else None, _SNAPSHOT))
            for own in (True, False)}
"""visible's statement, of a transaction's view (True) or of a committed snapshot's, built once: the commit path
and every append's check ran it built anew (about 0.2 ms of SQLAlchemy's statement construction a call)."""
_VISIBLE_NAMES = {own: select(_v.table_id, _v.version, _v.name).where(
    _v.table_id.in_(_IDS), version_visible_clause(_TID if own else None, _SNAPSHOT)) for own in (True, False)}


def _view(table_ids: Sequence[int], tid: str | None, snapshot: int) -> dict[str, Any]:
    return {"b_ids": list(table_ids), "b_snapshot": snapshot, **({} if tid is None else {"b_tid": tid})}


def visible(conn: Connection, table_ids: Sequence[int], tid: str | None, snapshot: int) -> dict[int, VersionRow]:
    """{table id: its version visible to (tid, snapshot)}; a table with none there is left out."""
    if not table_ids:
        return {}
    found: dict[int, VersionRow] = {}
    for r in conn.execute(_VISIBLE[tid is not None], _view(table_ids, tid, snapshot)):
        row = _row(r)
        if row.table_id not in found or row.version > found[row.table_id].version:
            found[row.table_id] = row
    return found


def of_table(conn: Connection, table_id: int, versions: Sequence[int] | None = None) -> dict[int, VersionRow]:
    """{version: row} of a table (only `versions`, when given): the schemas its parts were written under."""
    stmt = select(schema.table_versions).where(_v.table_id == table_id)
    if versions is not None:
        stmt = stmt.where(_v.version.in_(list(versions)))
    return {int(r.version): _row(r) for r in conn.execute(stmt)}


def visible_for_statement(conn: Connection, table_id: int, tid: str, snapshot: int,
                          withdrawn: Mapping[str, int | None]) -> VersionRow | None:
    """The version a statement of `tid` sees once the keys it withdraws are withdrawn (part_records'
    visible_for_statement, for versions): computed, nothing changed."""
    rows = [_row(r) for r in conn.execute(_FOR_STATEMENT, {"b_table": table_id, "b_tid": tid, "b_snapshot": snapshot})]
    seen = [r for r in rows if is_visible(_after_compensation(r, tid, withdrawn), tid, snapshot)]
    return max(seen, key=lambda r: r.version) if seen else None


def _older(value: int | None, attempt: int | None) -> bool:
    return attempt is None or value is None or value < attempt


def _after_compensation(row: VersionRow, tid: str, withdrawn: Mapping[str, int | None]) -> VersionInfo:
    v = row.state
    staged, locker = row.stage_key or "", row.removal_key or ""
    if (v.creation_tid == tid and v.creation_csn is None and staged in withdrawn
            and _older(row.stage_attempt, withdrawn[staged])):
        return VersionInfo(v.creation_tid, ROLLBACK_CSN, tid, v.removal_csn)
    if (v.removal_tid == tid and v.removal_csn is None and v.creation_csn != ROLLBACK_CSN and locker in withdrawn
            and _older(row.removal_attempt, withdrawn[locker])):
        return VersionInfo(v.creation_tid, v.creation_csn, None, v.removal_csn)
    return v


def stage(conn: Connection, tid: str, key: str | None, attempt: int | None, before: VersionRow,
          arrow_schema: pa.Schema, change: str, compatible: bool, name: str | None = None,
          dropped: bool = False) -> int:
    """Stage the version after `before` (the one the statement saw): its removal lock taken by compare-and-swap
    (SerializationError naming the table and the change when another transaction holds it), the new row inserted
    with the next free number. Returns that number."""
    taken = conn.execute(_LOCK, {"b_table": before.table_id, "b_version": before.version, "b_tid": tid, "b_key": key,
                                 "b_attempt": attempt}).rowcount
    if taken != 1:
        holder = conn.execute(select(_v.removal_tid).where(_v.table_id == before.table_id,
                                                           _v.version == before.version)).scalar()
        raise SerializationError(
            f"table {before.name}: cannot stage '{change}': transaction {holder} changed the table (or is changing "
            f"it) since version {before.version} this transaction sees; transaction {tid} conflicts and can only "
            "roll back")
    number = int(conn.execute(_NEWEST, {"b_table": before.table_id}).scalar_one()) + 1
    conn.execute(_INSERT, {
        "table_id": before.table_id, "version": number, "schema_ipc": encode(arrow_schema),
        "partition_by": json.dumps(list(before.partition_by)), "name": name or before.name, "dropped": dropped,
        "change": change, "compatible": compatible, "creation_tid": tid, "creation_csn": None, "removal_tid": None,
        "removal_csn": None, "stage_key": key, "stage_attempt": attempt, "created_at": time.time()})
    return number


def _older_clause(column: ColumnElement[Any], attempt: int | None) -> ColumnElement[bool]:
    if attempt is None:
        return true()
    return or_(column.is_(None), column < attempt)


def compensate_key(conn: Connection, tid: str, key: str, attempt: int | None = None) -> int:
    """Invariant 7 for versions (part_records.compensate_key): the versions an earlier attempt staged under `key`
    get RollbackCSN (and removal_tid = tid, so tid stops seeing them), the removal locks it took are released."""
    if not present(conn):
        return 0
    withdrawing = and_(_v.creation_tid == tid, _v.stage_key == key, _v.creation_csn.is_(None),
                       _older_clause(_v.stage_attempt, attempt))
    renamed = [int(r.table_id) for r in conn.execute(select(_v.table_id).where(withdrawing).distinct())]
    created = conn.execute(
        update(schema.table_versions).where(withdrawing).values(creation_csn=ROLLBACK_CSN, removal_tid=tid)
    ).rowcount
    sync_names(conn, renamed)
    released = conn.execute(
        update(schema.table_versions)
        .where(_v.removal_tid == tid, _v.removal_key == key, _v.removal_csn.is_(None),
               or_(_v.creation_csn.is_(None), _v.creation_csn != ROLLBACK_CSN),
               _older_clause(_v.removal_attempt, attempt))
        .values(removal_tid=None, removal_key=None, removal_attempt=None)
    ).rowcount
    return int(created) + int(released)


class Touched(NamedTuple):
    """What transaction `tid` changed, read once at its commit (`touched`)."""

    parts: tuple[int, ...]
    """Tables where it created or removed a live part."""
    versions: tuple[int, ...]
    """Tables where it staged a live version."""
    version_rows: bool
    """Whether any version names it as creator or remover, withdrawn ones included: the commit's version stamps
    have rows to change (none for a transaction that changed no schema: most)."""

    @property
    def tables(self) -> list[int]:
        """What its commit record names."""
        return sorted({*self.parts, *self.versions})


_LIVE_VERSION = or_(_v.creation_csn.is_(None), _v.creation_csn != ROLLBACK_CSN)
_TOUCHED = union_all(
    select(_p.table_id, literal(0, Integer()).label("kind")).where(schema.written_by(_TID)).distinct(),
    select(_v.table_id, case((_LIVE_VERSION, 1), else_=2).label("kind"))
    .where(or_(_v.creation_tid == _TID, _v.removal_tid == _TID)).distinct())
"""touched's one statement: (table, 0) per table of a live part, (table, 1) of a live version, (table, 2) of a
withdrawn one; each branch along the two tid indexes of its table."""


def touched(conn: Connection, tid: str) -> Touched:
    """The tables `tid` changed, by parts and by versions (one query; the catalog has versions: `present`)."""
    found: dict[int, set[int]] = {0: set(), 1: set(), 2: set()}
    for table_id, kind in conn.execute(_TOUCHED, {"b_tid": tid}):
        found[int(kind)].add(int(table_id))
    return Touched(tuple(sorted(found[0])), tuple(sorted(found[1])), bool(found[1] or found[2]))


def pending_tables(conn: Connection, tid: str) -> list[int]:
    """Tables where `tid` still has an unstamped version or a held version lock (rollback's work)."""
    if not present(conn):
        return []
    rows = conn.execute(select(_v.table_id).where(
        or_(and_(_v.creation_tid == tid, _v.creation_csn.is_(None)),
            and_(_v.removal_tid == tid, _v.removal_csn.is_(None)))).distinct())
    return sorted(int(r.table_id) for r in rows)


def stamp_commit(conn: Connection, tid: str, table_id: int | None, csn: int) -> None:
    """Apply a committed transaction's versions (of one table; None: of every table): its CSN on the versions it
    created and removed (idempotent), and txn_tables' cache of each table's newest committed version."""
    if not present(conn):
        return
    created_stmt, removed_stmt, newest_stmt = _STAMPS[table_id is not None]
    params = {"b_tid": tid, "b_csn": csn} if table_id is None else {"b_tid": tid, "b_csn": csn, "b_table": table_id}
    created = conn.execute(created_stmt, params).rowcount
    conn.execute(removed_stmt, params)
    if not created:
        return
    newest = conn.execute(newest_stmt, params).all()
    if newest:
        conn.execute(_CACHE_SCHEMA, [{"b_table": r.table_id, "b_schema": r.schema_ipc, "b_partition_by": r.partition_by}
                                     for r in newest])


def stamp_rollback(conn: Connection, tid: str, table_id: int) -> None:
    """Invariant 5 for versions: created versions never visible, removal locks released."""
    if not present(conn):
        return
    conn.execute(update(schema.table_versions).where(
        _v.table_id == table_id, _v.creation_tid == tid, _v.creation_csn.is_(None)).values(creation_csn=ROLLBACK_CSN))
    conn.execute(update(schema.table_versions).where(
        _v.table_id == table_id, _v.removal_tid == tid, _v.removal_csn.is_(None)).values(
        removal_tid=None, removal_key=None, removal_attempt=None))
    sync_names(conn, [table_id])


def sync_names(conn: Connection, table_ids: Sequence[int]) -> None:
    """txn_tables.name of each table back to the name of its newest version not rolled back (a rename withdrawn by
    rollback or a keyed retry gives the name it reserved back: `reserve`)."""
    for table_id in table_ids:
        newest = conn.execute(select(_v.name).where(
            _v.table_id == table_id, or_(_v.creation_csn.is_(None), _v.creation_csn != ROLLBACK_CSN))
            .order_by(_v.version.desc()).limit(1)).first()
        if newest is not None:  # a table that gave its name up keeps it given up (table_registry.release)
            conn.execute(update(schema.tables).where(
                schema.tables.c.id == table_id, schema.tables.c.name != newest.name,
                ~schema.tables.c.name.startswith(RELEASED, autoescape=True)).values(name=newest.name))


def _live() -> ColumnElement[bool]:
    """A committed version not yet replaced by a committed one (the one readers at the newest snapshot see)."""
    return and_(_v.creation_csn.is_not(None), _v.creation_csn != ROLLBACK_CSN, _v.removal_csn.is_(None))


def named(conn: Connection, name: str, historical: bool = True) -> int | None:
    """The table whose live version is named `name` (a table being renamed keeps its old name until the rename
    commits); with `historical`, else the table with the newest committed version ever named so (time travel to a
    name a rename gave up: versions.table_at checks the name at the snapshot read). None: no such table."""
    if not present(conn):
        return None
    live = conn.execute(select(_v.table_id).where(_v.name == name, _live(), _v.dropped.is_(False)).limit(1)).first()
    if live is not None or not historical:
        return None if live is None else int(live.table_id)
    old = conn.execute(select(_v.table_id).where(
        _v.name == name, _v.creation_csn.is_not(None), _v.creation_csn != ROLLBACK_CSN)
        .order_by(_v.creation_csn.desc()).limit(1)).first()
    return None if old is None else int(old.table_id)


def visible_named(conn: Connection, name: str, tid: str | None, snapshot: int) -> VersionRow | None:
    """The version named `name` that is its table's visible version to (tid, snapshot), not a tombstone: the table
    the name meant there (docs/DESIGN.md, D27: a rename is a version). None: no table had the name there."""
    rows = [_row(r) for r in conn.execute(select(schema.table_versions).where(
        _v.name == name, version_visible_clause(tid, snapshot)))]
    for row in sorted(rows, key=lambda r: -r.table_id):
        seen = visible(conn, [row.table_id], tid, snapshot).get(row.table_id)
        if seen is not None and seen.version == row.version and not seen.dropped:
            return seen
    return None


def visible_names(conn: Connection, table_ids: Sequence[int], tid: str | None,
                  snapshot: int) -> dict[int, str] | None:
    """{table id: the name of its version visible to (tid, snapshot)} in one query selecting (table id, version,
    name) only (the commit path: a record names each table it touched as its transaction sees it, its own staged
    rename included); None on a catalog without versions (schema version 6: names never change there)."""
    if not present(conn):
        return None
    if not table_ids:
        return {}
    rows = conn.execute(_VISIBLE_NAMES[tid is not None], _view(table_ids, tid, snapshot))
    newest: dict[int, tuple[int, str]] = {}
    for r in rows:
        table_id, version = int(r.table_id), int(r.version)
        if table_id not in newest or version > newest[table_id][0]:
            newest[table_id] = (version, str(r.name))
    return {t: name for t, (_, name) in newest.items()}


def committed_names(conn: Connection, dropped: bool = False) -> dict[int, str] | None:
    """{table id: the name of its live committed version} of the tables readers list (committed_table_ids); with
    `dropped`, also of the tables that version drops (by the name they had: publishing empties them)."""
    if not present(conn):
        return None
    live = _live() if dropped else and_(_live(), _v.dropped.is_(False))
    rows = conn.execute(select(_v.table_id, _v.name).where(live))
    return {int(r.table_id): str(r.name) for r in rows}


def conflicts(conn: Connection, tid: str, snapshot: int, changed: Touched) -> str | None:
    """D27 point 4, checked at commit under the transaction's row lock: the first conflict of `tid` (snapshot
    `snapshot`) in the tables it `changed` (`touched`, read under that lock), as a message naming the table and the
    change; None when there is none.

    - `tid` staged an incompatible change of a table another transaction committed parts of after `snapshot`;
    - `tid` wrote parts of a table another transaction changed incompatibly, committed after `snapshot`.

    "Committed" includes a commit whose CSN is not stamped yet (`_unstamped`): with an external log a commit can be
    recorded there and not mirrored (its transaction `committing`), or mirrored and not applied, while this check
    reads the catalog; and a transaction still `committing` may record its commit after this check, so it counts
    as committed too (both sides of a pair check after they are committing, so of two that would conflict at least
    one sees the other: docs/DESIGN.md D27). With the SQL oracle commits record, check and stamp under one lock:
    nothing is ever unstamped there. A transaction that staged no version has no change of its own to check (one
    statement fewer for most commits)."""
    if not present(conn) or not changed.tables:
        return None
    params = {"b_tid": tid, "b_snapshot": snapshot}
    mine = conn.execute(_MINE, {**params, "b_ids": list(changed.versions)}).all() if changed.versions else []
    for table_id, name, change in mine:
        other = conn.execute(_WRITES_SINCE, {**params, "b_table": table_id}).first()
        if other is not None:
            writer = other.creation_tid if other.creation_tid != tid else other.removal_tid
            return (f"table {name}: this transaction {change}, which does not keep the meaning of rows written "
                    f"before it, and transaction {writer} committed (or is committing) writes to the table after "
                    f"this transaction's snapshot {snapshot}; transaction {tid} conflicts and can only roll back")
    # the tables tid wrote come from tid's own parts (the tid indexes: `touched`); with `table_id IN ids` in that
    # query SQLite walked every part of those tables (B15: O(parts) in a commit of DDL)
    if not changed.parts:
        return None
    theirs = conn.execute(_CHANGES_SINCE, {**params, "b_ids": list(changed.parts)}).first()
    if theirs is not None:
        when = ("committing, or committed and not applied yet" if theirs.creation_csn is None
                else f"committed at CSN {theirs.creation_csn}")
        return (f"table {theirs.name}: transaction {theirs.creation_tid} {theirs.change} ({when}) after this "
                f"transaction's snapshot {snapshot}, and this transaction wrote the table under the version before: "
                f"transaction {tid} conflicts and can only roll back")
    return None


def _unstamped(tid_column: Any) -> ColumnElement[bool]:
    """`tid_column` names a transaction whose commit may stand without its CSN stamped on its rows yet: one that is
    `committing` (an external log's commit in progress, or recorded there and not mirrored) or whose record is
    mirrored and not applied. Both sets are small and indexed (txn_transactions.state, txn_commit_log.applied)."""
    _log = schema.commit_log.c
    return or_(tid_column.in_(select(_t.tid).where(_t.state == COMMITTING)),
               tid_column.in_(select(_log.tid).where(_log.applied.is_(False))))


_MINE = select(_v.table_id, _v.name, _v.change).where(
    _v.creation_tid == _TID, _v.creation_csn.is_(None), _v.compatible.is_(False), _v.table_id.in_(_IDS))
_WRITES_SINCE = select(_p.creation_tid, _p.removal_tid).where(
    _p.table_id == _TABLE,
    or_(and_(_p.creation_tid != _TID, _p.creation_csn > _SNAPSHOT, _p.creation_csn != ROLLBACK_CSN),
        and_(_p.removal_tid != _TID, _p.removal_csn > _SNAPSHOT),
        and_(_p.creation_tid != _TID, _p.creation_csn.is_(None), _unstamped(_p.creation_tid)),
        and_(_p.removal_tid != _TID, _p.removal_csn.is_(None), _unstamped(_p.removal_tid)))).limit(1)
_CHANGES_SINCE = select(_v.name, _v.change, _v.creation_tid, _v.creation_csn).where(
    _v.table_id.in_(_IDS), _v.creation_tid != _TID, _v.compatible.is_(False),
    or_(and_(_v.creation_csn > _SNAPSHOT, _v.creation_csn != ROLLBACK_CSN),
        and_(_v.creation_csn.is_(None), _unstamped(_v.creation_tid)))).order_by(_v.creation_csn).limit(1)
"""conflicts' statements, built once (built per commit they were a fifth of a commit's CPU: B6)."""


def stage_first(conn: Connection, tid: str, key: str | None, attempt: int | None, table_id: int,
                arrow_schema: pa.Schema, partition_by: Sequence[str], name: str) -> int:
    """Stage the version that creates table `table_id` inside transaction `tid` (Transaction.create_table): version 1
    of a new row, or, for a name whose table was never committed or was rolled back, the next free number. Another
    transaction's live version of the name: SerializationError (first writer wins). Returns the version."""
    live = conn.execute(select(_v.version, _v.creation_tid).where(
        _v.table_id == table_id, _v.creation_tid != tid, _v.dropped.is_(False),
        or_(_v.creation_csn.is_(None), and_(_v.creation_csn != ROLLBACK_CSN, _v.removal_csn.is_(None))))).first()
    if live is not None:
        raise SerializationError(f"table {name} is being created (or was created meanwhile) by transaction "
                                 f"{live.creation_tid}; transaction {tid} conflicts and can only roll back")
    # a dropped table's tombstone (committed, or this transaction's own): its removal lock, by compare-and-swap
    tombstone = and_(_v.table_id == table_id, _v.dropped.is_(True), _v.removal_csn.is_(None),
                     or_(and_(_v.creation_csn.is_not(None), _v.creation_csn != ROLLBACK_CSN),
                         and_(_v.creation_tid == tid, _v.creation_csn.is_(None))))
    if conn.execute(select(_v.version).where(tombstone)).first() is not None:
        taken = conn.execute(update(schema.table_versions).where(tombstone, _v.removal_tid.is_(None)).values(
            removal_tid=tid, removal_key=key, removal_attempt=attempt)).rowcount
        if taken != 1:
            raise SerializationError(f"table {name} is being created again by another transaction; transaction "
                                     f"{tid} conflicts and can only roll back")
    top = conn.execute(select(func.max(_v.version)).where(_v.table_id == table_id)).scalar()
    number = 1 if top is None else int(top) + 1
    if top is not None:  # the row's next life: its column ids continue (never reused within the table, D27)
        arrow_schema = evolution.continued(arrow_schema, last_column_id(conn, table_id))
    conn.execute(insert(schema.table_versions).values(
        table_id=table_id, version=number, schema_ipc=encode(arrow_schema), partition_by=json.dumps(list(partition_by)),
        name=name, dropped=False, change=f"created table {name}", compatible=True, creation_tid=tid,
        creation_csn=None, removal_tid=None, removal_csn=None, stage_key=key, stage_attempt=attempt,
        created_at=time.time()))
    return number


def committed_table_ids(conn: Connection) -> set[int] | None:
    """The tables with a committed version, their newest one not a tombstone (None: a catalog without versions,
    where every table is). A table only created inside a transaction not yet committed (or rolled back) is not."""
    if not present(conn):
        return None
    rows = conn.execute(select(_v.table_id).where(
        _v.creation_csn.is_not(None), _v.creation_csn != ROLLBACK_CSN, _v.removal_csn.is_(None),
        _v.dropped.is_(False)).distinct())
    return {int(r.table_id) for r in rows}


def revive(conn: Connection, table_id: int, arrow_schema: pa.Schema, partition_by: Sequence[str], name: str) -> bool:
    """Warehouse.create_table of a name whose table has no committed version (its creating transaction rolled back):
    the next version, committed at the prehistoric snapshot as `create_first`'s. False when it has a live one."""
    if not present(conn):
        return False
    live = conn.execute(select(_v.version).where(
        _v.table_id == table_id,
        or_(_v.creation_csn.is_(None), and_(_v.creation_csn != ROLLBACK_CSN, _v.removal_csn.is_(None))))).first()
    if live is not None:  # a committed table (or a tombstone: recreated in a transaction), or one being created
        return False
    arrow_schema = evolution.continued(arrow_schema, last_column_id(conn, table_id))  # never reused (D27)
    claimed = conn.execute(update(schema.tables).where(schema.tables.c.id == table_id, schema.tables.c.name == name)
                           .values(schema_ipc=encode(arrow_schema), partition_by=json.dumps(list(partition_by))))
    if claimed.rowcount != 1:  # a rename took the name meanwhile (table_registry.release)
        raise SerializationError(f"table {name}: another transaction took the name meanwhile; create it again")
    top = int(conn.execute(select(func.max(_v.version)).where(_v.table_id == table_id)).scalar() or 0)
    conn.execute(insert(schema.table_versions).values(
        table_id=table_id, version=top + 1, schema_ipc=encode(arrow_schema),
        partition_by=json.dumps(list(partition_by)), name=name, dropped=False, change=None, compatible=True,
        creation_tid=NO_TRANSACTION, creation_csn=PREHISTORIC_CSN, created_at=time.time()))
    return True


def dropped(conn: Connection, table_id: int) -> bool:
    """Whether the table's newest committed version is a tombstone (it was dropped) and none is staged."""
    if not present(conn):
        return False
    rows = conn.execute(select(_v.dropped, _v.creation_csn).where(
        _v.table_id == table_id,
        or_(_v.creation_csn.is_(None), and_(_v.creation_csn != ROLLBACK_CSN, _v.removal_csn.is_(None))))).all()
    return bool(rows) and all(bool(r.dropped) and r.creation_csn is not None for r in rows)


def free(conn: Connection, table_id: int) -> bool:
    """Whether the table's name is free (a rename may take it: table_registry.release): it was dropped (its newest
    committed version a tombstone) or never committed (every version rolled back), and nothing is staged."""
    rows = conn.execute(select(_v.dropped, _v.creation_csn).where(
        _v.table_id == table_id,
        or_(_v.creation_csn.is_(None), and_(_v.creation_csn != ROLLBACK_CSN, _v.removal_csn.is_(None))))).all()
    return all(bool(r.dropped) and r.creation_csn is not None for r in rows)


def last_name(conn: Connection, table_id: int) -> str | None:
    """The name of the table's newest version not rolled back, else of its newest (None: it has none)."""
    rows = conn.execute(select(_v.name, _v.creation_csn).where(_v.table_id == table_id)
                        .order_by(_v.version.desc())).all()
    kept = [r for r in rows if r.creation_csn is None or r.creation_csn != ROLLBACK_CSN] or rows
    return str(kept[0].name) if kept else None


def last_column_id(conn: Connection, table_id: int) -> int:
    """The highest column id any version of the table ever gave, withdrawn and rolled-back ones included: a new
    column's id is above it, so rows a withdrawn version's writer staged never read as another column."""
    rows = conn.execute(select(_v.schema_ipc).where(_v.table_id == table_id))
    return max((_last_id(r.schema_ipc) for r in rows), default=0)


@functools.lru_cache(maxsize=4096)
def _last_id(blob: bytes) -> int:
    """evolution.last_id of a stored schema, remembered by its bytes (a version's schema never changes): a change
    reads every version of its table, and decoding them all each time grew with the table's history (B15)."""
    return evolution.last_id(decode(blob))


def built_on(conn: Connection, tid: str, key: str, attempt: int | None) -> set[str | None]:
    """The keys (None: a write with no key) whose work in `tid` built on a version of a table's schema `key` staged
    by attempts before `attempt` (None: by every attempt): they staged parts under it, or changed the table again
    after it (retries.py withdraws them with it: invariant 7)."""
    if not present(conn):
        return set()
    mine = conn.execute(select(_v.table_id, _v.version).where(
        _v.creation_tid == tid, _v.stage_key == key, _v.creation_csn.is_(None),
        _older_clause(_v.stage_attempt, attempt))).all()
    found: set[str | None] = set()
    for table_id, version in mine:
        parts = conn.execute(select(_p.stage_key).where(
            schema.of_table_along_tid(table_id), _p.creation_tid == tid, _p.creation_csn.is_(None),
            _p.schema_version == version).distinct())
        found |= {r.stage_key for r in parts}
        locker = conn.execute(select(_v.removal_key).where(
            _v.table_id == table_id, _v.version == version, _v.removal_tid == tid)).first()
        if locker is not None:
            found.add(locker.removal_key)
    return found


def creator(conn: Connection, table_id: int) -> str | None:
    """The transaction staging a version of the table not committed yet (None: none)."""
    if not present(conn):
        return None
    row = conn.execute(select(_v.creation_tid).where(_v.table_id == table_id, _v.creation_csn.is_(None)).limit(1))
    found = row.first()
    return None if found is None else str(found.creation_tid)


def committed_schemas(conn: Connection, table_id: int) -> list[tuple[pa.Schema, tuple[str, ...]]]:
    """(schema, partition columns) of every committed version of the table, tombstones left out, oldest first
    (empty on a catalog without versions)."""
    if not present(conn):
        return []
    rows = conn.execute(select(schema.table_versions).where(
        _v.table_id == table_id, _v.creation_csn.is_not(None), _v.creation_csn != ROLLBACK_CSN,
        _v.dropped.is_(False)).order_by(_v.version))
    return [(row.schema, row.partition_by) for row in map(_row, rows)]


def purgeable_rolled_back() -> Select[Any]:
    """The (table id, version) of rolled-back versions vacuum may delete (catalog/purges.py): stamped RollbackCSN
    (rollback, or a keyed retry that withdrew them) by a transaction that ended (or whose row is gone), and no part
    row written under them left (rolled-back parts go first, vacuum's parts step). Nothing reads them: no snapshot
    sees them and a running transaction's retries look only at unstamped versions. A column id only they gave may
    be given again then: nothing stored carries it any more (their parts are gone, and they were never published)."""
    running = select(_t.tid).where(_t.tid == _v.creation_tid, _t.state.not_in(ENDED_STATES))
    parts = select(_p.id).where(_p.table_id == _v.table_id, func.coalesce(_p.schema_version, 1) == _v.version)
    return select(_v.table_id, _v.version).where(_v.creation_csn == ROLLBACK_CSN, ~exists(running), ~exists(parts))


def forget_rolled_back(conn: Connection, keys: list[Any]) -> int:
    """Delete these rolled-back versions ((table id, version) pairs from `purgeable_rolled_back`); returns how many."""
    if not keys:
        return 0
    pairs = [(int(t), int(v)) for t, v in keys]
    return int(conn.execute(delete(schema.table_versions).where(
        _v.creation_csn == ROLLBACK_CSN, tuple_(_v.table_id, _v.version).in_(pairs))).rowcount)
