"""The storage root: parts as Parquet files, reading and deleting them, listing what may be an orphan.

Every file operation goes through the root's `pyarrow.fs` filesystem (storage/location.py): a local
directory, S3 or what else pyarrow reaches. A local root also gets the care only a directory tree needs
(symbolic links that could lead out of it, partition directories to create and to prune when emptied,
cleaners racing writers); an object store has no directories, so none of that applies there.

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
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from airflow_txn.errors import InvalidNameError, StorageError
from airflow_txn.model.names import check_components, check_path_length, safe_join, safe_join_resolved
from airflow_txn.model.partitioning import partition_column, partition_path
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
_LONGEST_PART_NAMES = (f"p-{'9' * 19}-{'9' * 19}-{'f' * 16}-{'0' * 32}.parquet",)
"""The longest names a core write adds below a partition's directory: its file."""
_DEFAULT_PATH_MAX = 4096
_OBJECT_KEY_MAX = 1024
"""The longest object key S3 (and GCS, ADLS) accepts, in bytes."""
_MKDIR_ATTEMPTS = 50
"""How often a writer creates its write dir again when a cleaner removed a partition dir above it meanwhile."""
PartJob = tuple[str, Mapping[str, str | None], pa.Table, Mapping[str, Any]]
"""What write_part takes: (table directory, partition, rows, footer tags)."""
PartWrite = Callable[[pa.NativeFile], int]
"""Writes a part's Parquet bytes into the stream it is given (its footer naming the writer, footer_tags) and
returns the rows written."""
FAULT_QUOTA_ENV = "AIRFLOW_TXN_FAULT_STORAGE_QUOTA"
"""Tests only (tests/faults/test_disk_full.py): a byte quota on the storage root, see _injected_disk_full."""


@dataclass(frozen=True, slots=True)
class StoredEntry:
    """One write dir or plain part file `Storage.stored_parts` found below a table."""

    relative: str
    """Its path relative to the table directory."""
    path: str
    """Its path on the root's filesystem."""
    is_file: bool
    mtime: float | None
    """Last modification (seconds since the epoch), None if unknown (gone meanwhile)."""

    def age_seconds(self) -> float:
        return 0.0 if self.mtime is None else time.time() - self.mtime


@dataclass(frozen=True, slots=True)
class WrittenPart:
    """Files one staging call wrote for one partition, not yet registered in the catalog."""

    path: str  # relative to the table directory: the part file (D8), or the part directory (a write dir's)
    files: tuple[str, ...]
    row_count: int
    size_bytes: int


class Storage:
    """File operations below one storage root; every path is checked (names.check_components, and on a local
    root names.safe_join, which also follows symbolic links)."""

    def __init__(self, location: Location | str | os.PathLike[str]) -> None:
        self.location = location if isinstance(location, Location) else resolve(normalize_root(location), {})
        self.fs = self.location.filesystem
        self.local = self.location.local
        """The root as a local directory; None on an object store (no directories to create or prune)."""
        # table directory (from the catalog) -> (its path, that path resolved): validated and resolved
        # once per table, not on every join below it (realpath is the hot path's largest storage cost)
        self._table_dirs: dict[str, tuple[Path, Path]] = {}
        self._path_max: int | None = None  # PATH_MAX of the root's filesystem, asked once

    @property
    def uri(self) -> str:
        return self.location.uri

    def ensure(self) -> None:
        """Create a local root; check an object store's bucket (or base) exists: airflow_txn creates no bucket."""
        if self.local is not None:
            self.local.mkdir(parents=True, exist_ok=True)
            return
        bucket = self.location.base.split("/", 1)[0]
        try:
            found = self.fs.get_file_info(bucket)
        except OSError as exc:
            raise StorageError(f"storage root {self.location.describe()} is not reachable: {exc}") from exc
        if found.type == pafs.FileType.NotFound:
            raise StorageError(f"storage root {self.uri}: bucket {bucket!r} does not exist (or these credentials "
                               f"cannot see it; {self.location.credentials}): create it first")

    def check_part_paths(self, table_directory: str, partitions: Sequence[Mapping[str, str | None]]) -> None:
        """InvalidNameError if a part of one of `partitions` would get a path longer than PATH_MAX (an object
        key longer than 1,024 bytes) (checked for all of them before the first is written, so a statement is
        refused whole)."""
        if self.local is None:
            for partition in partitions:
                key = "/".join([self.location.base.partition("/")[2], table_directory, *partition_path(partition),
                                *_LONGEST_PART_NAMES])
                if len(key.encode()) > _OBJECT_KEY_MAX:
                    raise InvalidNameError(
                        f"the object key {key[:100]}... ({len(key.encode())} bytes) is longer than the object store "
                        f"allows ({_OBJECT_KEY_MAX} bytes): use fewer or shorter partition values, or a shorter prefix")
            return
        table_dir = self.table_dir(table_directory)
        if self._path_max is None:
            try:
                self._path_max = os.pathconf(self.local, "PC_PATH_MAX")
            except (OSError, ValueError):  # no such limit reported (or no root yet): the Linux value
                self._path_max = _DEFAULT_PATH_MAX
        for partition in partitions:
            check_path_length(table_dir.joinpath(*partition_path(partition), *_LONGEST_PART_NAMES), self._path_max)

    def table_dir(self, directory: str) -> Path:
        """A table's directory on a local root (StorageError on an object store: no local path names it)."""
        return self._table_dir(directory)[0]

    def _local_root(self) -> Path:
        if self.local is None:
            raise StorageError(f"storage root {self.uri} is an object store: no local directory holds its "
                               "tables (an engine reads and writes them through pyarrow.fs)")
        return self.local

    def _table_dir(self, directory: str) -> tuple[Path, Path]:
        known = self._table_dirs.get(directory)
        if known is None:
            path = safe_join(self._local_root(), directory)
            known = self._table_dirs[directory] = (path, path.resolve())
        return known

    def path(self, table_directory: str, relative: str = "") -> str:
        """The filesystem path of `relative` below a table (checked: it cannot leave the table)."""
        if self.local is not None:
            return str(self._under_table(table_directory, relative)[0] if relative else self.table_dir(table_directory))
        check_components(table_directory, *([relative] if relative else []))
        return self.location.path(f"{table_directory}/{relative}" if relative else table_directory)

    def _under_table(self, table_directory: str, *components: str) -> tuple[Path, Path]:
        """safe_join below a table's directory: (path, path resolved)."""
        return safe_join_resolved(*self._table_dir(table_directory), *components)

    def new_write_dir(self, table_directory: str, partition: Mapping[str, str | None], sidecar: dict[str, Any],
                      prefix: str = "p") -> str:
        """Create an empty write dir holding only its sidecar; return its path relative to the table (for
        an engine writing several files: Spark; the core writes plain part files, write_part). Local roots
        only (StorageError on an object store)."""
        local_root = self._local_root()
        relative = "/".join([*partition_path(partition), f"{prefix}-{uuid.uuid4().hex}"])
        target = self._under_table(table_directory, relative)[0]
        payload = {**sidecar, "created_at": time.time()}
        try:
            _make_write_dir(target)
            _create_file(target / SIDECAR, json.dumps(payload, sort_keys=True).encode())
            _injected_disk_full(local_root)
        except OSError as exc:
            self.delete_write_dir(table_directory, relative)
            raise _write_error(f"could not create a write dir of {table_directory} under {target}", exc) from exc
        return relative

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
                                            parallel=self.local is None)
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
            if self.local is None:
                with self.fs.open_output_stream(target) as sink:
                    rows = write(sink)
                    size = sink.tell()
            else:
                rows, size = self._write_local(Path(target), write)
        except BaseException as exc:
            self.delete_part(table_directory, relative)
            if isinstance(exc, OSError):
                raise _write_error(f"could not write a part of {table_directory} under {target}", exc) from exc
            raise
        return WrittenPart(relative, (name,), rows, size)

    def _write_local(self, target: Path, write: PartWrite) -> tuple[int, int]:
        for attempt in range(1, _MKDIR_ATTEMPTS + 1):
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                with self.fs.open_output_stream(str(target)) as sink:
                    rows = write(sink)
                break
            except FileNotFoundError:  # a cleaner removed the empty partition dir just made: again
                if attempt == _MKDIR_ATTEMPTS or target.exists():
                    raise
        size = target.stat().st_size
        _injected_disk_full(self._local_root())
        return rows, size

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
            local = self.local is not None
            uri = os.path.realpath(info.path) if local else self.location.uri_of(self._relative(info.path))
            found.append((uri, int(info.size or 0)))
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

    def _open_for_reading(self, path: str) -> pa.NativeFile:
        """A part file to read whole: on an object store its bytes in one GET (after the HEAD pyarrow makes
        for the size), where reading by path costs three HEADs and two GETs (measured through a counting
        proxy); on a local disk the file itself."""
        if self.local is not None:
            return self.fs.open_input_file(path)
        with self.fs.open_input_stream(path) as stream:
            return pa.BufferReader(stream.read())

    def delete_part(self, table_directory: str, path: str) -> int:
        """Delete a part (its file, or its directory and its write dir once no part is left in it) and
        emptied partition dirs; return the bytes freed. Missing files are fine (a crashed vacuum may have
        begun), and so is a concurrent writer or cleaner (a partition dir a writer entered meanwhile is kept)."""
        if self.local is None:
            return self._delete_object_part(table_directory, path)
        table_dir = self.table_dir(table_directory)
        if is_plain_part(path):
            target = safe_join(table_dir, path)
            freed = tree_size(target)
            target.unlink(missing_ok=True)
            _remove_empty_dirs(target.parent, table_dir)
            return freed
        part_dir = safe_join(table_dir, path)
        write_dir = safe_join(table_dir, write_dir_of(path))
        freed = tree_size(part_dir)
        shutil.rmtree(part_dir, ignore_errors=True)
        if write_dir != part_dir and not _has_subdirs(write_dir):
            shutil.rmtree(write_dir, ignore_errors=True)
        _remove_empty_dirs(write_dir.parent, table_dir)
        return freed

    def _delete_object_part(self, table_directory: str, path: str) -> int:
        """delete_part on an object store: the part's objects (a plain file, or everything below a write
        dir's prefix); nothing else to prune, as no directory exists there."""
        target = self.path(table_directory, path if is_plain_part(path) else write_dir_of(path))
        try:
            if is_plain_part(path):
                info = self.fs.get_file_info(target)
                if info.type == pafs.FileType.NotFound:
                    return 0
                self.fs.delete_file(target)
                return int(info.size or 0)
            found = self.fs.get_file_info(pafs.FileSelector(target, recursive=True, allow_not_found=True))
            freed = sum(int(i.size or 0) for i in found if i.type == pafs.FileType.File)
            self.fs.delete_dir_contents(target, missing_dir_ok=True)
            return freed
        except FileNotFoundError:
            return 0
        except OSError as exc:
            raise StorageError(f"could not delete {target}: {exc}") from exc

    def delete_write_dir(self, table_directory: str, relative: str) -> int:
        """Delete an unregistered write dir or part file (an orphan) and emptied partition dirs; return bytes freed."""
        return self.delete_part(table_directory, relative)

    def size_of(self, table_directory: str, relative: str) -> int:
        """Bytes of a part file, or of the files below a write dir (0 if gone)."""
        if self.local is not None:
            return tree_size(safe_join(self.table_dir(table_directory), relative))
        target = self.path(table_directory, relative)
        info = self.fs.get_file_info(target)
        if info.type == pafs.FileType.File:
            return int(info.size or 0)
        found = self.fs.get_file_info(pafs.FileSelector(target, recursive=True, allow_not_found=True))
        return sum(int(i.size or 0) for i in found if i.type == pafs.FileType.File)

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

    def stored_parts(self, table_directory: str) -> Iterator[StoredEntry]:
        """What writers left under a table, registered or not: every write dir and every plain part file
        outside them. Vacuum and recovery only: it lists (one LIST of the table's prefix on an object store)."""
        if self.local is None:
            yield from self._stored_objects(table_directory)
            return
        table_dir = self.table_dir(table_directory)
        if not table_dir.is_dir():
            return
        for current, dirs, files in os.walk(table_dir):
            keep = []
            for name in dirs:
                full = Path(current) / name
                if WRITE_DIR_RE.fullmatch(name):
                    yield StoredEntry(full.relative_to(table_dir).as_posix(), str(full), False, _mtime(full))
                else:
                    keep.append(name)
            dirs[:] = keep
            for name in files:
                if PART_FILE_RE.fullmatch(name):
                    full = Path(current) / name
                    yield StoredEntry(full.relative_to(table_dir).as_posix(), str(full), True, _mtime(full))

    def _stored_objects(self, table_directory: str) -> Iterator[StoredEntry]:
        prefix = self.path(table_directory)
        listed = self.fs.get_file_info(pafs.FileSelector(prefix, recursive=True, allow_not_found=True))
        write_dirs: dict[str, float | None] = {}
        for info in listed:
            relative = info.path[len(prefix) + 1:]
            pieces = relative.split("/")
            inside = next((i for i, piece in enumerate(pieces) if WRITE_DIR_RE.fullmatch(piece)), None)
            mtime = None if info.mtime is None else info.mtime.timestamp()
            if inside is not None:
                unit = "/".join(pieces[:inside + 1])
                newest = write_dirs.get(unit)
                write_dirs[unit] = mtime if newest is None or (mtime is not None and mtime > newest) else newest
            elif info.type == pafs.FileType.File and PART_FILE_RE.fullmatch(pieces[-1]):
                yield StoredEntry(relative, info.path, True, mtime)
        for unit, mtime in write_dirs.items():
            yield StoredEntry(unit, f"{prefix}/{unit}", False, mtime)

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

    def write_root_file(self, relative: str, content: bytes) -> str:
        """Write a file below the root whole: on a local root a temporary file fsynced then renamed over
        it; on an object store one PUT (atomic there). Returns its URI."""
        target = self.root_path(relative)
        if self.local is not None:
            _replace_file(Path(target), content)
            return os.path.realpath(target)
        with self.fs.open_output_stream(target) as sink:
            sink.write(content)
        return self.location.uri_of(relative)

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

    def delete_root_tree(self, relative: str) -> None:
        """Delete `relative` and everything below it (gone already is fine)."""
        target = self.root_path(relative)
        if self.local is not None:
            shutil.rmtree(target, ignore_errors=True)
            return
        with suppress(FileNotFoundError):  # delete_dir, not _contents: it also takes the prefix's marker object
            self.fs.delete_dir(target)


def _make_write_dir(target: Path) -> None:
    """Create a new write dir and the partition dirs above it. Cleaners (vacuum, a failed write's
    cleanup) remove partition dirs they leave empty, possibly one this call just created and has not
    entered yet: then its own directory cannot be made (ENOENT), and it starts over."""
    for attempt in range(1, _MKDIR_ATTEMPTS + 1):
        try:
            target.mkdir(parents=True, exist_ok=False)
            return
        except FileNotFoundError:
            if attempt == _MKDIR_ATTEMPTS:
                raise


def _has_subdirs(directory: Path) -> bool:
    try:
        return any(p.is_dir() for p in directory.iterdir())
    except OSError:  # gone already: another cleaner
        return False


def _remove_empty_dirs(directory: Path, stop: Path) -> None:
    """Remove `directory` and its parents below `stop` while they are empty. rmdir itself is the test of
    emptiness, so a directory a writer entered meanwhile stays (ENOTEMPTY ends the climb); one another
    cleaner removed first (ENOENT) is passed over; any other refusal leaves an empty dir, harmless."""
    while directory != stop and stop in directory.parents:
        try:
            directory.rmdir()
        except FileNotFoundError:
            pass
        except OSError:
            return
        directory = directory.parent


def _write_error(what: str, exc: OSError) -> StorageError:
    """A failed write as a StorageError; a full volume (ENOSPC, EDQUOT) is named as such."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return StorageError(f"{what}: the storage volume is full (no space left on device); what this write had "
                            "written is removed and nothing was registered: free space, then retry or roll back")
    return StorageError(f"{what}: {exc}")


def _create_file(path: Path, content: bytes) -> None:
    """Create `path` (it must not exist) holding `content`: one open, write and close, no text layer."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        view = memoryview(content)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


def _mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None


def _replace_file(target: Path, content: bytes) -> None:
    """Write `target` whole: a temporary file in its directory, fsynced, then renamed over it."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o644)  # as every other file of the root: readers running as another user read it (mkstemp: 0600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(content)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        with suppress(OSError):
            os.unlink(tmp)
        raise


def _injected_disk_full(root: Path) -> None:
    """Tests only: with FAULT_QUOTA_ENV set, a write that leaves the storage root above that many bytes fails
    with ENOSPC, as on a full disk (where no small filesystem can be mounted). Unset: one dict lookup."""
    quota = os.environ.get(FAULT_QUOTA_ENV)
    if quota is not None and tree_size(root) > int(quota):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


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


def tree_size(path: Path) -> int:
    """Bytes of the file `path` or of the files under it (files that vanish meanwhile count 0)."""
    if path.is_file():
        try:
            return path.stat().st_size
        except OSError:
            return 0
    total = 0
    for current, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += (Path(current) / name).stat().st_size
            except OSError:
                continue
    return total


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
