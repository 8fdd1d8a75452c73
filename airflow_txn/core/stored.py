"""The tables and parts an engine writes and reads through the root's own filesystem (PartView, StoredTable,
open_root): what a Spark executor unpickles and runs (the data source's tasks), so this module loads no catalog
and no SQLAlchemy: each Spark Python worker imports it, and the whole core cost about a second of CPU there. The
catalog's pieces the driver side needs (TableInfo, the schema's encoding) are imported inside the methods that
use them. Engines import these names from airflow_txn.core.adapter, which re-exports them (docs/ARCHITECTURE.md,
"The adapter interface"); tests/spark/test_worker_imports.py keeps a task light.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from airflow_txn.errors import SchemaMismatchError, StorageError
from airflow_txn.model import evolution
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
from airflow_txn.storage.root import Storage, is_plain_part
from airflow_txn.storage.roots import open_storage

if TYPE_CHECKING:
    from airflow_txn.catalog.table_registry import TableInfo
    from airflow_txn.model.names import TableName

__all__ = ["PartView", "StoredTable", "TableView", "local_view", "open_root"]


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
    written_schema: pa.Schema | None = None
    """The schema the part was written under when it is another version of the table's schema than the one read
    (docs/DESIGN.md, D27): StoredTable.read_part reads it as that and projects it by column id; None: the same."""

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
    """The root's settings as the warehouse was opened with (may hold secrets: never shown, never in to_json)."""
    table_id: int = 0
    version: int = 1
    """The version of the table's schema `schema` is (docs/DESIGN.md, D27): what a read reads every part as, what a
    write's files are written and registered under."""

    def view(self) -> TableView:
        """The table with its local directory, for an engine that opens files by path (StorageError on an
        object-store root: read and write through this table's methods instead)."""
        return local_view(open_root(self.root, self.storage_options), self.info())

    def info(self) -> TableInfo:
        """The catalog's value of the table as of this version."""
        from airflow_txn.catalog.table_registry import TableInfo
        from airflow_txn.model.names import parse_table_name

        return TableInfo(self.table_id, parse_table_name(self.name), self.schema, self.partition_by, self.directory,
                         self.version)

    def to_dict(self) -> dict[str, Any]:
        """The table as JSON values, its storage settings left out (they may hold secrets)."""
        from airflow_txn.catalog import table_registry

        return {"name": self.name, "schema": base64.b64encode(table_registry.encode_schema(self.schema)).decode(),
                "partition_by": list(self.partition_by), "directory": self.directory, "root": self.root,
                "table_id": self.table_id, "version": self.version}

    @classmethod
    def from_dict(cls, found: Mapping[str, Any], storage_options: Mapping[str, str]) -> StoredTable:
        """to_dict's table again, with the root's settings `storage_options`."""
        from airflow_txn.catalog import table_registry

        return cls(str(found["name"]), table_registry.decode_schema(base64.b64decode(found["schema"])),
                   tuple(found["partition_by"]), str(found["directory"]), str(found["root"]), dict(storage_options),
                   int(found["table_id"]), int(found.get("version", 1)))

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
                raise SchemaMismatchError(f"rows for {self.name} do not fit its schema: "
                                          f"{_first_unfit(data, self.schema) or exc}") from exc
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

    def write_merge_part(self, partition: Partition, rows: pa.Table, tags: Mapping[str, Any]) -> WrittenPart:
        """Write conformed `rows` of `partition` as ONE plain part file of a merge (MergeTask.tags, with the
        statement id that starts its name): nothing registers it here; the core swaps it in (compaction.py)."""
        return open_root(self.root, self.storage_options).write_part(self.directory, partition, rows,
                                                                     {**tags, "table": self.name})

    def read_part(self, part: PartView) -> pa.Table:
        """A part's rows as exactly the table's schema, partition columns restored (a part written under another
        version of the schema read as written, then projected by column id: evolution.projection)."""
        path, files = part.path, part.files
        if len(files) == 1 and is_plain_part(files[0]):
            path = f"{path}/{files[0]}" if path else files[0]
        written = part.written_schema or self.schema
        rows = open_root(self.root, self.storage_options).read_part(self.directory, path, files, written,
                                                                    part.partition)
        return rows if part.written_schema is None else evolution.projection(written, self.schema)(rows)

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
        found = _ROOTS[key] = open_storage(location.resolve(root, storage_options))
    return found


def _first_unfit(data: pa.Table, schema: pa.Schema) -> str | None:
    """`column 'x' (uint8): <why>` for the first column of `data` that does not cast to `schema` (None: none)."""
    for column in schema:
        try:
            data.column(column.name).cast(column.type, safe=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
            return f"column {column.name!r} ({column.type}): {exc}"
    return None


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
        list, the whole table), checked against the table."""
        return self._info.partition_keys(partitions)


def local_view(storage: Storage, info: TableInfo) -> TableView:
    if storage.local is None:
        raise StorageError(
            f"table {info.name.qualified}: its warehouse root {storage.uri} is an object store, which Spark's "
            "native Parquet path (Hadoop's filesystem, by path) cannot reach here. Write and read it through the "
            "data source: airflow_txn.spark.write/read(..., via=\"datasource\") (what via=\"auto\" picks for an "
            "object-store root), or df.write.format(\"airflow_txn\") / spark.read.format(\"airflow_txn\"); "
            "airflow_txn.spark.delete/update/compact take via= alike.")
    return TableView(info.name, info.schema, info.partition_by, storage.table_dir(info.directory).resolve(), info)
