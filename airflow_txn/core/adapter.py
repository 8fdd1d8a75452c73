"""The adapter interface: what an engine adapter (the Spark layer, the Airflow layer, and those to come)
may call on the core besides the public handles. docs/ARCHITECTURE.md, "The adapter interface" and "The two
plans", says how to use it; tests/architecture/test_import_graph.py keeps spark/ and airflow/ to it, and
tests/architecture/test_engine_plans.py keeps spark/ and checks/ to the two plans (open_write and open_compaction,
plan_read), tests/spark/test_engine_calls.py each Spark path to at most 3 calls into them.

    table_view(wh, table)                           TableView: name, Arrow schema, partition columns, location
    stored_table(wh, table)                         StoredTable: the same for an engine writing and reading
                                                    through the root's pyarrow filesystem (any root), picklable
    plan_read(wh, table, csn=, txn=, tag=, partitions=, parts=)   ReadPlan: exactly the parts (PartView) a read
                                                    sees, planned by the core's one read planner (reading.plan:
                                                    the one-of check, retention, the tag, a transaction's read
                                                    recorded); picklable, and as JSON (to_json) for an engine
                                                    that plans on its client and reads elsewhere
    open_write(txn, table, mode, partitions=, replaces=, key=)   WritePlan: one statement as the core decided it
                                                    (where its files go, the parts it replaces, the partitions it
                                                    may write, the key's fence); picklable and as JSON, so an
                                                    engine's driver and executors carry it
        .new_write_dir  .discard  .file_tags        where the engine writes,
        .merge_scope(on, every_part, partitions)    a MERGE's candidates among .visible and what it scans,
        .replacing(ids, writer=, inserts=)          a rewrite's choice among .visible (with `writer`, and its
                                                    write dir: .write_dir), .read_plan(parts) what it rewrites,
        .check_written  .commit(written)            the stray-partition check, then registering the files
                                                    (WrittenPart) with the read set in ONE catalog transaction,
                                                    all under the transaction's failure rules
    open_compaction(wh, table, partitions=, ...)    CompactionPlan: the merges compaction makes, planned as
        .table  .merges  .run(write)                Warehouse.compact plans them; `run` runs and swaps each
                                                    (compaction.run, the core's own compaction's steps) with
                                                    `write(MergePlan) -> WrittenPart` writing its part:
        MergePlan .sources .replaces .read_plan     what the merge replaces and reads,
            .new_write_dir .discard .statement .tags    where its part goes
    the values adapters pass on: transaction states, Isolation, LabelFilter, DEFAULT_TARGET_FILE_BYTES,
    check_lease_seconds, check_csn, check_compaction_options; MergedAwayError (and every error of airflow_txn.errors)

The warehouse's configuration (WarehouseConfig, DEFAULT_LEASE_SECONDS, ...) is core/config.py's, which an
adapter imports directly: it is light, where this module loads the whole core.

Nothing is decided here: each function is a face over the core module that owns the rule (staging.py,
transaction.py's statement rules, reading.py, compaction.py, the storage root), so a Spark statement
follows exactly the rules of the core's own writes.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa
from sqlalchemy import Connection

from airflow_txn.catalog import table_registry
from airflow_txn.catalog.database import safe_url
from airflow_txn.catalog.part_records import PartRow
from airflow_txn.catalog.table_registry import TableInfo
from airflow_txn.catalog.txn_records import ACTIVE, COMMITTED, ROLLED_BACK, LabelFilter
from airflow_txn.core import bounds, compaction, crashpoints, reading, staging, transaction, versions
from airflow_txn.core.compaction import DEFAULT_TARGET_FILE_BYTES, MergeJob, Progress
from airflow_txn.core.isolation import Isolation
from airflow_txn.core.runtime import Runtime
from airflow_txn.core.stored import PartView, StoredTable, TableView, local_view, open_root
from airflow_txn.core.transaction import Transaction
from airflow_txn.core.warehouse import Warehouse
from airflow_txn.errors import InvalidNameError, MergedAwayError, SchemaMismatchError
from airflow_txn.model import evolution
from airflow_txn.model.csn import PREHISTORIC_CSN
from airflow_txn.model.options import WriteMode, WriteModeName
from airflow_txn.model.partitioning import (
    Partition,
    check_partition_values,
    parse_partition_key,
    partition_key,
)
from airflow_txn.model.parts import WrittenPart
from airflow_txn.model.results import CompactionReport
from airflow_txn.storage import location
from airflow_txn.storage.location import parse_storage_options
from airflow_txn.storage.root import is_plain_part, new_statement_id

__all__ = [
    "ACTIVE",
    "APPEND",
    "COMMITTED",
    "DEFAULT_TARGET_FILE_BYTES",
    "OVERWRITE",
    "REWRITE",
    "ROLLED_BACK",
    "ColumnSource",
    "CompactionPlan",
    "Isolation",
    "LabelFilter",
    "MergePlan",
    "MergeWrite",
    "MergedAwayError",
    "PartView",
    "Progress",
    "ReadPlan",
    "StoredTable",
    "TableView",
    "WriteDir",
    "WritePlan",
    "WrittenPart",
    "check_compaction_options",
    "check_csn",
    "check_lease_seconds",
    "masked_url",
    "new_statement_id",
    "open_compaction",
    "open_root",
    "open_write",
    "parse_storage_options",
    "plan_read",
    "s3_filesystem",
    "stored_table",
    "table_view",
]

T = TypeVar("T")


# -- values -------------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ReadPlan:
    """What one read sees (plan_read): the table and exactly the parts visible at `snapshot`. Picklable; to_json
    carries it to where the engine reads (the data source), its storage settings left out."""

    stored: StoredTable
    parts: tuple[PartView, ...]
    snapshot: int
    tid: str | None
    """The reading transaction (whose own staged parts are included); None: a committed snapshot."""
    tag: str | None = None
    """The tag read at (its files stay while it exists); None: none."""

    @property
    def table(self) -> TableView:
        """The table with its local directory, for an engine that opens files by path (StorageError on an
        object-store root: read `stored` through the root's filesystem instead). SchemaMismatchError when some part
        was written under a version of the table's schema that reading its files by column name would misread (a
        renamed column, a default, a widened type: docs/DESIGN.md, D27): read through `stored` (read_part
        projects by column id)."""
        for part in self.parts:
            if part.written_schema is not None and not evolution.reads_by_name(part.written_schema, self.stored.schema):
                raise SchemaMismatchError(
                    f"table {self.stored.name} has parts written under an older version of its schema that a reader "
                    "of its files by column name would misread (a renamed or widened column, or a default): read it "
                    "through the airflow_txn data source (airflow_txn.spark.read(..., via='datasource'))")
        return self.stored.view()

    def by_version(self) -> list[tuple[pa.Schema | None, tuple[PartView, ...]]]:
        """`parts` grouped by the schema they were written under (PartView.written_schema; None: the read's own
        version, first), for an engine that reads each group's files as written (by that schema's names and
        types) and projects them (projection)."""
        groups: list[tuple[pa.Schema | None, list[PartView]]] = []
        for part in self.parts:
            for written, members in groups:
                if (written is None and part.written_schema is None) or (
                        written is not None and part.written_schema is not None
                        and written.equals(part.written_schema, check_metadata=True)):
                    members.append(part)
                    break
            else:
                groups.append((part.written_schema, [part]))
        groups.sort(key=lambda g: g[0] is not None)
        return [(written, tuple(members)) for written, members in groups]

    def written_table(self, written: pa.Schema | None) -> StoredTable:
        """The table with the columns a group of by_version was written with (its files read as written)."""
        return self.stored if written is None else replace(self.stored, schema=written)

    def projection(self, written: pa.Schema) -> list[ColumnSource]:
        """How rows written as `written` are read as this read's schema (for each of its columns, in order: where
        its values come from): evolution.column_sources, the rule StoredTable.read_part applies."""
        return [ColumnSource(f, src, evolution.default_of(f) if src is None else None)
                for f, src in evolution.column_sources(written, self.stored.schema)]

    def to_json(self) -> str:
        return json.dumps({"table": self.stored.to_dict(), "parts": [_part_dict(p) for p in self.parts],
                           "snapshot": self.snapshot, "tid": self.tid, "tag": self.tag})

    @classmethod
    def from_json(cls, text: str, storage_options: Mapping[str, str]) -> ReadPlan:
        """to_json's plan again, reading through the root with `storage_options`."""
        found = _json_object(text, "read plan")
        return cls(StoredTable.from_dict(found["table"], storage_options),
                   tuple(_part_of(p) for p in found["parts"]), int(found["snapshot"]), found["tid"], found["tag"])


@dataclass(frozen=True, slots=True)
class ColumnSource:
    """One column of a read's schema, as rows written under an older version give it (ReadPlan.projection)."""

    field: pa.Field
    """The column as the read has it (name, type)."""
    source: str | None
    """The written column holding its values (cast to `field.type` when its type differs: a widening); None: a
    column added since, whose value is `default`."""
    default: pa.Scalar | None
    """A column added since: the value rows written before it read as (None: null)."""


def _part_dict(part: PartView) -> dict[str, Any]:
    found: dict[str, Any] = {"id": part.id, "partition_key": part.partition_key, "path": part.path,
                             "files": list(part.files), "row_count": part.row_count, "size_bytes": part.size_bytes,
                             "locked_by": part.locked_by}
    if part.written_schema is not None:
        found["written_schema"] = base64.b64encode(table_registry.encode_schema(part.written_schema)).decode()
    return found


def _part_of(found: Mapping[str, Any]) -> PartView:
    written = found.get("written_schema")
    return PartView(int(found["id"]), str(found["partition_key"]), str(found["path"]), tuple(found["files"]),
                    int(found["row_count"]), int(found["size_bytes"]), found["locked_by"],
                    None if written is None else table_registry.decode_schema(base64.b64decode(written)))


def _json_object(text: str, what: str) -> dict[str, Any]:
    try:
        found = json.loads(text)
    except (TypeError, ValueError) as exc:
        raise InvalidNameError(f"not a {what} (JSON): {exc}") from None
    if not isinstance(found, dict):
        raise InvalidNameError(f"not a {what} (a JSON object), got {text[:80]!r}")
    return found


@dataclass(frozen=True, slots=True)
class WriteDir:
    """A new directory below a table for an engine's files, its sidecar (naming the writing transaction)
    written before any data file (invariant 8): the parts registered from it lie below it."""

    relative: str
    """Relative to TableView.location; each WrittenPart.path of it starts with this."""
    location: Path
    """Absolute: where the engine writes."""


def _view(rt: Runtime, info: TableInfo) -> TableView:
    return local_view(rt.storage, info)


def _stored(wh: Warehouse, info: TableInfo) -> StoredTable:
    return StoredTable(info.name.qualified, info.schema, info.partition_by, info.directory, wh.config.root,
                       dict(wh.config.storage_options), info.id, info.version)


def _part(row: PartRow, info: TableInfo | None = None, schemas: Mapping[int, pa.Schema] | None = None) -> PartView:
    """The part as an engine sees it; with `info` (the version of the table read) and `schemas` (the other versions
    its parts were written under), the schema it was written under when that is another version."""
    directory, files = row.path, row.files
    if is_plain_part(row.path):  # one plain file (D8): an engine reads `path / name` alike for both layouts
        directory, _, name = row.path.rpartition("/")
        files = (name,)
    written = (schemas or {}).get(row.schema_version) if info is not None and row.schema_version != info.version \
        else None
    return PartView(row.id, row.partition_key, directory, files, row.row_count, row.size_bytes,
                    row.version.removal_tid, written)


# -- reading ------------------------------------------------------------------------------------------------------
def table_view(wh: Warehouse, table: str) -> TableView:
    """The table `table` (TableNotFoundError if there is none)."""
    with wh.runtime.catalog.read() as conn:
        return _view(wh.runtime, _named_now(conn, wh, table))


def stored_table(wh: Warehouse, table: str, txn: Transaction | None = None) -> StoredTable:
    """The table `table` for an engine writing through the root's filesystem (TableNotFoundError if none): as of
    its newest committed version, or (`txn`) the version a statement of that transaction handle sees, its own
    changes included (a newer attempt of its key: without the older attempts' changes, which it withdraws). Nothing
    is recorded (a read of `txn`'s view records itself: plan_read)."""
    with wh.runtime.catalog.read() as conn:
        if txn is None:
            return _stored(wh, _named_now(conn, wh, table))
        stmt = transaction.statement_of(txn, None)
        info = table_registry.get(conn, table)
        return _stored(wh, versions.table_for_statement(conn, info, stmt.tid, stmt.snapshot, stmt.key, stmt.attempt))


def _named_now(conn: Connection, wh: Warehouse, table: str) -> TableInfo:
    """The table `table` names at the readable watermark, as a read there resolves it (versions.table_at: a renamed
    table's old name names nothing now, docs/DESIGN.md D27), as of its version there."""
    watermark = wh.runtime.oracle.readable_csn(conn)
    return versions.table_at(conn, table_registry.get(conn, table), None, watermark)


def plan_read(wh: Warehouse, table: str, csn: int | None = None, txn: Transaction | None = None,
              partitions: Sequence[Mapping[str, Any]] | None = None, tag: str | None = None,
              parts: Sequence[int] | None = None) -> ReadPlan:
    """The parts a read of `table` sees at snapshot `csn` (None: the readable watermark), at tag `tag`, or those
    `txn` sees (its snapshot plus its own writes; the read is then recorded as Transaction.read records it: in the
    read set its isolation keeps, and for retries under its default key), planned by the core's read planner
    (reading.plan). `partitions` limits it to those partitions; `parts` to exactly those parts (MergedAwayError
    if one left the view: a background merge combined it with others since it was chosen). The engine must read
    the files while `csn` stays inside the retention window (`txn` open, `tag` tagged). InvalidArgumentError for
    more than one of csn, txn and tag; SnapshotTooOldError below the table's horizon; TagNotFoundError,
    TableNotInTagError; TableNotFoundError; the transaction's errors."""
    rt = wh.runtime
    view = None if txn is None else transaction.statement_of(txn, None)
    planned = reading.plan(rt, table, csn=csn, view=view, tag=tag, partitions=partitions)
    found = tuple(_part(r, planned.info, planned.schemas) for r in planned.parts)
    if parts is not None:  # exactly the parts a statement or a merge chose
        seen = {p.id: p for p in found}
        gone = [i for i in parts if i not in seen]
        if gone:
            raise MergedAwayError(f"part {gone[0]} of {planned.info.name} is not visible in this read (a background "
                                  "merge combined it with others since it was chosen): choose the parts again")
        found = tuple(seen[i] for i in parts)
    return ReadPlan(_stored(wh, planned.info), found, planned.snapshot, planned.tid, tag)


# -- writing ------------------------------------------------------------------------------------------------------
APPEND, OVERWRITE, REWRITE = staging.APPEND, staging.OVERWRITE, staging.REWRITE


def open_write(txn: Transaction, table: str, mode: WriteMode | WriteModeName = APPEND,
               partitions: Sequence[Mapping[str, Any]] | None = None, replaces: Sequence[int] | None = None,
               key: str | None = None, what: str | None = None) -> WritePlan:
    """One statement on `table` in `txn` whose files an engine writes, as the core decides it (staging.decide, the
    rule the core's own statements follow): `mode` APPEND, OVERWRITE (the whole table, or the listed
    `partitions`: then every row must belong to one of them) or REWRITE (copy-on-write: the parts `replaces`,
    or, with None, chosen later among WritePlan.visible with `replacing`). `key` None: the handle's default key
    and attempt, as for the core's writes (staging.py). Checks the table, the transaction and what it
    replaces before the engine runs anything expensive, under the transaction's failure rules: a rejected input
    leaves it usable, a conflict (another transaction holds a part it replaces) marks it failed; a REWRITE whose
    `replaces` a background merge took meanwhile raises MergedAwayError and leaves it usable (choose again).
    `what` (default "<mode> of <table>") names the statement in the reason a failure records. A `mode` that is
    no WriteMode raises InvalidOptionError first."""
    mode = WriteMode.parse(mode, "mode")
    stmt = transaction.statement_of(txn, key)
    described = what or f"{mode} of {table}"
    rt = txn.warehouse.runtime

    def body() -> tuple[TableInfo, staging.Decided]:
        staging.check_mode(mode, partitions, replaces)
        info = staging.load_table(rt, stmt, table)
        return info, staging.decide(rt, stmt, info, mode, partitions, replaces)

    merged_away, found = transaction.run_statement(txn, described, lambda: _merged_away_of(body))
    if merged_away is not None:
        raise merged_away
    assert found is not None
    info, decided = found
    schemas = staging.written_schemas(rt, info, decided.visible)
    return WritePlan(_stored(txn.warehouse, info), stmt.tid, stmt.snapshot, txn.isolation.value, stmt.key,
                     stmt.attempt, mode, described, new_statement_id(), decided.removals, decided.scanned,
                     decided.allowed, tuple(_part(r, info, schemas) for r in decided.visible), _txn=txn)


@dataclass(frozen=True)
class WritePlan:
    """One statement as the core decided it (open_write): the table and where its files go, the parts it replaces,
    the partitions it may write, its transaction, key and attempt (the fence its registration checks).
    Picklable (the transaction handle stays behind) and as JSON (to_json), so an engine's driver and executors
    carry it; `commit` registers what the engine wrote."""

    table: StoredTable
    tid: str
    snapshot: int
    isolation: str
    key: str | None
    attempt: int | None
    mode: WriteMode
    what: str
    """The statement as a failure's recorded reason names it."""
    statement: str
    """The statement id (new_statement_id) that starts the name of every part file it writes (file_tags)."""
    removals: tuple[int, ...]
    """The parts the statement replaces (ids)."""
    scanned: tuple[str, ...] | None
    """The partition keys it chose its removals from (WHOLE_TABLE: all; None: an append)."""
    allowed: tuple[str, ...] | None
    """The partition keys it may write (an overwrite of listed partitions); None: any."""
    visible: tuple[PartView, ...] = ()
    """A REWRITE not chosen yet: the parts the statement sees (choose with `replacing`); never in to_json."""
    write_dir: WriteDir | None = None
    """The write dir `replacing(ids, writer=...)` made for the engine's files by path; never in to_json."""
    validated: bool = False
    """What it scanned is validated at commit whatever the isolation level (a MERGE that inserts, or deletes what
    its source lacks: merge_scope, then replacing(..., inserts=); docs/DESIGN.md D27)."""
    every_part: bool | None = None
    """A MERGE's scope (merge_scope): whether it deletes the rows no source row matches; None: no MERGE."""
    _txn: Transaction | None = field(default=None, repr=False, compare=False)

    def __reduce__(self) -> tuple[Any, ...]:  # the handle (a warehouse and its catalog) stays in this process
        return (_write_plan_of, (self._fields(), self.table))

    def _fields(self) -> dict[str, Any]:
        return {"tid": self.tid, "snapshot": self.snapshot, "isolation": self.isolation, "key": self.key,
                "attempt": self.attempt, "mode": self.mode, "what": self.what, "statement": self.statement,
                "removals": list(self.removals), "scanned": None if self.scanned is None else list(self.scanned),
                "allowed": None if self.allowed is None else list(self.allowed), "validated": self.validated}

    def to_json(self) -> str:
        """The plan as JSON (an engine's option), its storage settings and `visible` left out."""
        return json.dumps({**self._fields(), "table": self.table.to_dict()})

    @classmethod
    def from_json(cls, text: str, storage_options: Mapping[str, str]) -> WritePlan:
        """to_json's plan again, writing through the root with `storage_options`."""
        found = _json_object(text, "write plan")
        return _write_plan_of(found, StoredTable.from_dict(found["table"], storage_options))

    @property
    def view(self) -> TableView:
        """The table with its local directory, for an engine writing by path into a write dir (StorageError on an
        object-store root: write through `table` instead)."""
        return self.table.view()

    def file_tags(self, writer: str) -> dict[str, Any]:
        """What each part file the engine writes records of itself (StoredTable.write_parts' tags)."""
        return {"tid": self.tid, "key": self.key, "writer": writer, "statement": self.statement}

    def merge_scope(self, on: Sequence[str], every_part: bool,
                    source_partitions: Callable[[], pa.Table]) -> WritePlan:
        """A MERGE on keys `on` (deleting the rows no source row matches: `every_part`) as a REWRITE not chosen yet:
        the plan with `visible` narrowed to its candidates and `scanned` to what it scans, by the core's rule
        (staging.merge_scope: the partitions of the source's rows when `on` covers the partition columns, else the
        whole table). `source_partitions()`, called only when the rule needs it, gives the distinct partition values
        of the source's rows (a table of at least the partition columns, cast to the table's types)."""
        if self.mode != REWRITE or self.removals:
            raise InvalidNameError("only a rewrite not chosen yet has a MERGE's scope")
        table = self.table

        def values() -> pa.Table:
            found = source_partitions()
            check_partition_values(found, table.partition_by, table.name)  # what it may insert: before any write
            return found

        scanned = staging.merge_scope(table.partition_by, on, every_part, values)
        return replace(self, visible=tuple(staging.in_scope(self.visible, scanned)), scanned=scanned,
                       every_part=every_part)

    def replacing(self, ids: Sequence[int], writer: str | None = None, inserts: bool = False) -> WritePlan:
        """A REWRITE that replaces the parts `ids`, chosen among `visible`: SerializationError (a conflict: the
        transaction fails) when another transaction holds one; MergedAwayError for one not visible. With `writer`
        and some `ids`, the plan also carries a new write dir (`write_dir`, as new_write_dir(writer) makes it) for
        the rewritten parts an engine writes by path (or the rows a MERGE inserts: `inserts`): the choice and the
        place in one step. A MERGE (merge_scope)
        keeps the scope it scanned, and `inserts` (whether it also appends source rows) decides with its scope
        whether that is validated at commit whatever the isolation level (staging.merge_validated)."""
        if self.mode != REWRITE:
            raise InvalidNameError(f"only a rewrite chooses the parts it replaces, not {self.mode.value!r}")
        holders = {p.id: p.locked_by for p in self.visible}
        decided = self.run(lambda: staging.replace_parts(self.tid, holders, ids))
        chosen = replace(self, removals=decided.removals, scanned=decided.scanned, visible=())
        if self.every_part is not None:
            chosen = replace(chosen, scanned=self.scanned,
                             validated=staging.merge_validated(inserts, self.every_part))
        if writer is None or not (decided.removals or inserts):
            return chosen
        return replace(chosen, write_dir=chosen.new_write_dir(writer))

    def read_plan(self, parts: Sequence[PartView]) -> ReadPlan:
        """Exactly `parts` (some of `visible`) in the statement's view, for an engine reading the rows it rewrites
        through the read plan (the data source). The statement's view, not the transaction's current one: the first
        write of a key's newer attempt sees again what older attempts of the key replaced (their removals are
        withdrawn when it registers). Nothing is recorded: the registration records what the statement scanned; a
        part a merge took meanwhile is refused there (MergedAwayError)."""
        return ReadPlan(self.table, tuple(parts), self.snapshot, self.tid)

    def with_statement(self, statement: str) -> WritePlan:
        """The plan with its files named after statement id `statement` (16 hex digits; new_statement_id) instead."""
        return replace(self, statement=statement)

    def check_written(self, partition_keys: Sequence[str]) -> None:
        """SchemaMismatchError when the engine wrote rows of a partition the statement may not write (an overwrite
        of listed partitions): call it where the files are written, to fail early; commit checks it again."""
        staging.check_stray(self.table.name, self.allowed, partition_keys)

    def new_write_dir(self, writer: str) -> WriteDir:
        """A new write dir `w-<32 hex>` below the table for the engine's files, on a local root (it may hold
        `<col>=<value>` sub-directories, one part each); its sidecar names the transaction, the key and `writer`."""
        view = self.view
        sidecar: dict[str, Any] = {"tid": self.tid, "table": self.table.name, "key": self.key, "partition": {},
                                   "writer": writer}
        relative = open_root(self.table.root, self.table.storage_options).new_write_dir(
            self.table.directory, {}, sidecar, prefix="w")
        return WriteDir(relative, view.location / relative)

    def discard(self, write_dir: WriteDir) -> None:
        """Delete `write_dir` with everything in it (a failed or refused write, or one that wrote no rows)."""
        open_root(self.table.root, self.table.storage_options).delete_write_dir(self.table.directory,
                                                                                 write_dir.relative)

    def commit(self, written: Sequence[tuple[Partition, WrittenPart]], warehouse: Warehouse | None = None) -> int:
        """Make `written` (one part per partition, files of this statement) the statement's parts, replacing
        `removals`, in ONE catalog transaction (staging.register_all: fence stale attempts, withdraw the key's earlier
        attempts, take the removal locks of invariant 6, record what it scanned as the isolation level asks,
        register); returns the rows staged. SchemaMismatchError first for a stray partition (check_written). A
        REWRITE some of whose removals a background merge took meanwhile raises MergedAwayError and leaves the
        transaction usable (choose again); other errors follow the failure rules. `warehouse`: where to commit a
        plan that came from another process (it carries no handle). On an error the caller deletes its files."""
        self.check_written([partition_key(p) for p, _ in written])
        crashpoints.hit(crashpoints.STAGE_AFTER_FILES)
        stmt = staging.Statement(self.tid, self.snapshot, self.key, self.attempt, None, Isolation(self.isolation))
        info = self.table.info()  # the parts are registered under the version the files were written with
        txn = self._handle(warehouse)
        rt = txn.warehouse.runtime

        def body() -> None:
            staging.register_written(rt, stmt, info, written, self.removals, self.scanned, self.validated)

        if self.mode != REWRITE:
            transaction.run_statement(txn, self.what, body)
        else:
            merged_away, _ = transaction.run_statement(txn, self.what, lambda: _merged_away_of(body))
            if merged_away is not None:
                raise merged_away
        return sum(part.row_count for _, part in written)

    @property
    def warehouse(self) -> Warehouse:
        """The warehouse of the plan's transaction handle (InvalidNameError for a plan from another process)."""
        return self._handle(None).warehouse

    def keep_alive(self) -> AbstractContextManager[object]:
        """`with plan.keep_alive(): engine_job()` renews the transaction's lease meanwhile (Transaction.keep_alive;
        a plan from another process has no handle to renew with: nothing)."""
        return nullcontext() if self._txn is None else self._txn.keep_alive()

    def _handle(self, warehouse: Warehouse | None) -> Transaction:
        if self._txn is not None:
            return self._txn
        if warehouse is None:
            raise InvalidNameError(f"the write plan of {self.table.name} came from another process: pass the warehouse "
                                   "to commit it in")
        txn = Transaction(warehouse, self.tid, self.snapshot, Isolation(self.isolation))
        txn.default_key, txn.default_attempt = self.key, self.attempt
        return txn

    def run(self, fn: Callable[[], T]) -> T:
        """`fn()` under the transaction's failure rules (an engine step that belongs to the statement: a conflict
        or a failure marks the transaction failed, a rejected input leaves it usable)."""
        if self._txn is None:
            return fn()
        return transaction.run_statement(self._txn, self.what, fn)


def _write_plan_of(found: Mapping[str, Any], table: StoredTable) -> WritePlan:
    scanned, allowed = found.get("scanned"), found.get("allowed")
    return WritePlan(table, str(found["tid"]), int(found["snapshot"]), str(found["isolation"]), found.get("key"),
                     found.get("attempt"), WriteMode.parse(found["mode"], "the write plan's mode"), str(found["what"]),
                     str(found["statement"]),
                     tuple(int(i) for i in found["removals"]), None if scanned is None else tuple(scanned),
                     None if allowed is None else tuple(allowed), validated=bool(found.get("validated", False)))


def _merged_away_of(fn: Callable[[], T]) -> tuple[MergedAwayError | None, T | None]:
    """Run `fn`, returning a MergedAwayError instead of raising it (so the failure rules let it pass)."""
    try:
        return None, fn()
    except MergedAwayError as exc:
        return exc, None


# -- compaction ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CompactionPlan:
    """A compaction as the core planned it (open_compaction): the table, and the merges `run` makes, each written
    by the engine's `write(MergePlan) -> WrittenPart` and swapped in by the core (compaction.run: each merge a
    transaction of its own, its lease kept alive, the swap at the sources' CSN, a yield to any user transaction
    that took a source, a part with another row count refused: docs/COMPACTION.md)."""

    table: StoredTable
    merges: int
    """How many merges `run` makes (groups of small parts)."""
    _prepared: compaction.Prepared = field(repr=False, compare=False)
    _rt: Runtime = field(repr=False, compare=False)

    def run(self, write: MergeWrite, progress: Progress | None = None) -> CompactionReport:
        """Every merge, `write` writing its part; returns the report Warehouse.compact returns."""
        def writer(rt: Runtime, job: MergeJob) -> WrittenPart:  # a merge's parts are of one version: the group's
            table = replace(self.table, schema=job.group.table.schema, version=job.group.table.version)
            return write(MergePlan(job.tid, table, _part_views(job.group.sources), job, rt))

        return compaction.run(self._rt, self._prepared, writer, progress)


def open_compaction(wh: Warehouse, table: str, partitions: Sequence[Mapping[str, Any]] | None = None,
                    target_file_bytes: int = DEFAULT_TARGET_FILE_BYTES, min_parts: int = 2) -> CompactionPlan:
    """The merges compacting `table` (of the listed partitions; None: all) would make, planned by the core as
    Warehouse.compact plans them (compaction.prepare): InvalidArgumentError for bad options, TableNotFoundError,
    TxnError for a listed partition with no visible parts; nothing changes until `run`."""
    prepared = compaction.prepare(wh.runtime, table, partitions, target_file_bytes, min_parts)
    return CompactionPlan(_stored(wh, prepared.table), len(prepared.groups), prepared, wh.runtime)


@dataclass(frozen=True)
class MergePlan:
    """One merge as the core decided it (CompactionPlan.run hands it to the engine's write): the table, the parts it
    replaces and the rows it must hold; the engine writes exactly the rows of `sources` into one new part of the
    partition (a write dir of the merge, new_write_dir; or ONE plain file through `table`, named by `statement`
    and tagged `tags`) and returns it; the core swaps it in."""

    tid: str
    """The merge's own transaction."""
    table: StoredTable
    """The table as of the version of its schema the sources were written under (a merge never mixes versions):
    the merged part is written and registered under it."""
    sources: tuple[PartView, ...]
    """The parts the merge replaces, in (CSN, id) order."""
    _job: MergeJob = field(repr=False, compare=False)
    _rt: Runtime = field(repr=False, compare=False)
    statement: str = field(default_factory=new_statement_id)
    """The statement id starting the name of a plain part file the merge writes (StoredTable.statement_parts)."""

    @property
    def name(self) -> str:
        """The table's qualified name."""
        return self.table.name

    @property
    def view(self) -> TableView:
        """The table with its local directory, for an engine writing by path into new_write_dir
        (StorageError on an object-store root: write through `table` instead)."""
        return _view(self._rt, self._job.group.table)

    @property
    def partition_key(self) -> str:
        return self._job.group.partition_key

    @property
    def partition(self) -> Partition:
        return parse_partition_key(self.partition_key)

    @property
    def replaces(self) -> tuple[int, ...]:
        """The ids of `sources`."""
        return tuple(p.id for p in self.sources)

    @property
    def snapshot(self) -> int:
        """The merge's snapshot: every source is visible at it (a committed read of the sources)."""
        return self._job.snapshot

    @property
    def read_plan(self) -> ReadPlan:
        """Exactly the sources at the merge's snapshot, for an engine reading them through the read plan."""
        return ReadPlan(self.table, self.sources, self.snapshot, None)

    @property
    def tags(self) -> dict[str, Any]:
        """What the merged part's writer records of itself (its footer or its write dir's sidecar)."""
        return dict(self._job.tags)

    @property
    def rows(self) -> int:
        """The sources' rows: exactly what the merged part must hold."""
        return self._job.group.rows

    @property
    def size_bytes(self) -> int:
        """The sources' bytes."""
        return self._job.group.size_bytes

    def new_write_dir(self, engine: str) -> WriteDir:
        """A new write dir in the merge's partition; its sidecar names the merge, its sources and `engine`.
        The merged part is the WrittenPart of its files (path: WriteDir.relative)."""
        relative = self._rt.storage.new_write_dir(self._job.group.table.directory, self._job.group.partition,
                                                  {**self._job.tags, "engine": engine})
        return WriteDir(relative, self.view.location / relative)

    def discard(self, write_dir: WriteDir) -> None:
        """Delete `write_dir` with its files (the write failed; the core then rolls the merge back)."""
        self._rt.storage.delete_write_dir(self._job.group.table.directory, write_dir.relative)


MergeWrite = Callable[[MergePlan], WrittenPart]
"""An engine's merge: write the plan's rows, return the merged part (discarding its write dir on failure)."""


def _part_views(rows: Sequence[PartRow]) -> tuple[PartView, ...]:
    return tuple(_part(r) for r in rows)


# -- checks of values an adapter passes on ------------------------------------------------------------------------
def check_lease_seconds(value: object) -> float:
    """A lease (a positive, finite number of seconds up to 7 days); InvalidArgumentError otherwise."""
    return bounds.lease_seconds(value)


def check_compaction_options(target_file_bytes: object, min_parts: object) -> None:
    """InvalidArgumentError unless target_file_bytes is 1..1 TiB (bounds.MAX_TARGET_FILE_BYTES) and min_parts
    an integer >= 2: what Warehouse.compact checks, for an engine's compaction to check before it starts."""
    bounds.target_file_bytes(target_file_bytes)
    bounds.min_parts(min_parts)


def check_csn(value: object) -> int:
    """A CSN as the catalog stores it (an integer from PREHISTORIC_CSN up); InvalidArgumentError otherwise."""
    return bounds.catalog_int(value, "csn", PREHISTORIC_CSN)


def masked_url(url: str) -> str:
    """A catalog URL fit for a message or a log: its secrets masked (the catalog's own rule)."""
    return safe_url(url)


def s3_filesystem(options: Mapping[str, str]) -> Any:
    """The pyarrow filesystem of an `s3://` root reached with `options` (the storage layer's resolution)."""
    return location.resolve("s3://bucket", options).filesystem
