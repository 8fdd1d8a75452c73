"""The adapter interface: what an engine adapter (the Spark layer, the Airflow layer, and those to come)
may call on the core besides the public handles. docs/ARCHITECTURE.md, "The adapter interface", says
how to use it; tests/core/test_import_graph.py keeps spark/ and airflow/ to it.

    table_view(wh, table)                           TableView: name, Arrow schema, partition columns, location
    stored_table(wh, table)                         StoredTable: the same for an engine writing and reading
                                                    through the root's pyarrow filesystem (any root), picklable
    plan_read(wh, table, csn=, txn=, partitions=, tag=)   ReadPlan: exactly the parts (PartView) a read sees; a
                                                    transaction's read is recorded as its isolation asks
    open_statement(txn, table, key=, what=)         Statement: a write whose files an external engine writes:
        .visible_parts  .check_replaceable          what it sees and replaces,
        .new_write_dir  .discard                    where it writes (WriteDir),
        .register  .record_read_set  .run           registering the files (WrittenPart) in ONE catalog
                                                    transaction, all under the transaction's failure rules
    merge_writer(write)                             the hook Warehouse.compact(writer=...) takes, with
                                                    `write(MergeTask) -> WrittenPart` writing each merge
    the values adapters pass on: transaction states, Isolation, LabelFilter, DEFAULT_TARGET_FILE_BYTES,
    check_lease_seconds, check_csn, check_compaction_options; MergedAwayError (and every error of airflow_txn.errors)

The warehouse's configuration (WarehouseConfig, DEFAULT_LEASE_SECONDS, ...) is core/config.py's, which an
adapter imports directly: it is light, where this module loads the whole core.

Nothing is decided here: each function is a face over the core module that owns the rule (staging.py,
transaction.py's statement rules, reading.py, compaction.py, the storage root), so a Spark statement
follows exactly the rules of the core's own writes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa

from airflow_txn.catalog import part_records, table_registry, txn_records
from airflow_txn.catalog.database import safe_url
from airflow_txn.catalog.part_records import PartRow
from airflow_txn.catalog.table_registry import TableInfo
from airflow_txn.catalog.txn_records import ACTIVE, COMMITTED, ROLLED_BACK, LabelFilter
from airflow_txn.core import bounds, crashpoints, reading, staging, tags, transaction
from airflow_txn.core.compaction import DEFAULT_TARGET_FILE_BYTES, MergeJob, Progress, Writer
from airflow_txn.core.isolation import Isolation
from airflow_txn.core.runtime import Runtime
from airflow_txn.core.transaction import Transaction
from airflow_txn.core.warehouse import Warehouse
from airflow_txn.errors import MergedAwayError, SchemaMismatchError, StorageError, TxnError
from airflow_txn.model.csn import PREHISTORIC_CSN
from airflow_txn.model.names import TableName
from airflow_txn.model.partitioning import (
    Partition,
    check_partition_values,
    parse_partition_key,
    partition_key,
    split_by_partition,
)
from airflow_txn.model.parts import WrittenPart
from airflow_txn.model.schema_check import conform
from airflow_txn.storage import location
from airflow_txn.storage.location import parse_storage_options
from airflow_txn.storage.root import Storage, is_plain_part, new_statement_id

__all__ = [
    "ACTIVE",
    "COMMITTED",
    "DEFAULT_TARGET_FILE_BYTES",
    "ROLLED_BACK",
    "Isolation",
    "LabelFilter",
    "MergeTask",
    "MergeWrite",
    "MergedAwayError",
    "PartView",
    "Progress",
    "ReadPlan",
    "Statement",
    "StoredTable",
    "TableView",
    "WriteDir",
    "Writer",
    "WrittenPart",
    "check_compaction_options",
    "check_csn",
    "check_lease_seconds",
    "masked_url",
    "merge_writer",
    "new_statement_id",
    "open_root",
    "open_statement",
    "parse_storage_options",
    "plan_read",
    "s3_filesystem",
    "stored_table",
    "table_view",
]

T = TypeVar("T")


# -- values -------------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class TableView:
    """One table as an adapter sees it (a table never changes once created)."""

    name: TableName
    schema: pa.Schema
    """Every column, the partition columns included (part files never store those: PartView.partition)."""
    partition_by: tuple[str, ...]
    location: Path
    """The table's directory, absolute and resolved: PartView.path and WrittenPart.path are relative to it."""
    _info: TableInfo = field(repr=False, compare=False)

    def partition_keys(self, partitions: Sequence[Mapping[str, Any]] | None) -> list[str] | None:
        """The keys of the listed partitions ({column: value} each), checked against the table (None: no
        list, the whole table): what visible_parts, plan_read and record_read_set take."""
        return self._info.partition_keys(partitions)


@dataclass(frozen=True, slots=True)
class PartView:
    """One part: immutable Parquet files holding rows of one partition (docs/CONCEPTS.md): one plain file
    (written by the core), or a directory of files (written by an engine)."""

    id: int
    partition_key: str
    path: str
    """The directory the part's files lie in, relative to TableView.location (for a plain part file: its
    partition's directory, which other parts share)."""
    files: tuple[str, ...]
    """The Parquet files in `path`: the table's columns minus the partition columns."""
    row_count: int
    size_bytes: int
    locked_by: str | None
    """The transaction holding the part's removal lock (replacing it, or having removed it); None: none."""

    @property
    def partition(self) -> Partition:
        """{partition column: its value as canonical text, or None}; {} for an unpartitioned table."""
        return parse_partition_key(self.partition_key)


@dataclass(frozen=True, slots=True)
class StoredTable:
    """A table as an engine sees it that writes and reads its files through the root's own filesystem
    (`pyarrow.fs`: local disk or object store; the Spark data source): no path an engine opens itself. It
    pickles (a Spark driver hands it to its executors), and each process opens the root once (open_root)."""

    name: str
    """The qualified name, `namespace.table`."""
    schema: pa.Schema
    partition_by: tuple[str, ...]
    directory: str
    """The table's directory below the root (as the catalog keeps it)."""
    root: str
    """The storage root's URI (WarehouseConfig.root)."""
    storage_options: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)
    """The root's settings as the warehouse was opened with (may hold secrets: never shown)."""

    def conformed(self, data: pa.Table) -> pa.Table:
        """`data` (an engine's batch, whose Arrow types may differ in storage only: large_string for string,
        a timestamp's zone) as exactly the table's schema, checked as a core append checks it
        (SchemaMismatchError: a null in a non-nullable column, a partition value with no canonical text)."""
        if data.schema.names != self.schema.names and sorted(data.schema.names) == sorted(self.schema.names):
            data = data.select(self.schema.names)  # the table's column order
        if data.schema != self.schema and data.schema.names == self.schema.names:
            try:
                data = data.cast(pa.schema([f.with_nullable(True) for f in self.schema]), safe=True)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
                raise SchemaMismatchError(f"rows for {self.name} do not fit its schema: {exc}") from exc
        rows = conform(data, self.schema, self.name)
        check_partition_values(rows, self.partition_by, self.name)
        return rows

    def write_parts(self, rows: pa.Table, tags: Mapping[str, Any]) -> list[tuple[str, WrittenPart]]:
        """Write conformed `rows` as one plain part file per partition (D8), `tags` (tid, key, writer, and the
        statement id from new_statement_id, which starts each file's name) and the table in each footer:
        [(partition key, written part)]. On failure none of them is left."""
        root = open_root(self.root, self.storage_options)
        pieces = [(p, t) for p, t in split_by_partition(rows, self.partition_by) if t.num_rows]
        root.check_part_paths(self.directory, [p for p, _ in pieces])
        written = root.write_parts([(self.directory, p, t, {**tags, "table": self.name, "partition": p})
                                    for p, t in pieces])
        return [(partition_key(p), part) for (p, _), part in zip(pieces, written, strict=True)]

    def read_part(self, part: PartView) -> pa.Table:
        """A part's rows as exactly the table's schema, partition columns restored."""
        path, files = part.path, part.files
        if len(files) == 1 and is_plain_part(files[0]):
            path = f"{path}/{files[0]}" if path else files[0]
        return open_root(self.root, self.storage_options).read_part(self.directory, path, files, self.schema,
                                                                      part.partition)

    def delete_parts(self, paths: Sequence[str]) -> None:
        """Delete parts written for a statement that will not register them (a failed or aborted write)."""
        root = open_root(self.root, self.storage_options)
        for path in paths:
            root.delete_part(self.directory, path)

    def statement_parts(self, tid: str, statement: str) -> list[WrittenPart]:
        """The part files statement `statement` (write_parts' tags) of `tid` wrote, found by listing the table,
        each with its rows from its footer: what an engine whose tasks ran elsewhere wrote for a merge."""
        root = open_root(self.root, self.storage_options)
        found = root.statement_files(self.directory, tid, statement)
        return [root.written_part(self.directory, path) for path in found]

    def delete_statement_files(self, tid: str, statement: str) -> int:
        """Delete every part file of statement `statement` (write_parts' tags) of `tid`, found by listing the
        table: after a failed statement whose tasks ran elsewhere (a task may not have reported what it wrote).
        Only for a statement that will never register. Returns the number of files deleted."""
        found = open_root(self.root, self.storage_options).statement_files(self.directory, tid, statement)
        self.delete_parts(found)
        return len(found)


_ROOTS: dict[tuple[str, tuple[tuple[str, str], ...]], Storage] = {}


def open_root(root: str, storage_options: Mapping[str, str]) -> Storage:
    """The storage root `root` with its settings, opened once per process (an executor reads many parts)."""
    key = (root, tuple(sorted(storage_options.items())))
    found = _ROOTS.get(key)
    if found is None:
        found = _ROOTS[key] = Storage(location.resolve(root, storage_options))
    return found


@dataclass(frozen=True, slots=True)
class ReadPlan:
    """What one read sees (plan_read): the table and exactly the parts visible at `snapshot`."""

    stored: StoredTable
    parts: tuple[PartView, ...]
    snapshot: int
    tid: str | None
    """The reading transaction (whose own staged parts are included); None: a committed snapshot."""
    _rt: Runtime = field(repr=False, compare=False)
    _info: TableInfo = field(repr=False, compare=False)

    @property
    def table(self) -> TableView:
        """The table with its local directory, for an engine that opens files by path (StorageError on an
        object-store root: read `stored` through the root's filesystem instead)."""
        return _view(self._rt, self._info)


@dataclass(frozen=True, slots=True)
class WriteDir:
    """A new directory below a table for an engine's files, its sidecar (naming the writing transaction)
    written before any data file (invariant 8): the parts registered from it lie below it."""

    relative: str
    """Relative to TableView.location; each WrittenPart.path of it starts with this."""
    location: Path
    """Absolute: where the engine writes."""


def _view(rt: Runtime, info: TableInfo) -> TableView:
    if rt.storage.local is None:
        raise StorageError(
            f"table {info.name.qualified}: its warehouse root {rt.storage.uri} is an object store, which Spark's "
            "native Parquet path (Hadoop's filesystem, by path) cannot reach here. Write and read it through the "
            "data source: airflow_txn.spark.write/read(..., via=\"datasource\") (what via=\"auto\" picks for an "
            "object-store root), or df.write.format(\"airflow_txn\") / spark.read.format(\"airflow_txn\"); "
            "airflow_txn.spark.delete/update/compact take via= alike.")
    return TableView(info.name, info.schema, info.partition_by, rt.storage.table_dir(info.directory).resolve(), info)


def _stored(wh: Warehouse, info: TableInfo) -> StoredTable:
    return StoredTable(info.name.qualified, info.schema, info.partition_by, info.directory, wh.config.root,
                       dict(wh.config.storage_options))


def _part(row: PartRow) -> PartView:
    directory, files = row.path, row.files
    if is_plain_part(row.path):  # one plain file (D8): an engine reads `path / name` alike for both layouts
        directory, _, name = row.path.rpartition("/")
        files = (name,)
    return PartView(row.id, row.partition_key, directory, files, row.row_count, row.size_bytes,
                    row.version.removal_tid)


# -- reading ------------------------------------------------------------------------------------------------------
def table_view(wh: Warehouse, table: str) -> TableView:
    """The table `table` (TableNotFoundError if there is none)."""
    with wh.runtime.catalog.read() as conn:
        return _view(wh.runtime, table_registry.get(conn, table))


def stored_table(wh: Warehouse, table: str) -> StoredTable:
    """The table `table` for an engine writing through the root's filesystem (TableNotFoundError if none)."""
    with wh.runtime.catalog.read() as conn:
        return _stored(wh, table_registry.get(conn, table))


def check_read(wh: Warehouse, table: str, csn: int | None = None, tag: str | None = None) -> None:
    """The errors plan_read would raise for a read of `table` at `csn` or at tag `tag`, raised now and recording
    nothing (an engine's client checks a read it will plan later, elsewhere: the data source's schema(), so that
    the error comes at load() as the error it is, not at the first action): TxnError for both, a CSN not
    readable yet, SnapshotTooOldError, TagNotFoundError, TableNotFoundError, TableNotInTagError."""
    if csn is not None and tag is not None:
        raise TxnError("pass one of csn (a committed snapshot) or tag (a named one), not both")
    rt = wh.runtime
    if tag is not None:
        tags.resolve(rt, tag, table)
    elif csn is not None:
        with rt.catalog.read() as conn:
            info = table_registry.get(conn, table)
        reading.snapshot_for(rt, csn, [info.name.qualified])


def plan_read(wh: Warehouse, table: str, csn: int | None = None, txn: Transaction | None = None,
              partitions: Sequence[Mapping[str, Any]] | None = None, tag: str | None = None) -> ReadPlan:
    """The parts a read of `table` sees at snapshot `csn` (None: the readable watermark), at tag `tag`, or
    those `txn` sees (its snapshot plus its own writes; the read is then recorded as Transaction.read
    records it: in the read set its isolation level keeps, and for retries under a default key).
    `partitions` limits it to those partitions. The engine must read the files while `csn` stays inside
    the retention window (`txn` open, `tag` tagged). TxnError for more than one of csn, txn and tag;
    SnapshotTooOldError below the table's horizon; TagNotFoundError, TableNotInTagError."""
    if sum(x is not None for x in (csn, txn, tag)) > 1:
        raise TxnError("pass one of csn (a committed snapshot), tag (a named one) or txn (a transaction's own "
                       "view), not several")
    rt = wh.runtime
    if tag is not None:
        row, info = tags.resolve(rt, tag, table)
        keys = info.partition_keys(partitions)
        with rt.catalog.read() as conn:
            rows = part_records.visible_parts(conn, info.id, None, row.csn, keys)
        return ReadPlan(_stored(wh, info), tuple(_part(r) for r in rows), row.csn, None, rt, info)
    with rt.catalog.read() as conn:
        if txn is not None:
            txn_records.require_usable(txn_records.fetch(conn, txn.tid))
        info = table_registry.get(conn, table)
    keys = info.partition_keys(partitions)
    if txn is not None:
        transaction.record_read_set(txn, info.id, keys)
        transaction.note_read(txn, info.id, keys)
        tid, snapshot = txn.tid, txn.snapshot_csn
    else:
        tid, snapshot = None, reading.snapshot_for(rt, csn, [info.name.qualified])
    with rt.catalog.read() as conn:
        rows = part_records.visible_parts(conn, info.id, tid, snapshot, keys)
    return ReadPlan(_stored(wh, info), tuple(_part(r) for r in rows), snapshot, tid, rt, info)


# -- writing ------------------------------------------------------------------------------------------------------
def open_statement(txn: Transaction, table: str, key: str | None = None, what: str | None = None) -> Statement:
    """A statement on `table` in `txn` under staging key `key` (None: the handle's default key and attempt,
    as for the core's writes; staging.py says what keys and attempts do). Looks the table up and checks
    the transaction may write, before the engine runs anything expensive. `what` (default "write to
    <table>") names the statement in the reason a failure records."""
    stmt = transaction.statement_of(txn, key)
    described = what or f"write to {table}"
    rt = txn.warehouse.runtime
    info = transaction.run_statement(txn, described, lambda: staging.load_table(rt, stmt, table))
    return Statement(txn, stmt, info, described)


class Statement:
    """One write on one table of a transaction whose files an engine writes (open_statement): the steps
    of a core statement (staging.py) with the engine's files in step 3. Each step that touches the
    catalog runs under the transaction's failure rules (`run`): a conflict or a catalog failure marks
    the transaction failed, an expired lease rolls it back, a rejected input leaves it usable."""

    def __init__(self, txn: Transaction, stmt: staging.Statement, info: TableInfo, what: str) -> None:
        self.txn = txn
        self.what = what
        self.stored = _stored(txn.warehouse, info)
        """The table for an engine writing through the root's filesystem (StoredTable.write_parts)."""
        self._stmt = stmt
        self._info = info
        self._rt = txn.warehouse.runtime

    @property
    def table(self) -> TableView:
        """The table with its local directory, for an engine that writes files by path into a write dir
        (StorageError on an object-store root: write through `stored` instead)."""
        return _view(self._rt, self._info)

    @property
    def key(self) -> str | None:
        return self._stmt.key

    @property
    def attempt(self) -> int | None:
        return self._stmt.attempt

    def partition_keys(self, partitions: Sequence[Mapping[str, Any]] | None) -> list[str] | None:
        """TableView.partition_keys, on any root."""
        return self._info.partition_keys(partitions)

    def run(self, fn: Callable[[], T]) -> T:
        """`fn()` under the transaction's failure rules (an engine step that belongs to the statement)."""
        return transaction.run_statement(self.txn, self.what, fn)

    def visible_parts(self, partition_keys: Sequence[str] | None = None) -> list[PartView]:
        """The parts the statement sees (of the listed partition keys; None: all): the transaction's view,
        without what this key's earlier attempts staged (the statement replaces those)."""
        rows = self.run(lambda: staging.visible(self._rt, self._stmt, self._info, partition_keys))
        return [_part(r) for r in rows]

    def check_replaceable(self, parts: Sequence[PartView]) -> None:
        """SerializationError (a conflict: the transaction fails) when another transaction holds one of
        `parts`: checked before an engine job whose registration would fail on the same lock anyway."""
        self.run(lambda: _check_unlocked(self._stmt.tid, parts))

    def new_write_dir(self, writer: str) -> WriteDir:
        """A new write dir `w-<32 hex>` below the table for the engine's files (it may hold `<col>=<value>`
        sub-directories, one part each); its sidecar names the transaction, the key and `writer`."""
        sidecar: dict[str, Any] = {"tid": self._stmt.tid, "table": self._info.name.qualified, "key": self._stmt.key,
                                   "partition": {}, "writer": writer}
        relative = self._rt.storage.new_write_dir(self._info.directory, {}, sidecar, prefix="w")
        return WriteDir(relative, self.table.location / relative)

    def discard(self, write_dir: WriteDir) -> None:
        """Delete `write_dir` with everything in it (a failed or refused write, or one that wrote no rows)."""
        self._rt.storage.delete_write_dir(self._info.directory, write_dir.relative)

    def register(self, written: Sequence[tuple[Partition, WrittenPart]], removals: Sequence[int],
                 scanned: Sequence[str] | None = None, choose_again: bool = False) -> None:
        """Make `written` (one part per partition, files below a write dir of this statement) the
        statement's parts, replacing the parts `removals` (PartView ids), in ONE catalog transaction
        (staging.register_written: fence stale attempts, withdraw the key's earlier attempts, take the
        removal locks of invariant 6, register). `scanned`: the partition keys the removals were chosen
        from (WHOLE_TABLE: all; None: none, an append). A MergedAwayError (a background merge took some
        of `removals` meanwhile) is a conflict, unless `choose_again`: then the transaction stays usable
        and the caller chooses its parts again. On an error the caller discards its write dir."""
        crashpoints.hit(crashpoints.STAGE_AFTER_FILES)

        def body() -> None:
            staging.register_written(self._rt, self._stmt, self._info, written, removals, scanned)

        if not choose_again:
            self.run(body)
            return
        merged_away = self.run(lambda: _merged_away_of(body))
        if merged_away is not None:
            raise merged_away

    def record_read_set(self, partition_keys: Sequence[str] | None) -> None:
        """What the statement scanned to choose what it replaces (the listed partition keys; None: the
        whole table), recorded as the transaction's isolation level asks (isolation.py)."""
        transaction.record_read_set(self.txn, self._info.id, partition_keys)


def _check_unlocked(tid: str, parts: Sequence[PartView]) -> None:
    for part in parts:
        if part.locked_by is not None and part.locked_by != tid:
            raise part_records.conflict_error(part.id, part.locked_by, tid)


def _merged_away_of(fn: Callable[[], None]) -> MergedAwayError | None:
    """Run `fn`, returning a MergedAwayError instead of raising it (so the failure rules let it pass)."""
    try:
        fn()
    except MergedAwayError as exc:
        return exc
    return None


# -- compaction ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class MergeTask:
    """One merge Warehouse.compact hands a merge writer (merge_writer): write exactly the rows of
    `sources` into one new part, in a write dir of the merge (new_write_dir)."""

    tid: str
    """The merge's own transaction."""
    name: str
    """The table's qualified name (stored_table(wh, name): the table for an engine writing through the root's
    filesystem, on any root)."""
    partition_key: str
    sources: tuple[PartView, ...]
    _job: MergeJob = field(repr=False, compare=False)
    _rt: Runtime = field(repr=False, compare=False)

    @property
    def table(self) -> TableView:
        """The table with its local directory, for an engine writing by path into new_write_dir
        (StorageError on an object-store root: write through `stored` instead)."""
        return _view(self._rt, self._job.group.table)

    @property
    def partition(self) -> Partition:
        return parse_partition_key(self.partition_key)

    @property
    def snapshot(self) -> int:
        """The merge's snapshot: every source is visible at it (a committed read of the sources)."""
        return self._job.snapshot

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
        return WriteDir(relative, self.table.location / relative)

    def discard(self, write_dir: WriteDir) -> None:
        """Delete `write_dir` with its files (the write failed; the core then rolls the merge back)."""
        self._rt.storage.delete_write_dir(self._job.group.table.directory, write_dir.relative)


MergeWrite = Callable[[MergeTask], WrittenPart]
"""An engine's merge: write the task's rows, return the merged part (discarding its write dir on failure)."""


def merge_writer(write: MergeWrite) -> Writer:
    """The step-2 hook of Warehouse.compact(writer=...) with `write` writing each merge. The core plans
    the merges, begins each as a transaction of its own (its lease kept alive meanwhile) and swaps the
    sources for the written part, refusing a part whose row count differs (docs/COMPACTION.md)."""

    def writer(rt: Runtime, job: MergeJob) -> WrittenPart:
        group = job.group
        task = MergeTask(job.tid, group.table.name.qualified, group.partition_key,
                         tuple(_part(s) for s in group.sources), job, rt)
        return write(task)

    return writer


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
