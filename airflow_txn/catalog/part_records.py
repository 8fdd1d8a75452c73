"""Part rows in the catalog: registering, listing visible parts, removal locks, stamps, compensation.

Every statement here is one bulk UPDATE/INSERT with bound parameters; removal locks are
compare-and-swap on `removal_tid IS NULL` whose rowcount tells a conflict (invariant 6).
"""

from __future__ import annotations

import functools
import json
import time
import weakref
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from sqlalchemy import (
    ARRAY,
    BigInteger,
    BindParameter,
    ColumnElement,
    CompoundSelect,
    Connection,
    Engine,
    Result,
    Select,
    String,
    and_,
    any_,
    bindparam,
    case,
    delete,
    func,
    insert,
    or_,
    select,
    true,
    union_all,
    update,
)
from sqlalchemy.engine import Dialect

from airflow_txn.catalog import database, schema, table_versions
from airflow_txn.catalog.visibility_sql import visible_branches, visible_selects
from airflow_txn.errors import InvalidArgumentError, RetryConflictError, SerializationError
from airflow_txn.model.csn import ROLLBACK_CSN
from airflow_txn.model.partitioning import Partition, parse_partition_key, partition_key
from airflow_txn.model.parts import WrittenPart
from airflow_txn.model.visibility import VersionInfo, is_visible

_p = schema.parts.c


class PartRow(NamedTuple):
    """One row of txn_parts. A named tuple, not a frozen dataclass: a lookup builds one per visible part, and a
    tuple is built four times faster (docs/BENCHMARKS.md, B3)."""

    id: int
    table_id: int
    partition_key: str
    path: str
    files: tuple[str, ...]
    row_count: int
    size_bytes: int
    version: VersionInfo
    stage_key: str | None
    stage_attempt: int | None = None
    removal_key: str | None = None
    removal_attempt: int | None = None
    schema_version: int = 1
    """The version of the table's schema the part was written under (docs/DESIGN.md, D27; NULL in the catalog: 1)."""

    @property
    def partition(self) -> Partition:
        return parse_partition_key(self.partition_key)


_COLUMNS_BEFORE_VERSIONS = tuple(c for c in schema.parts.c if c.name != "schema_version")


def columns(conn: Connection) -> tuple[Any, ...]:
    """The part columns a SELECT names: all of them, but schema_version on a catalog older than schema version 7
    (table_versions.present: it has no such column; its parts are all version 1)."""
    return tuple(schema.parts.c) if table_versions.present(conn) else _COLUMNS_BEFORE_VERSIONS


_FIELDS = ("id", "table_id", "partition_key", "path", "files", "row_count", "size_bytes", "creation_tid",
           "creation_csn", "removal_tid", "removal_csn", "stage_key", "stage_attempt", "removal_key", "removal_attempt")


def part_rows(result: Result[Any]) -> list[PartRow]:
    """Every row of a result selecting the part columns (`columns`), as PartRows (`built`)."""
    return built(list(result.keys()), result.all())


def built(columns_found: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[PartRow]:
    """Rows of the part columns named `columns_found`, as PartRows: the column positions looked up once, the values
    not converted (both drivers return the declared types), each file list decoded once per distinct list; the one
    builder of a PartRow (a row at a time by attribute cost 2-3 times more, most of a visible-part lookup:
    docs/BENCHMARKS.md, B3)."""
    (i_id, i_table, i_key, i_path, i_files, i_rows, i_size, i_ctid, i_ccsn, i_rtid, i_rcsn, i_skey, i_satt,
     i_rkey, i_ratt) = (columns_found.index(name) for name in _FIELDS)
    i_version = columns_found.index("schema_version") if "schema_version" in columns_found else None
    files: dict[str, tuple[str, ...]] = {}  # parts written alike list the same files: decode each list once
    out = []
    for r in rows:
        raw = r[i_files]
        names = files.get(raw)
        if names is None:
            names = files[raw] = tuple(json.loads(raw))
        # positional, unconverted: both drivers return the declared types (int, str), and this runs per part
        out.append(PartRow(r[i_id], r[i_table], r[i_key], r[i_path], names, r[i_rows], r[i_size],
                           VersionInfo(r[i_ctid], r[i_ccsn], r[i_rtid], r[i_rcsn]),
                           r[i_skey], r[i_satt], r[i_rkey], r[i_ratt],
                           1 if i_version is None else (r[i_version] or 1)))
    return out


def _filters(table_id: int | ColumnElement[int],
             partition_keys: Sequence[str] | BindParameter[Any] | None) -> list[ColumnElement[bool]]:
    """The table's parts, of the given partitions (None: all)."""
    where = [_p.table_id == table_id]
    if partition_keys is not None:
        keys = partition_keys if isinstance(partition_keys, BindParameter) else list(partition_keys)
        where.append(_p.partition_key.in_(keys))
    return where


def _wanted(versioned: bool) -> tuple[Any, ...]:
    """The part columns a SELECT names; `versioned`: the catalog has txn_parts.schema_version (schema version 7)."""
    return tuple(schema.parts.c) if versioned else _COLUMNS_BEFORE_VERSIONS


def _read_columns(versioned: bool) -> tuple[Any, ...]:
    """The columns a PartRow is built from (`_wanted` but created_at, which no PartRow holds: a shorter lookup)."""
    return tuple(c for c in _wanted(versioned) if c.name != "created_at")


def _by_id(branches: Sequence[Select[Any]]) -> Select[Any] | CompoundSelect[Any]:
    """The branches ordered by id, under UNION ALL when there are several (each branch has its own index plan)."""
    if len(branches) == 1:
        return branches[0].order_by(_p.id)
    union = union_all(*branches)
    return union.order_by(union.selected_columns.id)


_SPAN_INDEX: weakref.WeakKeyDictionary[Engine, bool] = weakref.WeakKeyDictionary()


def span_index(conn: Connection) -> bool:
    """Whether the catalog has ix_txn_parts_span (index version 3: docs/DESIGN.md, D31), looked up once per engine.
    An older catalog (used as it is, D23) is read by the removal_csn ranges alone: as correct, slower with history."""
    found = _SPAN_INDEX.get(conn.engine)
    if found is None:
        version = conn.execute(select(schema.meta.c.value).where(schema.meta.c.key == "index_version")).scalar()
        found = _SPAN_INDEX[conn.engine] = int(version or 0) >= schema.SPAN_INDEX_SINCE
    return found


def _visible(table_id: int | ColumnElement[int], tid: str | ColumnElement[str] | None,
             snapshot: int | ColumnElement[int], partition_keys: Sequence[str] | BindParameter[Any] | None,
             versioned: bool, dialect: str | None, wanted: Sequence[Any] | None = None) -> list[Select[Any]]:
    """SELECTs whose UNION ALL is the table's parts visible to `tid` at `snapshot`: by span level (`dialect` the
    catalog's database), or, for a catalog without that index (`dialect` None), by visible_branches."""
    columns_wanted = _wanted(versioned) if wanted is None else wanted
    where = _filters(table_id, partition_keys)
    if dialect is None:
        return [select(*columns_wanted).where(*where, clause) for clause in visible_branches(tid, snapshot)]
    return visible_selects(columns_wanted, where, tid, snapshot, dialect)


def _lookup_dialect(conn: Connection) -> str | None:
    return conn.dialect.name if span_index(conn) else None


_DRIVER_STATEMENTS: weakref.WeakKeyDictionary[Dialect, dict[tuple[bool, bool, str | None], database.DriverStatement]] \
    = weakref.WeakKeyDictionary()


def _visible_driver(dialect_object: Dialect, in_transaction: bool, versioned: bool,
                    dialect: str | None) -> database.DriverStatement:
    """visible_parts' statement of a shape without partitions, compiled once per engine's dialect for the driver."""
    compiled = _DRIVER_STATEMENTS.setdefault(dialect_object, {})
    shape = (in_transaction, versioned, dialect)
    found = compiled.get(shape)
    if found is None:
        found = compiled[shape] = database.driver_statement(_visible_stmt(in_transaction, False, versioned, dialect),
                                                            dialect_object)
    return found


@functools.cache
def _visible_stmt(in_transaction: bool, by_partition: bool, versioned: bool,
                  dialect: str | None) -> Select[Any] | CompoundSelect[Any]:
    """visible_parts' statement, built once per shape with its values bound at execution (building it
    per call cost a quarter of a lookup)."""
    reader = bindparam("reader", type_=String()) if in_transaction else None
    keys: BindParameter[Any] | None = bindparam("partition_keys", expanding=True) if by_partition else None
    snapshot = bindparam("snapshot", type_=BigInteger())
    return _by_id(_visible(bindparam("table_id", type_=BigInteger()), reader, snapshot, keys, versioned, dialect,
                           _read_columns(versioned)))


def visible_parts(conn: Connection, table_id: int, tid: str | None, snapshot: int,
                  partition_keys: Sequence[str] | None = None) -> list[PartRow]:
    params: dict[str, Any] = {"table_id": table_id, "snapshot": snapshot}
    if tid is not None:
        params["reader"] = tid
    versioned, dialect = table_versions.present(conn), _lookup_dialect(conn)
    if partition_keys is None:  # the statement on the driver's cursor (docs/DESIGN.md, D34)
        return built(*database.driver_rows(conn, _visible_driver(conn.dialect, tid is not None, versioned, dialect),
                                           params))
    params["partition_keys"] = list(partition_keys)  # an IN list: SQLAlchemy renders it at each execution
    return part_rows(conn.execute(_visible_stmt(tid is not None, True, versioned, dialect), params))


def visible_parts_statement(conn: Connection, table_id: int, tid: str | None,
                            snapshot: int) -> Select[Any] | CompoundSelect[Any]:
    """The statement visible_parts runs, with its values in it (to show its plan: benchmarks/b3_part_lookup.py)."""
    versioned = table_versions.present(conn)
    return _by_id(_visible(table_id, tid, snapshot, None, versioned, _lookup_dialect(conn), _read_columns(versioned)))


def visible_totals(conn: Connection, table_id: int, snapshot: int) -> tuple[int, int, int]:
    """(parts, rows, bytes) of the table's parts visible at `snapshot` to a reader outside any transaction."""
    visible = union_all(*_visible(table_id, None, snapshot, None, False, _lookup_dialect(conn),
                                  (_p.row_count, _p.size_bytes))).subquery()
    parts, rows, size = conn.execute(
        select(func.count(), func.coalesce(func.sum(visible.c.row_count), 0),
               func.coalesce(func.sum(visible.c.size_bytes), 0))
    ).one()
    return int(parts), int(rows), int(size)


_INSERT = insert(schema.parts)


def register(conn: Connection, tid: str, key: str | None,
             written: Sequence[tuple[int, Sequence[tuple[Partition, WrittenPart]]]],
             attempt: int | None = None, schema_versions: Mapping[int, int] | None = None) -> None:
    """Insert a statement's new parts, [(table id, [(partition, written part)])], with one INSERT.
    `schema_versions`: {table id: the version of its schema the parts were written under} (absent: 1)."""
    versions = {t: v for t, v in (schema_versions or {}).items() if v != 1}
    now = time.time()
    # only a catalog of schema version 7 has a table version above 1 (and the column schema_version)
    version_of: dict[str, Any] = {}
    rows = [
        {
            "table_id": table_id, "partition_key": partition_key(partition), "path": part.path,
            "files": json.dumps(list(part.files)), "row_count": part.row_count, "size_bytes": part.size_bytes,
            "creation_tid": tid, "creation_csn": None, "removal_tid": None, "removal_csn": None,
            "stage_key": key, "stage_attempt": attempt, "removal_key": None, "removal_attempt": None,
            "created_at": now,
            **(version_of if not versions else {"schema_version": versions.get(table_id)}),
        }
        for table_id, parts in written for partition, part in parts
    ]
    if rows:
        conn.execute(_INSERT, rows)


def _older(column: Any, attempt: int | None) -> ColumnElement[bool]:
    """Rows of an EARLIER attempt: every attempt when none is given (explicit keys), else a lower number."""
    if attempt is None:
        return true()
    return or_(column.is_(None), column < attempt)


def compensate_key(conn: Connection, tid: str, key: str, attempt: int | None = None) -> int:
    """Invariant 7: undo what an earlier attempt staged under `key` in this transaction.

    Created parts get RollbackCSN and removal_tid = tid (so tid itself stops seeing them); removal
    locks the earlier attempt took are released. `after_compensation` mirrors this in Python.
    """
    created = conn.execute(
        update(schema.parts)
        .where(_p.creation_tid == tid, _p.stage_key == key, _p.creation_csn.is_(None),
               _older(_p.stage_attempt, attempt))
        .values(creation_csn=ROLLBACK_CSN, removal_tid=tid)  # removal_tid was NULL or already tid
    ).rowcount
    released = conn.execute(
        update(schema.parts)
        .where(_p.removal_tid == tid, _p.removal_key == key, _p.removal_csn.is_(None),
               or_(_p.creation_csn.is_(None), _p.creation_csn != ROLLBACK_CSN),
               _older(_p.removal_attempt, attempt))
        .values(removal_tid=None, removal_key=None, removal_attempt=None)
    ).rowcount
    return int(created) + int(released)


def _is_older(value: int | None, attempt: int | None) -> bool:
    return attempt is None or value is None or value < attempt


Withdrawn = Mapping[str, int | None]
"""{key: attempt} of the keys a statement withdraws: the parts staged under each key by attempts before
that attempt (None: by every attempt) are compensated, and the removal locks they took released."""


def after_compensation(part: PartRow, tid: str, withdrawn: Withdrawn) -> VersionInfo:
    """The part's version columns as `compensate_key(tid, key, attempt)` for every withdrawn key would
    leave them."""
    v = part.version
    creation_csn, removal_tid = v.creation_csn, v.removal_tid
    staged, locker = part.stage_key or "", part.removal_key or ""  # "": no key, never withdrawn
    if (v.creation_tid == tid and creation_csn is None and staged in withdrawn
            and _is_older(part.stage_attempt, withdrawn[staged])):
        creation_csn, removal_tid = ROLLBACK_CSN, tid
    elif (removal_tid == tid and v.removal_csn is None and creation_csn != ROLLBACK_CSN and locker in withdrawn
          and _is_older(part.removal_attempt, withdrawn[locker])):
        removal_tid = None
    return VersionInfo(v.creation_tid, creation_csn, removal_tid, v.removal_csn)


def visible_for_statement(conn: Connection, table_id: int, tid: str, snapshot: int, withdrawn: Withdrawn,
                          partition_keys: Sequence[str] | None = None) -> list[PartRow]:
    """What a statement sees: the transaction's view AFTER withdrawing the keys it withdraws (its own
    key's earlier attempts, and the keys that built on them), computed without changing anything (the
    statement withdraws and registers in one catalog transaction at its end, so a rejected statement
    changes nothing)."""
    params: dict[str, Any] = {"table_id": table_id, "reader": tid, "snapshot": snapshot}
    if partition_keys is not None:
        params["partition_keys"] = list(partition_keys)
    if withdrawn:
        params["withdrawn"] = list(withdrawn)
    stmt = _statement_stmt(partition_keys is not None, bool(withdrawn), table_versions.present(conn),
                           _lookup_dialect(conn))
    parts = {p.id: p for p in part_rows(conn.execute(stmt, params))}
    return [p for p in parts.values() if is_visible(after_compensation(p, tid, withdrawn), tid, snapshot)]


@functools.cache
def _statement_stmt(by_partition: bool, withdrawn: bool, versioned: bool,
                    dialect: str | None) -> Select[Any] | CompoundSelect[Any]:
    """visible_for_statement's statement, built once per shape with its values bound at execution, as
    _visible_stmt is (built per call, the span levels' statement cost a statement's open several milliseconds)."""
    table_id = bindparam("table_id", type_=BigInteger())
    reader = bindparam("reader", type_=String())
    keys: BindParameter[Any] | None = bindparam("partition_keys", expanding=True) if by_partition else None
    columns = _read_columns(versioned)
    branches = _visible(table_id, reader, bindparam("snapshot", type_=BigInteger()), keys, versioned, dialect, columns)
    if withdrawn:  # parts the withdrawn keys locked: visible again once they are withdrawn
        branches.append(select(*columns).where(*_filters(table_id, keys), _p.removal_tid == reader,
                                               _p.removal_key.in_(bindparam("withdrawn", expanding=True))))
    return _by_id(branches)


def consumers(conn: Connection, tid: str, key: str, attempt: int | None) -> set[str | None]:
    """The keys (None: a write with no key) holding removal locks on live parts that `key` staged in
    `tid` by attempts before `attempt` (None: every attempt): the statements that rewrote its output."""
    stmt = select(_p.removal_key).where(
        _p.creation_tid == tid, _p.stage_key == key, _p.creation_csn.is_(None), _older(_p.stage_attempt, attempt),
        _p.removal_tid == tid, _p.removal_csn.is_(None), or_(_p.removal_key.is_(None), _p.removal_key != key),
    ).distinct()
    return {r.removal_key for r in conn.execute(stmt)}


def staged_by(conn: Connection, tid: str, key: str, attempt: int | None) -> set[tuple[int, str]]:
    """(table id, partition key) of the live parts `key` staged in `tid` by attempts before `attempt`."""
    stmt = select(_p.table_id, _p.partition_key).where(
        _p.creation_tid == tid, _p.stage_key == key, _p.creation_csn.is_(None), _older(_p.stage_attempt, attempt),
    ).distinct()
    return {(int(r.table_id), str(r.partition_key)) for r in conn.execute(stmt)}


def held_by(conn: Connection, tid: str, key: str, attempt: int | None) -> set[tuple[int, str]]:
    """(table id, partition key) of the live parts whose removal lock `key`'s attempts before `attempt`
    hold in `tid`: withdrawing the key makes them visible again."""
    stmt = select(_p.table_id, _p.partition_key).where(
        _p.removal_tid == tid, _p.removal_key == key, _p.removal_csn.is_(None), _older(_p.removal_attempt, attempt),
        or_(_p.creation_csn.is_(None), _p.creation_csn != ROLLBACK_CSN),
    ).distinct()
    return {(int(r.table_id), str(r.partition_key)) for r in conn.execute(stmt)}


def lock_for_removal(conn: Connection, tid: str, key: str | None, part_ids: Sequence[int],
                     attempt: int | None = None, table_id: int | None = None) -> None:
    """Take the removal lock on each part (of table `table_id`, when given), or raise SerializationError naming
    the holder; InvalidArgumentError for a part of another table or none (a write plan carried as JSON names its
    removals by id: an id it was not given is refused, not locked)."""
    for part_id in part_ids:
        where = [_p.id == part_id, _p.removal_tid.is_(None)]
        if table_id is not None:
            where.append(_p.table_id == table_id)
        taken = conn.execute(
            update(schema.parts).where(*where).values(removal_tid=tid, removal_key=key, removal_attempt=attempt)
        ).rowcount
        if taken != 1:
            found = conn.execute(select(_p.removal_tid, _p.table_id).where(_p.id == part_id)).first()
            if found is None or (table_id is not None and int(found.table_id) != table_id):
                raise InvalidArgumentError(f"part {part_id} is not a part of the table this statement writes "
                                           f"(table id {table_id}): nothing was staged")
            holder = found.removal_tid
            if holder == tid:  # a statement of this transaction on another handle, in between: no conflict
                raise RetryConflictError(
                    f"part {part_id} was replaced by another statement of transaction {tid} while this one "
                    "ran; nothing was staged: run the statement again"
                )
            raise conflict_error(part_id, str(holder), tid)


def conflict_error(part_id: int, holder: str, tid: str) -> SerializationError:
    """The write-write conflict of invariant 6: `holder` has the removal lock of a part `tid` wants."""
    return SerializationError(f"part {part_id} is being replaced or was removed by transaction {holder}; "
                              f"transaction {tid} conflicts and can only roll back")


def tables_touched(conn: Connection, tid: str) -> list[int]:
    """Tables where `tid` created or removed a live part. A part compensated by a keyed retry
    (RollbackCSN, removal_tid = tid to hide it from tid itself) is no write of the transaction."""
    return sorted(int(r.table_id) for r in conn.execute(_TABLES_TOUCHED, {"b_tid": tid}))


_TABLES_TOUCHED = select(_p.table_id).where(schema.written_by(bindparam("b_tid", type_=String()))).distinct()


_STAGED_FILES = select(_p.table_id, _p.path, _p.files).where(
    _p.creation_tid == bindparam("b_tid", type_=String()), _p.creation_csn.is_(None))


def staged_files(conn: Connection, tid: str) -> list[tuple[int, str, tuple[str, ...]]]:
    """(table id, part path, file names) of every part `tid` staged and did not compensate (the commit's check)."""
    rows = conn.execute(_STAGED_FILES, {"b_tid": tid})
    return [(int(r.table_id), str(r.path), tuple(json.loads(r.files))) for r in rows]


def stamp_commit(conn: Connection, tid: str, table_id: int, csn: int) -> None:
    """Apply one table of a committed transaction: its CSN on created and removed parts (idempotent; one
    statement)."""
    conn.execute(_STAMP_TABLE, {"b_tid": tid, "b_csn": csn, "b_table": table_id})


_CREATED_BY = and_(_p.creation_tid == bindparam("b_tid", type_=String()), _p.creation_csn.is_(None))
_REMOVED_BY = and_(_p.removal_tid == bindparam("b_tid", type_=String()), _p.removal_csn.is_(None))
_STAMP_VALUES = {
    "creation_csn": case((_CREATED_BY, bindparam("b_csn", type_=BigInteger())), else_=_p.creation_csn),
    "removal_csn": case((_REMOVED_BY, bindparam("b_csn", type_=BigInteger())), else_=_p.removal_csn)}
_STAMP_ALL = update(schema.parts).where(or_(_CREATED_BY, _REMOVED_BY)).values(_STAMP_VALUES)
"""stamp_commit_all's one statement: each row matched by either tid index (an OR of the two: PostgreSQL's BitmapOr,
SQLite's MULTI-INDEX OR) gets the CSN in the column(s) its condition names; a part the transaction created and removed
gets both."""
_STAMP_TABLE = update(schema.parts).where(
    schema.of_table_along_tid(bindparam("b_table", type_=BigInteger())), or_(_CREATED_BY, _REMOVED_BY)
).values(_STAMP_VALUES)
"""stamp_commit's, for one table: the same, the table filtered along the tid indexes (schema.of_table_along_tid)."""


def stamp_commit_all(conn: Connection, tid: str, csn: int) -> None:
    """Apply a committed transaction in every table at once: its CSN on the parts it created and removed, in one
    statement (the SQL oracle's commit, where record and stamps share one catalog transaction)."""
    conn.execute(_STAMP_ALL, {"b_tid": tid, "b_csn": csn})


def stamp_rollback(conn: Connection, tid: str, table_id: int) -> None:
    """Invariant 5 for one table: created parts never visible, removal locks released."""
    params = {"b_tid": tid, "b_table": table_id}
    conn.execute(_ROLL_BACK_CREATED, params)
    conn.execute(_RELEASE_REMOVED, params)


_OF_TABLE = schema.of_table_along_tid(bindparam("b_table", type_=BigInteger()))
_ROLL_BACK_CREATED = update(schema.parts).where(_OF_TABLE, _CREATED_BY).values(creation_csn=ROLLBACK_CSN)
_RELEASE_REMOVED = update(schema.parts).where(_OF_TABLE, _REMOVED_BY).values(
    removal_tid=None, removal_key=None, removal_attempt=None)


def written_partitions(conn: Connection, tid: str, table_id: int) -> set[str]:
    """Partition keys a (committed) transaction created or removed parts in, for serializable checks."""
    stmt = select(_p.partition_key).where(
        schema.of_table_along_tid(table_id),
        or_(_p.creation_tid == tid, _p.removal_tid == tid),
        or_(_p.creation_csn.is_(None), _p.creation_csn != ROLLBACK_CSN),  # compensated parts wrote nothing
    ).distinct()
    return {str(r.partition_key) for r in conn.execute(stmt)}


def garbage(conn: Connection, horizon: int, limit: int) -> list[PartRow]:
    """Parts no snapshot >= horizon can see: rolled back, or removed at a CSN <= horizon."""
    stmt = select(*columns(conn)).where(
        or_(_p.creation_csn == ROLLBACK_CSN, and_(_p.removal_csn.is_not(None), _p.removal_csn <= horizon))
    ).limit(limit)
    return part_rows(conn.execute(stmt))


def forget(conn: Connection, part_ids: Sequence[int]) -> int:
    """Delete the rows of `part_ids` in one statement (vacuum's batch, whose files are gone); returns how many."""
    if not part_ids:
        return 0
    if conn.dialect.name == "postgresql":  # one array parameter: psycopg converts a statement of 500 parameters anew
        return int(conn.execute(_FORGET_PG, {"ids": list(part_ids)}).rowcount or 0)  # each time (3 of 7 ms a batch)
    return int(conn.execute(delete(schema.parts).where(_p.id.in_(list(part_ids)))).rowcount or 0)


_FORGET_PG = delete(schema.parts).where(_p.id == any_(bindparam("ids", type_=ARRAY(BigInteger()))))


def registered_paths(conn: Connection, table_id: int) -> list[str]:
    return list(conn.execute(select(_p.path).where(_p.table_id == table_id)).scalars().all())


def of_transaction(conn: Connection, tid: str) -> list[PartRow]:
    stmt = select(*columns(conn)).where(or_(_p.creation_tid == tid, _p.removal_tid == tid)).order_by(_p.id)
    return part_rows(conn.execute(stmt))


def pending_tables(conn: Connection, tid: str) -> list[int]:
    """Tables where `tid` still has unstamped created parts or held removal locks (rollback's work)."""
    stmt = select(_p.table_id).where(
        or_(and_(_p.creation_tid == tid, _p.creation_csn.is_(None)),
            and_(_p.removal_tid == tid, _p.removal_csn.is_(None)))
    ).distinct()
    return sorted(int(r.table_id) for r in conn.execute(stmt))


def needed_files(conn: Connection, table_id: int) -> list[tuple[str, tuple[str, ...]]]:
    """(path, file names) of every committed part of a table the latest snapshot sees: what a root must hold
    for this catalog (core/ownership.adopt)."""
    stmt = select(_p.path, _p.files).where(
        _p.table_id == table_id, _p.creation_csn.is_not(None), _p.creation_csn != ROLLBACK_CSN,
        _p.removal_csn.is_(None))
    return [(str(r.path), tuple(json.loads(r.files))) for r in conn.execute(stmt)]


def changed_parts(conn: Connection, table_id: int, after: int, upto: int) -> tuple[list[PartRow], list[PartRow]]:
    """The parts that became visible between snapshots `after` and `upto` (created in between, not removed by
    `upto`), and those that stopped being visible (created by `after`, removed in between): invariant 2's rule at
    both ends. A staged part (no creation CSN) and a rolled-back one (RollbackCSN) are in neither."""
    created = select(*columns(conn)).where(_p.table_id == table_id, _p.creation_csn > after, _p.creation_csn <= upto,
                                         or_(_p.removal_csn.is_(None), _p.removal_csn > upto)).order_by(_p.id)
    removed = select(*columns(conn)).where(_p.table_id == table_id, _p.removal_csn > after, _p.removal_csn <= upto,
                                         _p.creation_csn <= after).order_by(_p.id)
    return part_rows(conn.execute(created)), part_rows(conn.execute(removed))
