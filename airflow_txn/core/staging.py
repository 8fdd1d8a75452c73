"""Staging writes inside a transaction: append (to one table, or to several in one statement), overwrite,
delete, update.

Every statement follows the same steps:
  1. validate everything the caller passed (nothing written yet; invariant 9)
  2. decide which parts it replaces (only parts holding affected rows) from the transaction's view
     AFTER compensating the key's earlier attempts (computed, not yet done), and compute the rows
  3. write new part files (one plain Parquet file per partition, its footer naming the transaction; a
     statement's files are written side by side, so on an object store their PUTs overlap)
  4. ONE catalog transaction: check the transaction (an append to a table seen before checks it
     only here), fence off stale attempts, withdraw what earlier attempts staged under the key and
     what other keys built on it (invariant 7, retries.py), take removal locks (invariant 6),
     stage the version of the table's schema a merge_schema write brings (evolution.merge_schema
     decided it in step 1), register the new parts.
So a statement is atomic: rejected or failed before step 4, it changed nothing in the catalog. If
step 4 fails the new files are deleted at once; if the process dies they are orphans vacuum removes.

Keys and attempts: a statement with an explicit key replaces everything staged before under that
key. Writes under a transaction's default key (Airflow's dag/task/map index) carry the attempt
number (the try number): all writes of one attempt accumulate, the first write of a newer attempt
replaces every older attempt's writes, and an older attempt writing after a newer one has started
is refused (StaleAttemptError) so a zombie task cannot undo its retry. Keys whose statements rewrote
what a retried key withdraws are withdrawn with it and must run again before commit (retries.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, TypeVar

import pyarrow as pa
import pyarrow.compute as pc
from sqlalchemy import Connection

from airflow_txn.catalog import compaction_records, part_records, read_sets, table_registry, table_versions, txn_records
from airflow_txn.catalog.part_records import PartRow
from airflow_txn.catalog.table_registry import TableInfo
from airflow_txn.core import crashpoints, retries, versions
from airflow_txn.core.isolation import Isolation
from airflow_txn.core.runtime import Runtime
from airflow_txn.errors import (
    InvalidArgumentError,
    InvalidNameError,
    MergedAwayError,
    SchemaMismatchError,
    TableNotFoundError,
)
from airflow_txn.model import evolution, merging
from airflow_txn.model.options import WriteMode
from airflow_txn.model.partitioning import (
    WHOLE_TABLE,
    Partition,
    check_partition_values,
    parse_partition_key,
    partition_key,
    split_by_partition,
    text_to_value,
)
from airflow_txn.model.parts import WrittenPart
from airflow_txn.model.results import MergeCounts
from airflow_txn.model.schema_check import conform


@dataclass(frozen=True, slots=True)
class Statement:
    """Who is writing: the transaction, its snapshot, and the staging key."""

    tid: str
    snapshot: int
    key: str | None
    attempt: int | None = None
    tables: dict[str, TableInfo] | None = field(default=None, compare=False, repr=False)
    """Tables already looked up (Runtime.tables), so an append to a table seen before skips its lookup: the
    version of the table's schema it used is checked when it registers, and the append runs again with a fresh
    lookup when the table changed since (docs/DESIGN.md, D27); None: no cache."""
    isolation: Isolation | None = None
    """The transaction's isolation level: what the statement scanned to choose its removals is recorded as
    it asks, in the registration's own catalog transaction (None: nothing recorded)."""


def load_table(rt: Runtime, stmt: Statement, table: str, check_transaction: bool = True) -> TableInfo:
    """Look up the table and check the transaction may write (before any file is written: statements
    that scan the table first, and Spark writes, which are expensive to throw away).

    check_transaction=False (appends): a table seen before costs no catalog round trip; the
    transaction is then checked only when the write registers (under its row lock, as always), and a
    write refused there deletes the files it wrote, leaving storage as it was."""
    cache = stmt.tables if isinstance(table, str) else None
    cached = None if cache is None else cache.get(table)
    if cached is not None and not check_transaction and cached.version != table_registry.CACHED:
        return cached  # its schema version is checked when the write registers (register_all)
    with rt.catalog.read() as conn:
        info = versions.table_for_statement(conn, cached or table_registry.get(conn, table), stmt.tid, stmt.snapshot,
                                            stmt.key, stmt.attempt)
        txn_records.require_usable(txn_records.fetch(conn, stmt.tid))
    if cache is not None and info.committed:  # a version the transaction staged itself is not for others
        cache[table] = info
    return info


def compensate(rt: Runtime, stmt: Statement) -> int:
    """Undo now, in one catalog transaction, what earlier attempts staged under the statement's key
    (e.g. when a task failed and will be retried, so sibling tasks stop seeing its partial output),
    and the work of keys built on it (retries.py). Returns the number of parts changed. Staging under
    the key does this by itself anyway; an attempt given here fences older ones from now on."""
    if stmt.key is None:
        return 0
    key = stmt.key
    with rt.catalog.write() as conn:
        txn_records.lock_usable(conn, rt.catalog, stmt.tid)
        retries.fence(conn, stmt.tid, key, stmt.attempt)
        return retries.withdraw(conn, stmt.tid, key, stmt.attempt)


def start_attempt(rt: Runtime, tid: str, key: str, attempt: int) -> None:
    """Record that `attempt` of `key` has started (it fences older attempts from now on, whether or not
    it ever writes); StaleAttemptError if a newer one started already."""
    with rt.catalog.write() as conn:
        txn_records.fetch(conn, tid, rt.catalog)  # the row lock: key rows change under it only
        retries.fence(conn, tid, key, attempt)


@dataclass(frozen=True, slots=True)
class Seen:
    """A table as a statement that changes it sees it (its key's earlier attempts withdrawn): table_seen."""

    info: TableInfo
    """The table as of `version`."""
    version: table_versions.VersionRow
    """The version of its schema the statement sees: a change takes its removal lock (table_versions.stage)."""
    last_column_id: int
    """The highest column id the table ever gave, withdrawn and rolled-back versions included (a new column's id is
    above it: docs/DESIGN.md, D27)."""
    parts: tuple[PartRow, ...] = ()
    """The parts the statement sees (with_parts=True)."""

    def numbered(self) -> pa.Schema:
        """The schema the statement sees, carrying `last_column_id` as the highest id ever given (evolution.LAST_ID):
        what a change's new column is numbered after."""
        schema = self.info.schema
        return schema.with_metadata({**(schema.metadata or {}), evolution.LAST_ID: str(self.last_column_id).encode()})


def table_seen(rt: Runtime, stmt: Statement, table: object, with_parts: bool = False) -> Seen:
    """The table `table` names as the statement sees it, in one catalog read (the lookup of every statement that
    stages a version of a table's schema): InvalidNameError for a table that is not a name, TableNotFoundError when
    the statement sees no such table (dropped, renamed away); the transaction checked usable."""
    if not isinstance(table, str):
        raise InvalidNameError(f"table must be a table name, got {type(table).__name__}")
    with rt.catalog.read() as conn:
        txn_records.require_usable(txn_records.fetch(conn, stmt.tid))
        info = table_registry.get(conn, table)
        withdrawn = retries.withdrawn(conn, stmt.tid, stmt.key, stmt.attempt)
        before = table_versions.visible_for_statement(conn, info.id, stmt.tid, stmt.snapshot, withdrawn)
        if before is None or before.dropped or before.name != info.name.qualified:
            raise TableNotFoundError(f"table {table} does not exist in this transaction's view", table=table)
        parts = part_records.visible_for_statement(conn, info.id, stmt.tid, stmt.snapshot, withdrawn) \
            if with_parts else []
        given = table_versions.last_column_id(conn, info.id)
    return Seen(table_registry.at_version(info, before), before, given, tuple(parts))


def visible(rt: Runtime, stmt: Statement, info: TableInfo,
            partition_keys: Sequence[str] | None = None) -> list[PartRow]:
    """The parts this statement sees: what its key's earlier attempts staged, and what other keys built
    on that, already withdrawn (virtually: the statement withdraws them when it registers)."""
    with rt.catalog.read() as conn:
        withdrawn = retries.withdrawn(conn, stmt.tid, stmt.key, stmt.attempt)
        return part_records.visible_for_statement(conn, info.id, stmt.tid, stmt.snapshot, withdrawn, partition_keys)


def written_schemas(rt: Runtime, info: TableInfo, parts: Sequence[PartRow]) -> dict[int, pa.Schema]:
    """The schemas of the other versions of the table `parts` were written under (none: no catalog read)."""
    if all(p.schema_version == info.version for p in parts):
        return {}
    with rt.catalog.read() as conn:
        return versions.written_schemas(conn, info, parts)


def read_part(rt: Runtime, info: TableInfo, part: PartRow) -> pa.Table:
    """The part's rows as the statement's version of the table reads them (a part written under another version
    of its schema is projected: versions.py)."""
    if part.schema_version == info.version:
        return rt.storage.read_part(info.directory, part.path, part.files, info.schema, part.partition)
    with rt.catalog.read() as conn:
        schemas = versions.written_schemas(conn, info, [part])
    return versions.read_part(rt, info, part, schemas)


def _conformed(data: object, info: TableInfo) -> pa.Table:
    """`data` conformed to the table's schema, its partition values checked (both before any write)."""
    rows = conform(data, info.schema, info.name.qualified)
    check_partition_values(rows, info.partition_by, info.name.qualified)
    return rows


def _cached(stmt: Statement, tables: object) -> bool:
    """Whether an append to `tables` (names) would use a cached lookup: checked when it registers."""
    names = [tables] if isinstance(tables, str) else list(tables) if isinstance(tables, Mapping) else []
    cache = stmt.tables
    return cache is not None and any(isinstance(n, str) and n in cache and cache[n].version != table_registry.CACHED
                                     for n in names)


@dataclass(frozen=True, slots=True)
class Evolve:
    """The version of a table's schema a write stages with its rows, in its registration (merge_schema: the data's
    new columns added, the columns it holds wider widened; evolution.merge_schema decides them)."""

    before: table_versions.VersionRow
    """The version the statement saw: its removal lock is taken (table_versions.stage), as a table change takes it."""
    schema: pa.Schema
    detail: str


def _rows(rt: Runtime, stmt: Statement, table: str, data: object, cached: bool,
          merge: bool) -> tuple[TableInfo, pa.Table, Evolve | None]:
    """The table as the statement writes it and `data` conformed to it (nothing written yet). `merge`
    (merge_schema=True): the table as it will be once the changes the data needs are staged with the rows
    (evolution.merge_schema: refused before anything is staged when the data cannot be merged), the data's
    columns taken by name in the table's order."""
    if not merge:
        info = load_table(rt, stmt, table, check_transaction=not cached)
        return info, _conformed(data, info), None
    seen = table_seen(rt, stmt, table)
    info = seen.info
    if isinstance(data, pa.RecordBatch):
        data = pa.Table.from_batches([data])
    if not isinstance(data, pa.Table):
        raise SchemaMismatchError(f"data for {info.name} must be a pyarrow.Table, got {type(data).__name__}")
    merged = evolution.merge_schema(seen.numbered(), data.schema, table=info.name.qualified,
                                    partition_by=info.partition_by)
    evolve = None
    if merged.changes:
        info = replace(info, schema=merged.schema, committed=False)
        evolve = Evolve(seen.version, merged.schema, merged.detail)
    if sorted(data.column_names) == sorted(info.schema.names):
        data = data.select(info.schema.names)
    return info, _conformed(data, info), evolve


def append(rt: Runtime, stmt: Statement, table: str, data: object, merge: bool = False) -> int:
    """Stage `data` as new parts of `table`; `merge`: merge_schema=True (_rows)."""
    cached = not merge and _cached(stmt, table)
    try:
        return _append(rt, stmt, table, data, cached, merge)
    except SchemaMismatchError:
        if not cached:
            raise
    return _append(rt, stmt, table, data, False, merge)  # the table changed since it was cached: look it up again


def _append(rt: Runtime, stmt: Statement, table: str, data: object, cached: bool, merge: bool) -> int:
    info, rows, evolve = _rows(rt, stmt, table, data, cached, merge)
    pieces = [(p, t) for p, t in split_by_partition(rows, info.partition_by) if t.num_rows]
    return _stage_all(rt, stmt, [_Planned(info, pieces, check_version=cached, evolve=evolve)])[0]


def append_many(rt: Runtime, stmt: Statement, tables: object, merge: bool = False) -> dict[str, int]:
    """Append to several tables in one statement: {table: data} -> {table: rows staged}. Every table's data is
    checked before any file is written; the files are written side by side and registered at once. `merge`:
    merge_schema=True, each table's changes staged in the same registration."""
    if not isinstance(tables, Mapping) or not tables:
        raise InvalidArgumentError("append_many takes a non-empty dict {table name: pyarrow.Table}, "
                                   f"got {type(tables).__name__}{' (empty)' if isinstance(tables, Mapping) else ''}")
    cached = not merge and _cached(stmt, tables)
    try:
        return _append_many(rt, stmt, tables, cached, merge)
    except SchemaMismatchError:
        if not cached:
            raise
    return _append_many(rt, stmt, tables, False, merge)  # a table changed since it was cached: look them up again


def _append_many(rt: Runtime, stmt: Statement, tables: Mapping[str, object], cached: bool,
                 merge: bool) -> dict[str, int]:
    plans: list[_Planned] = []
    for table, data in tables.items():
        info, rows, evolve = _rows(rt, stmt, table, data, cached, merge)
        plans.append(_Planned(info, [(p, t) for p, t in split_by_partition(rows, info.partition_by) if t.num_rows],
                              check_version=cached, evolve=evolve))
    return dict(zip(tables, _stage_all(rt, stmt, plans), strict=True))


APPEND, OVERWRITE, REWRITE = WriteMode.APPEND, WriteMode.OVERWRITE, WriteMode.REWRITE
"""What a statement does to its table (decide; model/options.WriteMode): adds parts (APPEND), replaces the whole
table or the listed partitions (OVERWRITE), or replaces parts it chose from the whole table by their rows (REWRITE:
delete, update, copy-on-write)."""


@dataclass(frozen=True, slots=True)
class Decided:
    """What a statement replaces, decided by the core (decide): the one place the overwrite rule is written."""

    mode: WriteMode
    removals: tuple[int, ...] = ()
    """The parts the statement replaces (ids)."""
    scanned: tuple[str, ...] | None = None
    """The partition keys the removals were chosen from (WHOLE_TABLE: all; None: none, an append): what a retry
    of another key that rewrote them withdraws (retries.record), and the read set the isolation level records."""
    allowed: tuple[str, ...] | None = None
    """The partition keys the statement may write (an overwrite of listed partitions); None: any."""
    visible: tuple[PartRow, ...] = ()
    """REWRITE with no parts chosen yet: the parts the statement sees, to choose from (replacing)."""
    validated: bool = False
    """What it scanned is validated at commit whatever the isolation level (a MERGE that inserts or deletes rows
    no source row matches: a concurrent commit into what it scanned would make it wrong; docs/DESIGN.md D27)."""

    def replacing(self, tid: str, ids: Sequence[int]) -> Decided:
        """A REWRITE choosing `ids` among `visible`: MergedAwayError (the transaction stays usable) for one no longer
        visible, SerializationError (a conflict) for one another transaction holds."""
        return replace_parts(tid, {p.id: p.version.removal_tid for p in self.visible}, ids)


def decide(rt: Runtime, stmt: Statement, info: TableInfo, mode: WriteMode,
           partitions: Sequence[Mapping[str, Any]] | None = None, replaces: Sequence[int] | None = None) -> Decided:
    """What a statement of `mode` on `info` replaces, from the statement's view (visible): nothing for an append;
    for an overwrite every visible part of the listed `partitions` (None: of the whole table); for a rewrite the
    parts `replaces` (checked still visible and free), or, with None, nothing yet (Decided.visible to choose from).
    InvalidNameError for `partitions` or `replaces` that do not fit; SerializationError when another
    transaction holds a part it would replace (before any file is written)."""
    check_mode(mode, partitions, replaces)
    if mode == APPEND:
        return Decided(mode)
    if mode == OVERWRITE:
        keys = info.partition_keys(partitions)
        victims = visible(rt, stmt, info, keys)
        check_free(stmt.tid, {p.id: p.version.removal_tid for p in victims})
        return Decided(mode, tuple(p.id for p in victims), tuple(keys or [WHOLE_TABLE]),
                       None if keys is None else tuple(keys))
    seen = visible(rt, stmt, info)
    if replaces is not None:
        return replace_parts(stmt.tid, {p.id: p.version.removal_tid for p in seen}, replaces)
    return Decided(mode, (), (WHOLE_TABLE,), None, tuple(seen))


def check_mode(mode: WriteMode, partitions: object, replaces: object) -> None:
    """InvalidNameError for `partitions`/`replaces` that do not go with `mode` (a member: WriteMode.parse checked
    the caller's value where it came in)."""
    if partitions is not None and mode != OVERWRITE:
        raise InvalidNameError("partitions=... only goes with mode='overwrite'")
    if replaces is not None and mode != REWRITE:
        raise InvalidNameError("replaces=... (the parts a rewrite replaces) only goes with a rewrite")


def replace_parts(tid: str, holders: Mapping[int, str | None], ids: Sequence[int]) -> Decided:
    """A REWRITE replacing the parts `ids` chosen among those the statement sees ({part id: removal lock holder}):
    MergedAwayError for one no longer there (a background merge combined it with others since it was chosen: the
    statement chooses again), SerializationError for one another transaction holds."""
    gone = [i for i in ids if i not in holders]
    if gone:
        raise MergedAwayError(f"part {gone[0]} is no longer visible to the statement (a background merge combined it "
                              "with others since it was chosen): choose the parts again")
    check_free(tid, {i: holders[i] for i in ids})
    return Decided(REWRITE, tuple(ids), (WHOLE_TABLE,))


def check_free(tid: str, holders: Mapping[int, str | None]) -> None:
    """SerializationError when another transaction holds the removal lock of one of the parts ({part id: holder}):
    checked before files are written (invariant 6), where the registration would fail on the same lock anyway."""
    for part_id, holder in holders.items():
        if holder is not None and holder != tid:
            raise part_records.conflict_error(part_id, holder, tid)


def check_stray(table: str, allowed: Sequence[str] | None, written: Sequence[str]) -> None:
    """SchemaMismatchError when a statement allowed only the partition keys `allowed` (an overwrite of listed
    partitions) wrote rows of another partition (`written`: the keys it wrote); None allows any."""
    if allowed is None:
        return
    stray = [k for k in written if k not in allowed]
    if stray:
        raise SchemaMismatchError(
            f"overwrite of {table} lists partitions {[parse_partition_key(k) for k in allowed]} but the data "
            f"also holds rows of {parse_partition_key(stray[0])}; nothing was staged")


def overwrite(rt: Runtime, stmt: Statement, table: str, data: object,
              partitions: Sequence[Mapping[str, Any]] | None, merge: bool = False) -> int:
    """Replace the whole table or the listed partitions with `data`; `merge`: merge_schema=True (_rows)."""
    info, rows, evolve = _rows(rt, stmt, table, data, False, merge)
    pieces = [(p, t) for p, t in split_by_partition(rows, info.partition_by) if t.num_rows]
    listed = info.partition_keys(partitions)  # a bad list or stray rows are refused before the conflict check
    check_stray(info.name.qualified, listed, [partition_key(p) for p, _ in pieces])
    return _stage(rt, stmt, info, pieces, decide(rt, stmt, info, OVERWRITE, partitions), evolve)


def delete(rt: Runtime, stmt: Statement, table: str, where: object) -> int:
    info = load_table(rt, stmt, table)
    predicate = _check_predicate(where, info)
    return _rewrite(rt, stmt, info, predicate, lambda rows, mask: rows.filter(pc.invert(mask)))


def update(rt: Runtime, stmt: Statement, table: str, where: object, assignments: object) -> int:
    info = load_table(rt, stmt, table)
    predicate = _check_predicate(where, info)
    setters = _check_assignments(assignments, info)
    return _rewrite(rt, stmt, info, predicate,
                    lambda rows, mask: _conformed(_assign(rows, mask, setters, info), info))


MERGE_RETRIES = 20
"""A statement whose chosen parts a background merge combined with others chooses again (at most so often)."""


def _rewrite(rt: Runtime, stmt: Statement, info: TableInfo, predicate: pc.Expression,
             replace: Callable[[pa.Table, pa.ChunkedArray], pa.Table]) -> int:
    """`_rewrite_once`, again when a background merge swapped out parts it chose (compaction.py): the
    snapshot's rows are the same, now in the merged part, so choosing again gives the same result."""
    for _ in range(MERGE_RETRIES - 1):
        try:
            return _rewrite_once(rt, stmt, info, predicate, replace)
        except compaction_records.MergedAwayError:
            continue
    return _rewrite_once(rt, stmt, info, predicate, replace)


def _rewrite_once(rt: Runtime, stmt: Statement, info: TableInfo, predicate: pc.Expression,
                  replace: Callable[[pa.Table, pa.ChunkedArray], pa.Table]) -> int:
    """Copy-on-write: each visible part holding matching rows is replaced by `replace(rows, mask)`;
    parts without a match are left alone. Returns the number of matching rows."""
    decided = decide(rt, stmt, info, REWRITE)
    removals: list[int] = []
    pieces: list[tuple[Partition, pa.Table]] = []
    matched = 0
    for part in decided.visible:
        rows = read_part(rt, info, part)
        mask = _mask(rows, predicate)
        matches = int(pc.sum(mask).as_py() or 0)
        if not matches:
            continue
        matched += matches
        removals.append(part.id)
        pieces += split_by_partition(replace(rows, mask), info.partition_by)
    _stage(rt, stmt, info, [(p, t) for p, t in pieces if t.num_rows], decided.replacing(stmt.tid, removals))
    return matched


def merge(rt: Runtime, stmt: Statement, table: str, source: object, on: object, when_matched: object,
          when_not_matched: object, when_not_matched_by_source: object) -> MergeCounts:
    """MERGE (model/merging.py): the request checked before anything is written, then a rewrite of the parts that
    can hold a matching key (of the source's partitions, when the key covers the partition columns; of every part
    with when_not_matched_by_source="delete") and the unmatched source rows appended, in ONE statement."""
    info = load_table(rt, stmt, table)
    spec = merging.check(info.schema, info.name.qualified, source, on, when_matched, when_not_matched,
                         when_not_matched_by_source)
    if set(info.partition_by) <= set(spec.source.column_names):  # what it may insert: checked before any read
        check_partition_values(spec.source, info.partition_by, info.name.qualified)
    for _ in range(MERGE_RETRIES - 1):
        try:
            return _merge_once(rt, stmt, info, spec)
        except compaction_records.MergedAwayError:
            continue
    return _merge_once(rt, stmt, info, spec)


def _merge_once(rt: Runtime, stmt: Statement, info: TableInfo, spec: merging.MergeSpec) -> MergeCounts:
    decided = decide(rt, stmt, info, REWRITE)
    scanned = merge_scope(info.partition_by, spec.on, spec.every_part, lambda: spec.source)
    candidates = in_scope(decided.visible, scanned)
    removals: list[int] = []
    pieces: list[tuple[Partition, pa.Table]] = []
    matched: list[pa.Array] = []
    updated = deleted = 0
    # still scanned, not read: a part whose key ranges hold no source key (its footers' statistics, D27)
    for part, sources in _pruned(rt, info, spec, candidates):
        merged = merging.merge_part(read_part(rt, info, part), spec, sources)
        matched.append(merged.matched)
        if merged.rows is None:
            continue
        updated += merged.updated
        deleted += merged.deleted
        removals.append(part.id)
        pieces += split_by_partition(_conformed(merged.rows, info), info.partition_by)
    inserted = merging.inserts(spec, matched)
    added = split_by_partition(_conformed(inserted, info), info.partition_by) if inserted.num_rows else []
    chosen = decided.replacing(stmt.tid, removals)
    # what it scanned is what a retry of another key withdraws, and (inserting, or deleting what the source lacks)
    # what a concurrent commit must not have changed: validated at commit whatever the level (D27)
    chosen = replace(chosen, scanned=scanned, validated=merge_validated(bool(inserted.num_rows), spec.every_part))
    _stage(rt, stmt, info, _with_inserts(pieces, added), chosen)
    return MergeCounts(updated=updated, inserted=int(inserted.num_rows), deleted=deleted)


def merge_scope(partition_by: Sequence[str], on: Sequence[str], every_part: bool,
                source_partitions: Callable[[], pa.Table]) -> tuple[str, ...]:
    """The partition keys a MERGE scans (its candidates: in_scope): when the key covers the partition columns (and
    it deletes nothing the source lacks), a match has the source row's partition values, so only the partitions of
    the source's rows (`source_partitions()`: a table holding at least the partition columns of the source's rows,
    in the table's types; called only then) can hold one; else the whole table (WHOLE_TABLE)."""
    if partition_by and not every_part and set(partition_by) <= set(on):
        return tuple(dict.fromkeys(partition_key(p) for p, _ in split_by_partition(source_partitions(), partition_by)))
    return (WHOLE_TABLE,)


class _InPartition(Protocol):
    @property
    def partition_key(self) -> str: ...


P = TypeVar("P", bound=_InPartition)


def in_scope(parts: Sequence[P], scanned: Sequence[str]) -> list[P]:
    """The parts (anything with a partition_key) of the partitions `scanned` (merge_scope) holds."""
    if WHOLE_TABLE in scanned:
        return list(parts)
    keys = set(scanned)
    return [p for p in parts if p.partition_key in keys]


def merge_validated(inserts: bool, every_part: bool) -> bool:
    """Whether what a MERGE scanned is validated at commit whatever the isolation level (D27): when it inserts rows
    (a concurrent commit into a scanned partition may hold their keys) or deletes the rows no source row matches
    (a concurrent commit may add such rows)."""
    return inserts or every_part


def _pruned(rt: Runtime, info: TableInfo, spec: merging.MergeSpec,
            candidates: Sequence[PartRow]) -> list[tuple[PartRow, pa.Array | None]]:
    """The candidate parts that may hold a key of the source, each with the numbers of the source rows it may hold
    (None: any): those whose key columns' ranges (each file's Parquet statistics, or the part's partition value)
    some source key lies in, all at once (merging.rows_in). A part without a range for a key column is kept for
    that column; with when_not_matched_by_source="delete" every part is kept. Costs one footer read per candidate
    file, where reading the part costs all of it."""
    columns = merging.statistics_keys(spec, info.schema)
    if not columns or not candidates:
        return [(part, None) for part in candidates]
    keys = merging.source_keys(spec)
    stored = {c: info.schema.field(c).type for c in columns if c not in info.partition_by}
    found = _key_ranges(rt, info, candidates, stored) if stored else [{} for _ in candidates]
    by_partition: dict[str, pa.Table] | None = None
    if info.partition_by and set(info.partition_by) <= set(spec.on):  # a part against its own partition's keys
        by_partition = {partition_key(p): rows for p, rows in split_by_partition(keys, info.partition_by)}
    kept: list[tuple[PartRow, pa.Array | None]] = []
    for part, ranges in zip(candidates, found, strict=True):
        own = keys if by_partition is None else by_partition.get(part.partition_key)
        if own is None:
            continue
        for column in columns:  # a partition column of the key: the part's value is its range
            text = part.partition.get(column) if by_partition is None and column in info.partition_by else None
            if text is not None:
                value = text_to_value(text, info.schema.field(column).type)
                ranges = {**ranges, column: (value, value)}
        numbers = merging.rows_in(own, ranges)
        if len(numbers):
            kept.append((part, numbers))
    return kept


def _key_ranges(rt: Runtime, info: TableInfo, candidates: Sequence[PartRow],
                stored: Mapping[str, pa.DataType]) -> list[dict[str, tuple[object, object]]]:
    """Each candidate's ranges of the key columns `stored` ({current name: type}), from its files' statistics. A
    part written under another version of the schema holds a key column under the name and type it had then: it is
    found by its column id (after a rename the file's column of that name may be another one), and a column that
    was added or widened since gives no range (the part is kept for it)."""
    schemas: versions.Schemas = {}
    if any(part.schema_version != info.version for part in candidates):
        with rt.catalog.read() as conn:
            schemas = versions.written_schemas(conn, info, candidates)
    found: list[dict[str, tuple[object, object]]] = [{} for _ in candidates]
    groups: dict[int, list[int]] = {}
    for index, part in enumerate(candidates):
        groups.setdefault(part.schema_version, []).append(index)
    for version, indexes in groups.items():
        names = _written_names(info.schema, schemas.get(version), stored) if version != info.version else \
            {name: name for name in stored}
        if not names:
            continue
        wanted = {names[name]: stored[name] for name in names}
        ranges = rt.storage.column_ranges(info.directory, [(candidates[i].path, candidates[i].files) for i in indexes],
                                          wanted)
        back = {written: name for name, written in names.items()}
        for index, got in zip(indexes, ranges, strict=True):
            found[index] = {back[written]: value for written, value in got.items() if written in back}
    return found


def _written_names(current: pa.Schema, written: pa.Schema | None,
                   stored: Mapping[str, pa.DataType]) -> dict[str, str]:
    """{current name: the name the column had in `written`} for the key columns of the same id and type there."""
    if written is None:
        return {}
    by_id = {evolution.column_id(f): f for f in written}
    names = {}
    for name, type_ in stored.items():
        column = evolution.column_id(current.field(name))
        then = by_id.get(column) if column is not None else None
        if then is not None and then.type == type_:
            names[name] = then.name
    return names


def _with_inserts(rewritten: Sequence[tuple[Partition, pa.Table]],
                  inserted: Sequence[tuple[Partition, pa.Table]]) -> list[tuple[Partition, pa.Table]]:
    """The new parts of a MERGE: each rewritten part's rows, a partition's inserted rows added to the last part
    rewritten in it (one file fewer to write, and to read later), else a part of their own."""
    pieces = [(partition, rows) for partition, rows in rewritten if rows.num_rows]
    last = {partition_key(partition): index for index, (partition, _) in enumerate(pieces)}
    for partition, rows in inserted:
        index = last.get(partition_key(partition))
        if index is None:
            pieces.append((partition, rows))
        else:
            pieces[index] = (partition, pa.concat_tables([pieces[index][1], rows]))
    return [(partition, rows) for partition, rows in pieces if rows.num_rows]


@dataclass(frozen=True, slots=True)
class TableWrite:
    """What one statement does to one table: the parts it wrote, the parts it replaces, what it scanned."""

    info: TableInfo
    written: Sequence[tuple[Partition, WrittenPart]]
    removals: Sequence[int] = ()
    scanned: Sequence[str] | None = None
    """The partition keys the statement chose its removals from (WHOLE_TABLE: all of them; None: none, an append):
    recorded for retries, and as a read for the isolation level (Statement.isolation)."""
    validated: bool = False
    """Decided.validated: `scanned` goes into the read set whatever the isolation level."""
    check_version: bool = False
    """The table was looked up from the cache: the version of its schema the rows were written under is checked to
    be the one the transaction sees (SchemaMismatchError, nothing registered, when it changed)."""
    evolve: Evolve | None = None
    """A version of the table's schema staged first, in the same catalog transaction: the rows are registered
    under it (merge_schema)."""


def register_written(rt: Runtime, stmt: Statement, info: TableInfo,
                     written: Sequence[tuple[Partition, WrittenPart]], removals: Sequence[int],
                     scanned: Sequence[str] | None = None, validated: bool = False) -> None:
    """Step 4 for one table, also used by writers that produce the files themselves (Spark)."""
    register_all(rt, stmt, [TableWrite(info, written, removals, scanned, validated)])


def lock_statement(conn: Connection, rt: Runtime, stmt: Statement) -> None:
    """How every statement's catalog transaction begins (step 4; a table change's too): the transaction row locked
    and checked usable; under a key, older attempts fenced off (StaleAttemptError), what the key's earlier attempts
    staged withdrawn with the work of keys built on it, and the key marked as run again (retries.py, invariant 7)."""
    txn_records.lock_usable(conn, rt.catalog, stmt.tid)
    if stmt.key is not None:
        retries.fence(conn, stmt.tid, stmt.key, stmt.attempt)
        retries.withdraw(conn, stmt.tid, stmt.key, stmt.attempt)
        retries.ran_again(conn, stmt.tid, stmt.key)


def register_all(rt: Runtime, stmt: Statement, writes: Sequence[TableWrite]) -> None:
    """Step 4 for a statement writing one table or several (append_many), in ONE catalog transaction: the
    key's earlier attempts are withdrawn once, before any of the statement's own parts is registered."""
    def body(conn: Connection) -> None:
        lock_statement(conn, rt, stmt)
        if stmt.key is not None:
            crashpoints.hit(crashpoints.STAGE_RETRY_MID_REGISTER)
        under: dict[int, int] = {}  # {table id: the version of its schema the rows are registered under}
        for write in writes:
            if write.check_version:
                versions.check_current(conn, write.info, stmt.tid, stmt.snapshot)
            under[write.info.id] = write.info.version
            if write.evolve is not None:  # the changes first, the rows under them: one statement (merge_schema)
                under[write.info.id] = table_versions.stage(conn, stmt.tid, stmt.key, stmt.attempt, write.evolve.before,
                                                            write.evolve.schema, write.evolve.detail, compatible=True)
            # a part a background merge swapped out meanwhile: lock the merged part instead (same rows)
            locked = compaction_records.follow_merges(conn, write.removals, rt.catalog)
            part_records.lock_for_removal(conn, stmt.tid, stmt.key, locked, stmt.attempt, write.info.id)
            retries.record(conn, stmt.tid, stmt.key, stmt.attempt, write.info.id, write.scanned)
            if write.scanned is not None and stmt.isolation is not None:  # what it chose from is a read
                read = [] if WHOLE_TABLE in write.scanned else list(write.scanned)
                recorded = stmt.isolation.read_set(read or None)
                if write.validated and not recorded:  # validated at commit whatever the level
                    recorded = list(dict.fromkeys(write.scanned))
                if recorded:
                    read_sets.add_reads(conn, stmt.tid, write.info.id, recorded)
        part_records.register(conn, stmt.tid, stmt.key, [(w.info.id, w.written) for w in writes], stmt.attempt,
                              under)

    names = ", ".join(dict.fromkeys(write.info.name.qualified for write in writes))
    rt.catalog.write_retrying(body, f"registering a write to {names}")


@dataclass(frozen=True, slots=True)
class _Planned:
    """A statement's new rows for one table, split by partition (steps 1-2 done, nothing written yet)."""

    info: TableInfo
    pieces: Sequence[tuple[Partition, pa.Table]]
    removals: Sequence[int] = ()
    scanned: Sequence[str] | None = None
    validated: bool = False
    check_version: bool = False
    evolve: Evolve | None = None


def _stage(rt: Runtime, stmt: Statement, info: TableInfo, pieces: Sequence[tuple[Partition, pa.Table]],
           decided: Decided | None = None, evolve: Evolve | None = None) -> int:
    decided = decided or Decided(APPEND)
    return _stage_all(rt, stmt, [_Planned(info, pieces, decided.removals, decided.scanned, decided.validated,
                                          evolve=evolve)])[0]


def _stage_all(rt: Runtime, stmt: Statement, plans: Sequence[_Planned]) -> list[int]:
    """Steps 3-4 for every table of a statement: all part files written side by side (on an object store,
    the PUTs overlap), then registered in one catalog transaction. Returns the rows staged per plan."""
    for plan in plans:  # every path checked before the first file is written
        rt.storage.check_part_paths(plan.info.directory, [partition for partition, _ in plan.pieces])
    jobs = [(plan.info.directory, partition, rows,
             {"tid": stmt.tid, "table": plan.info.name.qualified, "key": stmt.key, "writer": "statement",
              "partition": partition})
            for plan in plans for partition, rows in plan.pieces]
    files = rt.storage.write_parts(jobs)
    try:
        crashpoints.hit(crashpoints.STAGE_AFTER_FILES)
        if stmt.key is not None:
            crashpoints.hit(crashpoints.STAGE_RETRY_AFTER_FILES)
        done = iter(files)
        writes = [TableWrite(plan.info, [(partition, next(done)) for partition, _ in plan.pieces],
                             plan.removals, plan.scanned, plan.validated, plan.check_version, plan.evolve)
                  for plan in plans]
        register_all(rt, stmt, writes)
    except BaseException:
        for (directory, *_), part in zip(jobs, files, strict=True):
            rt.storage.delete_part(directory, part.path)
        raise
    return [sum(part.row_count for _, part in write.written) for write in writes]


def _check_predicate(where: object, info: TableInfo) -> pc.Expression:
    import pyarrow.dataset as ds  # (and pandas, which it loads) only where an expression is evaluated

    if not isinstance(where, pc.Expression):
        raise InvalidNameError(f"where must be a pyarrow.compute.Expression, got {type(where).__name__}")
    try:
        mask = ds.dataset(info.schema.empty_table()).to_table(columns={"m": where})["m"]
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
        raise SchemaMismatchError(f"cannot evaluate {where} on {info.name}: {exc}") from exc
    if not pa.types.is_boolean(mask.type):
        raise SchemaMismatchError(f"where {where} on {info.name} is {mask.type}, not boolean")
    return where


def _mask(rows: pa.Table, predicate: pc.Expression) -> pa.ChunkedArray:
    import pyarrow.dataset as ds  # (and pandas, which it loads) only where an expression is evaluated

    evaluated = ds.dataset(rows).to_table(columns={"m": predicate})["m"]
    return pc.fill_null(evaluated, False)


def _check_assignments(assignments: object, info: TableInfo) -> dict[str, pc.Expression]:
    import pyarrow.dataset as ds  # (and pandas, which it loads) only where an expression is evaluated

    if not isinstance(assignments, Mapping) or not assignments:
        raise InvalidNameError("set must be a non-empty dict {column: value or pyarrow.compute.Expression}")
    setters: dict[str, pc.Expression] = {}
    for column, value in assignments.items():
        if column not in info.schema.names:
            raise SchemaMismatchError(f"update sets unknown column {column!r} of {info.name}")
        if value is None and not info.schema.field(column).nullable:
            raise SchemaMismatchError(f"column {column!r} of {info.name} is not nullable: it cannot be set to None")
        arrow_type = info.schema.field(column).type
        try:
            expr = value if isinstance(value, pc.Expression) else pc.scalar(_exact_scalar(value, arrow_type))
            setters[column] = expr.cast(arrow_type)
            ds.dataset(info.schema.empty_table()).to_table(columns={"v": setters[column]})
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OverflowError) as exc:
            raise SchemaMismatchError(f"cannot set {column!r} of {info.name} to {value!r}: {exc}") from exc
    return setters


def _exact_scalar(value: object, arrow_type: pa.DataType) -> pa.Scalar:
    """`value` as a scalar of `arrow_type`, refused (ArrowInvalid, OverflowError) unless the conversion is
    exact: pa.scalar alone truncates 1.7 or Decimal('2.9') into an integer column, a datetime's
    microseconds into timestamp[s]. An append refuses such data too (schema_check: nothing silently)."""
    typed = pa.scalar(value, arrow_type)
    exact_already = isinstance(value, int) and pa.types.is_integer(arrow_type)  # range-checked just now
    if value is not None and not exact_already and not pa.types.is_nested(arrow_type):
        pa.scalar(value).cast(arrow_type, safe=True)  # raises where the value's own type loses data
    return typed


def _assign(rows: pa.Table, mask: pa.ChunkedArray, setters: Mapping[str, pc.Expression],
            info: TableInfo) -> pa.Table:
    """`rows` with the setters' values where `mask` holds. The setters are evaluated on every row of the
    part; an expression the rows break (a float result for an integer column, an overflow, a division by
    zero) is refused like a bad value."""
    import pyarrow.dataset as ds  # (and pandas, which it loads) only where an expression is evaluated

    try:
        computed = ds.dataset(rows).to_table(columns=dict(setters))
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
        names = ", ".join(repr(c) for c in setters)
        raise SchemaMismatchError(
            f"cannot set {names} of {info.name} on the rows of a part it rewrites: {exc}") from exc
    columns = [
        pc.if_else(mask, computed[name], rows[name]) if name in setters else rows[name]
        for name in rows.column_names
    ]
    return pa.Table.from_arrays(columns, names=rows.column_names)
