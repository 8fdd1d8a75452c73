"""The storage root: parts as Parquet files, reading and deleting them, listing what may be an orphan.

Every file operation goes through the root's `pyarrow.fs` filesystem (storage/location.py): a local
directory, S3 or what else pyarrow reaches. What differs between the two kinds of root is split by class,
chosen once, when the root is opened: `roots.open_storage(location)` gives a

    LocalRoot        (storage/local_root.py) for a local directory: the care only a directory tree needs
                     (symbolic links that could lead out of it, partition directories to create and to prune
                     when emptied, cleaners racing writers, a file's size from a stat after its writing);
    ObjectStoreRoot  (storage/object_root.py) for S3 and what else pyarrow reaches: no directories, one PUT per
                     part written side by side, one GET per part read, object keys of at most 1,024 bytes.

This module is what both share: the layout, the names, the part files' footers and sidecars, reading,
listing a statement's files, the root's own files (manifests).

Layout under the root (docs/DESIGN.md, decision D8):
- a part the core writes (a statement, a merge) is ONE plain file, `<namespace>/<table>/[<col>=<value>/...]
  p-<tid>-<32 hex>.parquet`: no directory of its own, no sidecar, no rename. Its Parquet footer's key-value
  metadata names the transaction that wrote it, the table and the key (`airflow_txn.tid`, ...: FOOTER_PREFIX);
  its name names the transaction too, before the footer is written (PART_FILE_RE).
  The catalog row of such a part holds the file's path and its name as its only file.
- a Spark write (and a warehouse written before D8, whose core parts were `p-<32 hex>` directories) uses a
  write dir, `w-<32 hex>` (or `p-<32 hex>`), holding `_airflow_txn.json` (written before any data file,
  naming the transaction) and the Parquet files, under `<col>=<value>` sub-directories for Spark; the
  catalog row holds the part's directory and its file names. Both layouts are read and deleted here.
Part files never store the partition columns (the Hive/Spark layout): the catalog holds each part's
partition values and readers add them back. Storage alone can be reconciled with the catalog (footers,
sidecars). Nothing here decides visibility: that is the catalog's job.
"""

from __future__ import annotations

import errno
import json
import os
import re
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from airflow_txn.errors import StorageError
from airflow_txn.model.names import check_components
from airflow_txn.model.partitioning import partition_column, partition_path
from airflow_txn.model.parts import StoredEntry as StoredEntry
from airflow_txn.model.parts import WrittenPart as WrittenPart
from airflow_txn.storage import side_by_side
from airflow_txn.storage.location import Location, normalize_root, resolve

SIDECAR = "_airflow_txn.json"
WRITE_DIR_RE = re.compile(r"[pw]-[0-9a-f]{32}")
STATEMENT_RE = re.compile(r"[0-9a-f]{0,16}")
"""A statement id as a part file's name may begin its hex digits with (new_statement_id); "" for none."""
PART_FILE_RE = re.compile(r"p-(?P<tid>\d{1,19}-\d{1,19}-[0-9a-f]{16})-[0-9a-f]{32}\.parquet")
"""The name of a part the core writes as one plain file (D8): `p-<writer's tid>-<32 hex>.parquet`. The tid
in the name names the writer while its footer cannot be read yet (a file being written), so vacuum never
takes a live writer's unfinished file for an orphan (its lease protects it, as a sidecar did)."""
FOOTER_PREFIX = "airflow_txn."
"""Prefix of the keys a core-written part file carries in its footer's key-value metadata."""
LONGEST_PART_NAMES = (f"p-{'9' * 19}-{'9' * 19}-{'f' * 16}-{'0' * 32}.parquet",)
"""The longest names a core write adds below a partition's directory: its file."""
PartJob = tuple[str, Mapping[str, str | None], pa.Table, Mapping[str, Any]]
"""What write_part takes: (table directory, partition, rows, footer tags)."""
PartWrite = Callable[[pa.NativeFile], int]
"""Writes a part's Parquet bytes into the stream it is given (its footer naming the writer, footer_tags) and
returns the rows written."""


class Storage:
    """File operations below one storage root; every path is checked (names.check_components, and on a local
    root names.safe_join, which also follows symbolic links).

    `roots.open_storage(location)` makes the root's own kind, LocalRoot or ObjectStoreRoot (`location.local`
    chooses); this class holds what they share and names what each does its own way (each of those methods is defined
    by both kinds: tests/storage/test_root_kinds.py)."""

    local: Path | None
    """The root as a local directory; None on an object store (no directories to create or prune)."""
    parallel_writes: ClassVar[bool]
    """Whether write_parts writes a statement's parts side by side (side_by_side.py): where each waits on the
    network, not on the CPU."""

    def __new__(cls, location: Location | str | os.PathLike[str]) -> Storage:
        if cls is Storage:  # what every root shares, never a root by itself
            raise TypeError("Storage is the roots' base: open a root with airflow_txn.storage.roots.open_storage"
                            f"({location!r}), which picks its kind")
        return super().__new__(cls)

    def __init__(self, location: Location | str | os.PathLike[str]) -> None:
        self.location = location if isinstance(location, Location) else resolve(normalize_root(location), {})
        self.fs = self.location.filesystem

    def __getnewargs__(self) -> tuple[Location]:
        return (self.location,)  # a copy (pickle, copy) is made by __new__ too

    @property
    def uri(self) -> str:
        return self.location.uri

    # -- what each kind of root does its own way ------------------------------------------------------------
    def ensure(self) -> None:
        """Create a local root; check an object store's bucket (or base) exists: airflow_txn creates no bucket."""
        raise NotImplementedError

    def check_part_paths(self, table_directory: str, partitions: Sequence[Mapping[str, str | None]]) -> None:
        """InvalidNameError if a part of one of `partitions` would get a path longer than PATH_MAX (an object
        key longer than 1,024 bytes) (checked for all of them before the first is written, so a statement is
        refused whole)."""
        raise NotImplementedError

    def table_dir(self, directory: str) -> Path:
        """A table's directory on a local root (StorageError on an object store: no local path names it)."""
        raise NotImplementedError

    def path(self, table_directory: str, relative: str = "") -> str:
        """The filesystem path of `relative` below a table (checked: it cannot leave the table)."""
        raise NotImplementedError

    def new_write_dir(self, table_directory: str, partition: Mapping[str, str | None], sidecar: dict[str, Any],
                      prefix: str = "p") -> str:
        """Create an empty write dir holding only its sidecar; return its path relative to the table (for
        an engine writing several files: Spark; the core writes plain part files, write_part). Local roots
        only (StorageError on an object store)."""
        raise NotImplementedError

    def _write_new_file(self, target: str, write: PartWrite) -> tuple[int, int]:
        """Write_part_file's writing of its new file at `target`: (rows, bytes written)."""
        raise NotImplementedError

    def _engine_uri(self, path: str) -> str:
        """What another engine opens the file at `path` (on the root's filesystem) with."""
        raise NotImplementedError

    def _open_for_reading(self, path: str) -> pa.NativeFile:
        """A part file to read whole."""
        raise NotImplementedError

    def delete_part(self, table_directory: str, path: str) -> int:
        """Delete a part (its file, or its directory and its write dir once no part is left in it) and
        emptied partition dirs; return the bytes freed. Missing files are fine (a crashed vacuum may have
        begun), and so is a concurrent writer or cleaner (a partition dir a writer entered meanwhile is kept)."""
        raise NotImplementedError

    def size_of(self, table_directory: str, relative: str) -> int:
        """Bytes of a part file, or of the files below a write dir (0 if gone)."""
        raise NotImplementedError

    def stored_parts(self, table_directory: str) -> Iterator[StoredEntry]:
        """What writers left under a table, registered or not: every write dir and every plain part file
        outside them. Vacuum and recovery only: it lists (one LIST of the table's prefix on an object store)."""
        raise NotImplementedError

    def write_root_file(self, relative: str, content: bytes) -> str:
        """Write a file below the root whole: on a local root a temporary file fsynced then renamed over
        it; on an object store one PUT (atomic there). Returns its URI."""
        raise NotImplementedError

    def delete_root_tree(self, relative: str) -> None:
        """Delete `relative` and everything below it (gone already is fine)."""
        raise NotImplementedError

    # -- writing parts --------------------------------------------------------------------------------------
    def write_part(self, table_directory: str, partition: Mapping[str, str | None], data: pa.Table,
                   tags: Mapping[str, Any]) -> WrittenPart:
        """Write one part as one plain Parquet file below the partition's directory, `tags` (tid, table,
        key, ...) in its footer; on failure remove what was written."""
        stored = data.drop_columns([c for c in partition if c in data.column_names])
        stored = stored.replace_schema_metadata({**(stored.schema.metadata or {}), **footer_tags(tags)})

        def write(sink: pa.NativeFile) -> int:
            pq.write_table(stored, sink)
            return int(data.num_rows)

        return self.write_part_file(table_directory, partition, str(tags["tid"]), write,
                                    statement=str(tags.get("statement") or ""))

    def write_parts(self, jobs: Sequence[PartJob]) -> list[WrittenPart]:
        """write_part for each job, side by side on an object store (side_by_side.py), all or nothing: when
        one fails, the others are waited for and their files removed, then the first error is raised."""
        outcomes = side_by_side.run_settled([partial(self.write_part, *job) for job in jobs],
                                            parallel=self.parallel_writes)
        failed = [o for o in outcomes if isinstance(o, BaseException)]
        if failed:
            for (table_directory, *_), outcome in zip(jobs, outcomes, strict=True):
                if isinstance(outcome, WrittenPart):
                    self.delete_part(table_directory, outcome.path)
            raise failed[0]
        return [o for o in outcomes if isinstance(o, WrittenPart)]

    def write_part_file(self, table_directory: str, partition: Mapping[str, str | None], tid: str,
                        write: PartWrite, statement: str = "") -> WrittenPart:
        """A new part file `<partition dirs>/p-<tid>-<32 hex>.parquet` of transaction `tid` (PART_FILE_RE),
        written by `write(stream)`, which returns the rows it wrote and puts the writer's tags in the footer
        (footer_tags). `statement` (new_statement_id) starts the 32 hex digits, so that the files of one
        statement written by many processes (Spark tasks) can be found again by name (statement_files). On an
        object store this is ONE PUT, when the stream is closed; the size is the bytes written. On failure what
        was written is removed (an OSError raised as StorageError). On a local root, the stat after the write
        proves the file outlived its writing (had a cleaner unlinked it meanwhile, say a vacuum that found its
        writer's lease over, the writes went to a deleted inode and the write fails here), so no part is ever
        registered without its file. An object store needs no such check: an object exists only once its PUT
        completed, after any earlier DELETE."""
        if STATEMENT_RE.fullmatch(statement) is None:
            raise ValueError(f"not a statement id: {statement!r}")  # a bug of the caller: see new_statement_id
        name = f"p-{tid}-{statement}{uuid.uuid4().hex[len(statement):]}.parquet"
        if PART_FILE_RE.fullmatch(name) is None:
            raise ValueError(f"not a tid: {tid!r}")  # a bug of the caller: tids come from TidFactory
        relative = "/".join([*partition_path(partition), name])
        target = self.path(table_directory, relative)
        try:
            rows, size = self._write_new_file(target, write)
        except BaseException as exc:
            self.delete_part(table_directory, relative)
            if isinstance(exc, OSError):
                raise write_error(f"could not write a part of {table_directory} under {target}", exc) from exc
            raise
        return WrittenPart(relative, (name,), rows, size)

    # -- reading parts --------------------------------------------------------------------------------------
    def part_paths(self, table_directory: str, path: str, files: Sequence[str]) -> list[str]:
        """A part's files as paths on the root's filesystem."""
        return [self.path(table_directory, relative) for relative in part_file_paths(path, files)]

    def part_uris(self, table_directory: str, path: str, files: Sequence[str]) -> list[tuple[str, int]]:
        """(URI another engine opens, size in bytes) of each file of a part (a local path is resolved);
        StorageError when one is missing."""
        paths = self.part_paths(table_directory, path, files)
        found = []
        for info in self.fs.get_file_info(paths):
            if info.type != pafs.FileType.File:
                raise StorageError(f"part file {self.location.uri_of(self._relative(info.path))} is missing")
            found.append((self._engine_uri(info.path), int(info.size or 0)))
        return found

    def _relative(self, path: str) -> str:
        return path[len(self.location.base) + 1:]

    def missing_files(self, table_directory: str, path: str, files: Sequence[str]) -> list[str]:
        """The files of a part that are not there (on an object store, one HEAD each)."""
        paths = self.part_paths(table_directory, path, files)
        return [info.path for info in self.fs.get_file_info(paths) if info.type != pafs.FileType.File]

    def read_part(self, table_directory: str, path: str, files: Sequence[str], schema: pa.Schema,
                  partition: Mapping[str, str | None]) -> pa.Table:
        """Read a part's files as a table of exactly `schema` (partition columns restored if absent)."""
        pieces = []
        for file_path in self.part_paths(table_directory, path, files):
            try:
                # Spark writes timestamps as INT96 by default; pyarrow would read them as nanoseconds and
                # fail outside 1677-2262. Spark's timestamps are microseconds, so read them as such.
                piece = pq.read_table(self._open_for_reading(file_path), coerce_int96_timestamp_unit="us")
            except (FileNotFoundError, OSError) as exc:
                raise StorageError(f"part file {file_path} is missing or unreadable: {exc}") from exc
            pieces.append(_restore_columns(piece, schema, partition))
        if not pieces:
            return schema.empty_table()
        return pa.concat_tables(pieces)

    def column_ranges(self, table_directory: str, parts: Sequence[tuple[str, Sequence[str]]],
                      columns: Mapping[str, pa.DataType]) -> list[dict[str, tuple[pa.Scalar, pa.Scalar]]]:
        """For each part (path, files), the least and greatest value of each of `columns` ({name: the table's
        type}) over its files, read from their Parquet footers' statistics (one small read per file, never the
        data; the parts side by side on an object store). A column is left out of a part's ranges when one of
        its non-empty row groups has no min/max (statistics not written, only nulls, a value too long to be
        kept, a type whose statistics pyarrow does not give), or when a file does not store it as that type
        (a partition column, a Spark file's INT96 timestamp, a column the file lacks). Nulls are in no range."""
        calls = [partial(self._part_ranges, table_directory, path, files, columns) for path, files in parts]
        outcomes = side_by_side.run_settled(calls, parallel=self.parallel_writes)
        failed = [o for o in outcomes if isinstance(o, BaseException)]
        if failed:
            raise failed[0]
        return [o for o in outcomes if not isinstance(o, BaseException)]

    def _part_ranges(self, table_directory: str, path: str, files: Sequence[str],
                     columns: Mapping[str, pa.DataType]) -> dict[str, tuple[pa.Scalar, pa.Scalar]]:
        bounds: dict[str, list[tuple[Any, Any]]] = {name: [] for name in columns}
        for file_path in self.part_paths(table_directory, path, files):
            try:
                with self.fs.open_input_file(file_path) as source:
                    metadata = pq.read_metadata(source)
            except (OSError, pa.ArrowException) as exc:
                raise StorageError(f"the footer of part file {file_path} is missing or unreadable: {exc}") from exc
            for name in list(bounds):
                found = _file_bounds(metadata, name, columns[name])
                if found is None:
                    del bounds[name]
                else:
                    bounds[name] += found
        ranges: dict[str, tuple[pa.Scalar, pa.Scalar]] = {}
        for name, pairs in bounds.items():
            try:
                low = pc.min(pa.array([low for low, _ in pairs], columns[name]))
                high = pc.max(pa.array([high for _, high in pairs], columns[name]))
            except (pa.ArrowException, TypeError, ValueError, OverflowError):
                continue  # a statistic pyarrow gives in a form its own type does not take back: no range
            if low.is_valid and high.is_valid:
                ranges[name] = (low, high)
        return ranges

    # -- what writers left: deleting, listing, naming their writers -----------------------------------------
    def delete_write_dir(self, table_directory: str, relative: str) -> int:
        """Delete an unregistered write dir or part file (an orphan) and emptied partition dirs; return bytes freed."""
        return self.delete_part(table_directory, relative)

    def statement_files(self, table_directory: str, tid: str, statement: str) -> list[str]:
        """The part files of statement `statement` of `tid` below the table (paths relative to it): one LIST,
        for cleaning up after a statement whose writers ran elsewhere failed (never on the commit path)."""
        if STATEMENT_RE.fullmatch(statement) is None or not statement:
            raise ValueError(f"not a statement id: {statement!r}")
        start = f"p-{tid}-{statement}"
        return [entry.relative for entry in self.stored_parts(table_directory)
                if entry.is_file and entry.relative.rsplit("/", 1)[-1].startswith(start)]

    def written_part(self, table_directory: str, relative: str) -> WrittenPart:
        """A plain part file another process wrote (statement_files), as the WrittenPart its writer would have
        returned: its size, and its rows from its footer (a StorageError when it is gone or unreadable)."""
        path = self.path(table_directory, relative)
        try:
            info = self.fs.get_file_info(path)
            rows = pq.read_metadata(path, filesystem=self.fs).num_rows
        except (OSError, pa.ArrowException) as exc:
            raise StorageError(f"cannot read the footer of part file {self.location.uri_of(self._relative(path))}: "
                               f"{exc}") from exc
        return WrittenPart(relative, (relative.rsplit("/", 1)[-1],), int(rows), int(info.size or 0))

    def writer_tid(self, entry: StoredEntry) -> str | None:
        """The transaction that wrote a `stored_parts` entry, as vacuum and recovery judge it: a part
        file's name says it (PART_FILE_RE; no read, and known before its footer exists), a write dir's
        sidecar does (None: no readable sidecar)."""
        if entry.is_file:
            named = PART_FILE_RE.fullmatch(entry.path.rpartition("/")[2])
            return None if named is None else named.group("tid")
        tid = (self.read_sidecar(entry.path) or {}).get("tid")
        return None if tid is None else str(tid)

    def writer_tags(self, entry: StoredEntry) -> dict[str, Any] | None:
        """What names the writer of a `stored_parts` entry: a part file's footer (else, while it is being
        written or if it is torn, the tid in its name), a write dir's sidecar."""
        if not entry.is_file:
            return self.read_sidecar(entry.path)
        named = PART_FILE_RE.fullmatch(entry.path.rpartition("/")[2])
        return self.read_footer_tags(entry.path) or (None if named is None else {"tid": named.group("tid")})

    def read_footer_tags(self, path: str) -> dict[str, Any] | None:
        """The tags a part file's footer names (footer_tags), or None when its footer cannot be read (a file
        still being written, or torn) or names no transaction."""
        try:
            metadata = pq.read_metadata(path, filesystem=self.fs).metadata or {}
            tags = {key.decode()[len(FOOTER_PREFIX):]: json.loads(value) for key, value in metadata.items()
                    if key.startswith(FOOTER_PREFIX.encode())}
        except (OSError, ValueError, pa.ArrowException):
            return None
        return tags if "tid" in tags else None

    def read_sidecar(self, write_dir: str) -> dict[str, Any] | None:
        try:
            with self.fs.open_input_stream(f"{write_dir}/{SIDECAR}") as stream:
                loaded: dict[str, Any] = json.loads(stream.read())
            return loaded
        except (OSError, ValueError, pa.ArrowException):
            return None

    # -- files of the root itself (manifests) ---------------------------------------------------------
    def root_path(self, relative: str) -> str:
        check_components(relative)
        return self.location.path(relative)

    def read_root_file(self, relative: str) -> bytes | None:
        try:
            with self.fs.open_input_stream(self.root_path(relative)) as stream:
                return bytes(stream.read())
        except (OSError, pa.ArrowException):
            return None

    def root_entries(self, relative: str) -> list[tuple[str, bool, float | None]]:
        """(name, is a file, mtime) of what lies directly below `relative` ([] if nothing does)."""
        try:
            found = self.fs.get_file_info(pafs.FileSelector(self.root_path(relative), allow_not_found=True))
        except OSError:
            return []
        return [(info.base_name, info.type == pafs.FileType.File,
                 None if info.mtime is None else info.mtime.timestamp()) for info in found]


def write_error(what: str, exc: OSError) -> StorageError:
    """A failed write as a StorageError; a full volume (ENOSPC, EDQUOT) is named as such."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return StorageError(f"{what}: the storage volume is full (no space left on device); what this write had "
                            "written is removed and nothing was registered: free space, then retry or roll back")
    return StorageError(f"{what}: {exc}")


def new_statement_id() -> str:
    """A fresh statement id (16 hex digits) for Storage.write_part_file's `statement`."""
    return uuid.uuid4().hex[:16]


def write_dir_of(part_path: str) -> str:
    """The write dir a part path lives in (the part dir itself for the core's layout)."""
    pieces = part_path.split("/")
    for index, piece in enumerate(pieces):
        if WRITE_DIR_RE.fullmatch(piece):
            return "/".join(pieces[: index + 1])
    raise StorageError(f"part path {part_path!r} holds no write directory")


def is_plain_part(path: str) -> bool:
    """Whether a part path (relative to its table) is one plain part file (D8), not a part directory."""
    return PART_FILE_RE.fullmatch(path.rpartition("/")[2]) is not None


def part_file_paths(path: str, files: Sequence[str]) -> list[str]:
    """The files of a part, relative to its table: a plain part is its own file; a part directory
    holds `files`."""
    if is_plain_part(path):
        return [path]
    return [f"{path}/{name}" for name in files]


def stored_unit(path: str) -> str:
    """What a registered part path keeps from being an orphan in `Storage.stored_parts`: the plain file
    itself, or the write dir it lies in."""
    return path if is_plain_part(path) else write_dir_of(path)


def footer_tags(tags: Mapping[str, Any]) -> dict[str, str]:
    """`tags` as the key-value metadata of a part file's footer: `airflow_txn.<name>`, values as JSON."""
    return {f"{FOOTER_PREFIX}{name}": json.dumps(value, sort_keys=True) for name, value in tags.items()}


def _file_bounds(metadata: pq.FileMetaData, name: str, arrow_type: pa.DataType) -> list[tuple[Any, Any]] | None:
    """(min, max) of column `name` in each non-empty row group of a file, from its footer's statistics; None when
    the file does not store the column as `arrow_type` or a row group has no min/max for it."""
    stored = metadata.schema.to_arrow_schema()
    if stored.get_field_index(name) < 0 or stored.field(name).type != arrow_type:
        return None
    index = next((i for i in range(metadata.num_columns) if metadata.schema.column(i).path == name), None)
    if index is None:
        return None
    bounds = []
    for group in range(metadata.num_row_groups):
        row_group = metadata.row_group(group)
        if not row_group.num_rows:
            continue
        statistics = row_group.column(index).statistics
        if statistics is None or not statistics.has_min_max:
            return None
        bounds.append((statistics.min, statistics.max))
    return bounds


def _restore_columns(piece: pa.Table, schema: pa.Schema, partition: Mapping[str, str | None]) -> pa.Table:
    columns = []
    for field in schema:
        if field.name in piece.column_names:
            columns.append(piece[field.name].cast(field.type))
        elif field.name in partition:
            columns.append(partition_column(partition[field.name], field.type, piece.num_rows))
        else:
            raise StorageError(f"a part file lacks column {field.name!r}")
    return pa.Table.from_arrays(columns, schema=schema)
