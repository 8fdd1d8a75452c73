"""The storage root: part directories of Parquet files, their sidecars, reading them, finding orphans.

Layout under the root:  <namespace>/<table>/[<col>=<value>/...]<write dir>/<files>
A write dir is named `p-<32 hex>` (written by the core) or `w-<32 hex>` (written by Spark, holding
`<col>=<value>` sub-directories, one part each). Part files never store the partition columns (the
Hive/Spark layout): the catalog holds each part's partition values and readers add them back.
Every write dir holds `_airflow_txn.json`, written
before any data file, naming the transaction that wrote it, so storage alone can be reconciled
with the catalog. Nothing here decides visibility: that is the catalog's job.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from airflow_txn.errors import StorageError
from airflow_txn.model.names import check_path_length, safe_join, safe_join_resolved
from airflow_txn.model.partitioning import partition_column, partition_path

SIDECAR = "_airflow_txn.json"
WRITE_DIR_RE = re.compile(r"[pw]-[0-9a-f]{32}")
_LOCAL_FS = pafs.LocalFileSystem()
_LONGEST_PART_NAMES = (f"p-{'0' * 32}", "part-00000.parquet")
"""The longest names a core write adds below a partition's directory: its write dir and its file."""
_DEFAULT_PATH_MAX = 4096
_MKDIR_ATTEMPTS = 50
"""How often a writer creates its write dir again when a cleaner removed a partition dir above it meanwhile."""
FAULT_QUOTA_ENV = "AIRFLOW_TXN_FAULT_STORAGE_QUOTA"
"""Tests only (tests/faults/test_disk_full.py): a byte quota on the storage root, see _injected_disk_full."""


@dataclass(frozen=True, slots=True)
class WrittenPart:
    """Files one staging call wrote for one partition, not yet registered in the catalog."""

    path: str  # part directory relative to the table directory
    files: tuple[str, ...]
    row_count: int
    size_bytes: int


class Storage:
    """File operations below one storage root; every path goes through `safe_join`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        # table directory (from the catalog) -> (its path, that path resolved): validated and resolved
        # once per table, not on every join below it (realpath is the hot path's largest storage cost)
        self._table_dirs: dict[str, tuple[Path, Path]] = {}
        self._path_max: int | None = None  # PATH_MAX of the root's filesystem, asked once

    def ensure(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)

    def check_part_paths(self, table_directory: str, partitions: Sequence[Mapping[str, str | None]]) -> None:
        """InvalidNameError if a part of one of `partitions` would get a path longer than PATH_MAX (checked
        for all of them before the first is written, so a statement is refused whole)."""
        table_dir = self.table_dir(table_directory)
        if self._path_max is None:
            try:
                self._path_max = os.pathconf(self.root, "PC_PATH_MAX")
            except (OSError, ValueError):  # no such limit reported (or no root yet): the Linux value
                self._path_max = _DEFAULT_PATH_MAX
        for partition in partitions:
            check_path_length(table_dir.joinpath(*partition_path(partition), *_LONGEST_PART_NAMES), self._path_max)

    def table_dir(self, directory: str) -> Path:
        return self._table_dir(directory)[0]

    def _table_dir(self, directory: str) -> tuple[Path, Path]:
        known = self._table_dirs.get(directory)
        if known is None:
            path = safe_join(self.root, directory)
            known = self._table_dirs[directory] = (path, path.resolve())
        return known

    def _under_table(self, table_directory: str, *components: str) -> tuple[Path, Path]:
        """safe_join below a table's directory: (path, path resolved)."""
        return safe_join_resolved(*self._table_dir(table_directory), *components)

    def new_write_dir(self, table_directory: str, partition: Mapping[str, str | None], sidecar: dict[str, Any],
                      prefix: str = "p") -> str:
        """Create an empty write dir holding only its sidecar; return its path relative to the table."""
        return self._new_write_dir(table_directory, partition, sidecar, prefix)[0]

    def _new_write_dir(self, table_directory: str, partition: Mapping[str, str | None], sidecar: dict[str, Any],
                       prefix: str = "p") -> tuple[str, Path]:
        relative = "/".join([*partition_path(partition), f"{prefix}-{uuid.uuid4().hex}"])
        target = self._under_table(table_directory, relative)[0]
        payload = {**sidecar, "created_at": time.time()}
        try:
            _make_write_dir(target)
            _create_file(target / SIDECAR, json.dumps(payload, sort_keys=True).encode())
            _injected_disk_full(self.root)
        except OSError as exc:
            self.delete_write_dir(table_directory, relative)
            raise _write_error(f"could not create a write dir of {table_directory} under {target}", exc) from exc
        return relative, target

    def write_part(self, table_directory: str, partition: Mapping[str, str | None], data: pa.Table,
                   sidecar: dict[str, Any]) -> WrittenPart:
        """Write one part (one Parquet file) into a new write dir; on failure remove what was written."""
        relative, target = self._new_write_dir(table_directory, partition, sidecar)  # target checked there
        stored = data.drop_columns([c for c in partition if c in data.column_names])
        try:
            # the local filesystem handed over: pyarrow would otherwise infer it from the path on every call
            pq.write_table(stored, str(target / "part-00000.parquet"), filesystem=_LOCAL_FS)
            size = (target / "part-00000.parquet").stat().st_size
            _injected_disk_full(self.root)
        except OSError as exc:
            self.delete_write_dir(table_directory, relative)
            raise _write_error(f"could not write a part of {table_directory} under {target}", exc) from exc
        return WrittenPart(relative, ("part-00000.parquet",), data.num_rows, size)

    def part_files(self, table_directory: str, path: str, files: Sequence[str]) -> list[Path]:
        base, resolved_base = self._under_table(table_directory, path)
        return [safe_join_resolved(base, resolved_base, name)[0] for name in files]

    def missing_files(self, table_directory: str, path: str, files: Sequence[str]) -> list[str]:
        return [str(p) for p in self.part_files(table_directory, path, files) if not p.is_file()]

    def read_part(self, table_directory: str, path: str, files: Sequence[str], schema: pa.Schema,
                  partition: Mapping[str, str | None]) -> pa.Table:
        """Read a part's files as a table of exactly `schema` (partition columns restored if absent)."""
        pieces = []
        for file_path in self.part_files(table_directory, path, files):
            try:
                # Spark writes timestamps as INT96 by default; pyarrow would read them as nanoseconds and
                # fail outside 1677-2262. Spark's timestamps are microseconds, so read them as such.
                piece = pq.read_table(file_path, coerce_int96_timestamp_unit="us")
            except (FileNotFoundError, OSError) as exc:
                raise StorageError(f"part file {file_path} is missing or unreadable: {exc}") from exc
            pieces.append(_restore_columns(piece, schema, partition))
        if not pieces:
            return schema.empty_table()
        return pa.concat_tables(pieces)

    def delete_part(self, table_directory: str, path: str) -> int:
        """Delete a part's directory, its write dir once no part is left in it, and emptied partition
        dirs; return the bytes freed. Missing files are fine (a crashed vacuum may have begun), and so
        is a concurrent writer or cleaner (a partition dir a writer entered meanwhile is kept)."""
        table_dir = self.table_dir(table_directory)
        part_dir = safe_join(table_dir, path)
        write_dir = safe_join(table_dir, write_dir_of(path))
        freed = tree_size(part_dir)
        shutil.rmtree(part_dir, ignore_errors=True)
        if write_dir != part_dir and not _has_subdirs(write_dir):
            shutil.rmtree(write_dir, ignore_errors=True)
        _remove_empty_dirs(write_dir.parent, table_dir)
        return freed

    def delete_write_dir(self, table_directory: str, relative: str) -> int:
        """Delete an unregistered write dir (an orphan) and emptied partition dirs; return bytes freed."""
        return self.delete_part(table_directory, relative)

    def write_dirs(self, table_directory: str) -> Iterator[tuple[str, Path]]:
        """Every write dir under a table: (path relative to the table, absolute path)."""
        table_dir = self.table_dir(table_directory)
        if not table_dir.is_dir():
            return
        for current, dirs, _files in os.walk(table_dir):
            keep = []
            for name in dirs:
                full = Path(current) / name
                if WRITE_DIR_RE.fullmatch(name):
                    yield full.relative_to(table_dir).as_posix(), full
                else:
                    keep.append(name)
            dirs[:] = keep


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


def _injected_disk_full(root: Path) -> None:
    """Tests only: with FAULT_QUOTA_ENV set, a write that leaves the storage root above that many bytes fails
    with ENOSPC, as on a full disk (where no small filesystem can be mounted). Unset: one dict lookup."""
    quota = os.environ.get(FAULT_QUOTA_ENV)
    if quota is not None and tree_size(root) > int(quota):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def write_dir_of(part_path: str) -> str:
    """The write dir a part path lives in (the part dir itself for the core's layout)."""
    pieces = part_path.split("/")
    for index, piece in enumerate(pieces):
        if WRITE_DIR_RE.fullmatch(piece):
            return "/".join(pieces[: index + 1])
    raise StorageError(f"part path {part_path!r} holds no write directory")


def read_sidecar(write_dir: Path) -> dict[str, Any] | None:
    try:
        loaded: dict[str, Any] = json.loads((write_dir / SIDECAR).read_text())
        return loaded
    except (OSError, ValueError):
        return None


def dir_age_seconds(path: Path) -> float:
    try:
        return time.time() - path.stat().st_mtime
    except OSError:
        return 0.0


def tree_size(path: Path) -> int:
    """Bytes of the files under `path` (files that vanish meanwhile count 0)."""
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
