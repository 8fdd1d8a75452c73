"""A storage root on a local (or mounted shared) directory: what only a directory tree needs.

- Paths: every path below a table is built by names.safe_join, which follows symbolic links and refuses one
  that leads out of the table (invariant 10); a table's directory is checked and resolved once.
- Directories: a writer creates the partition directories it writes into, and cleaners (vacuum, a failed
  write's cleanup: delete_part) remove the ones they leave empty, while other writers may be entering them.
  No interleaving can fail a write (issue 30): a writer creates the file (or write dir) itself first, and
  only when that finds no directory (ENOENT) does it create the missing ones (_make_dirs), taking one that
  exists (EEXIST) as made and one that vanishes meanwhile as a reason to try the file again (_create_in).
  Nothing here asks whether a directory exists and acts on the answer later (`Path.mkdir(exist_ok=True)` did:
  its is_dir() after an EEXIST failed when a cleaner had removed the directory in between). A cleaner removes
  a directory only by rmdir, which refuses one a writer has put anything in.
- A part file's size comes from a stat after its writing, which also proves the file outlived it (a cleaner
  that unlinked it meanwhile made the writes go to a deleted inode).
- Tests only: FAULT_QUOTA_ENV makes a write past a byte quota fail as on a full disk.
"""

from __future__ import annotations

import errno
import json
import os
import random
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import suppress
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import pyarrow as pa

from airflow_txn import environment
from airflow_txn.errors import StorageError
from airflow_txn.model.names import check_path_length, safe_join, safe_join_resolved
from airflow_txn.model.partitioning import partition_path
from airflow_txn.model.parts import StoredEntry
from airflow_txn.storage.location import Location
from airflow_txn.storage.root import (
    LONGEST_PART_NAMES,
    PART_FILE_RE,
    SIDECAR,
    WRITE_DIR_RE,
    PartWrite,
    Storage,
    is_plain_part,
    write_dir_of,
    write_error,
)

T = TypeVar("T")

FAULT_QUOTA_ENV = environment.FAULT_STORAGE_QUOTA
"""Tests only (tests/faults/test_disk_full.py): a byte quota on the storage root, see _injected_disk_full."""
_DEFAULT_PATH_MAX = 4096
_CREATE_PATIENCE = 60.0
"""For how many seconds a writer creates its file (or write dir) again when a cleaner removed a directory above
it between the writer's making it and its use: each time a cleaner must win that race anew. A bound in time,
not in attempts: on a loaded machine a cleaner in a tight loop won 50 attempts in a row (a CI run), since the
writer, descheduled right after making the directory, lost every time in the same phase."""
_CREATE_BACKOFF = 0.02
"""The longest pause (seconds, jittered) before a writer makes the directories again after losing the race a few
times: a pause of random length puts the writer out of step with a cleaner that keeps winning."""


class LocalRoot(Storage):
    """A storage root on a local directory (`roots.open_storage(location)` for a `file` location)."""

    local: Path
    parallel_writes: ClassVar[bool] = False  # a small file is written faster than a thread is handed it

    def __init__(self, location: Location | str | os.PathLike[str]) -> None:
        super().__init__(location)
        local = self.location.local
        if local is None:
            raise StorageError(f"storage root {self.uri} is not a local directory")
        self.local = local
        # table directory (from the catalog) -> (its path, that path resolved): validated and resolved
        # once per table, not on every join below it (realpath is the hot path's largest storage cost)
        self._table_dirs: dict[str, tuple[Path, Path]] = {}
        self._path_max: int | None = None  # PATH_MAX of the root's filesystem, asked once

    def ensure(self) -> None:
        self.local.mkdir(parents=True, exist_ok=True)

    def check_part_paths(self, table_directory: str, partitions: Sequence[Mapping[str, str | None]]) -> None:
        table_dir = self.table_dir(table_directory)
        if self._path_max is None:
            try:
                self._path_max = os.pathconf(self.local, "PC_PATH_MAX")
            except (OSError, ValueError):  # no such limit reported (or no root yet): the Linux value
                self._path_max = _DEFAULT_PATH_MAX
        for partition in partitions:
            check_path_length(table_dir.joinpath(*partition_path(partition), *LONGEST_PART_NAMES), self._path_max)

    def table_dir(self, directory: str) -> Path:
        return self._table_dir(directory)[0]

    def _table_dir(self, directory: str) -> tuple[Path, Path]:
        known = self._table_dirs.get(directory)
        if known is None:
            path = safe_join(self.local, directory)
            known = self._table_dirs[directory] = (path, path.resolve())
        return known

    def _under_table(self, table_directory: str, *components: str) -> tuple[Path, Path]:
        """safe_join below a table's directory: (path, path resolved)."""
        return safe_join_resolved(*self._table_dir(table_directory), *components)

    def path(self, table_directory: str, relative: str = "") -> str:
        return str(self._under_table(table_directory, relative)[0] if relative else self.table_dir(table_directory))

    def new_write_dir(self, table_directory: str, partition: Mapping[str, str | None], sidecar: dict[str, Any],
                      prefix: str = "p") -> str:
        relative = "/".join([*partition_path(partition), f"{prefix}-{uuid.uuid4().hex}"])
        target = self._under_table(table_directory, relative)[0]
        payload = {**sidecar, "created_at": time.time()}
        try:
            _create_in(target, os.mkdir)  # its name is new: only the partition dirs above it can race
            _create_file(target / SIDECAR, json.dumps(payload, sort_keys=True).encode())
            _injected_disk_full(self.local)
        except OSError as exc:
            self.delete_write_dir(table_directory, relative)
            raise write_error(f"could not create a write dir of {table_directory} under {target}", exc) from exc
        return relative

    def _write_new_file(self, target: str, write: PartWrite) -> tuple[int, int]:
        path = Path(target)
        with _create_in(path, lambda new: self.fs.open_output_stream(str(new))) as sink:
            rows = write(sink)
        size = path.stat().st_size
        _injected_disk_full(self.local)
        return rows, size

    def _engine_uri(self, path: str) -> str:
        return os.path.realpath(path)

    def _open_for_reading(self, path: str) -> pa.NativeFile:
        return self.fs.open_input_file(path)

    def delete_part(self, table_directory: str, path: str) -> int:
        # the table dir resolved once per root (_under_table): a full realpath per part was most of a vacuum's
        # time per part (docs/BENCHMARKS.md, B16)
        table_dir = self.table_dir(table_directory)
        if is_plain_part(path):
            target = self._under_table(table_directory, path)[0]
            freed = tree_size(target)
            with suppress(FileNotFoundError, NotADirectoryError):  # NotADirectory: a file where its dir belongs
                target.unlink()
            _remove_empty_dirs(target.parent, table_dir)
            return freed
        part_dir = self._under_table(table_directory, path)[0]
        unit = write_dir_of(path)
        write_dir = part_dir if unit == path else self._under_table(table_directory, unit)[0]
        freed = tree_size(part_dir)
        shutil.rmtree(part_dir, ignore_errors=True)
        if write_dir != part_dir and not _has_subdirs(write_dir):
            shutil.rmtree(write_dir, ignore_errors=True)
        _remove_empty_dirs(write_dir.parent, table_dir)
        return freed

    def size_of(self, table_directory: str, relative: str) -> int:
        return tree_size(self._under_table(table_directory, relative)[0])

    def stored_parts(self, table_directory: str) -> Iterator[StoredEntry]:
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

    def write_root_file(self, relative: str, content: bytes) -> str:
        target = self.root_path(relative)
        _replace_file(Path(target), content)
        return os.path.realpath(target)

    def delete_root_tree(self, relative: str) -> None:
        shutil.rmtree(self.root_path(relative), ignore_errors=True)


def _create_in(target: Path, create: Callable[[Path], T]) -> T:
    """`create(target)`, a call that makes `target` itself (a file, a directory) and fails with ENOENT when its
    directory is missing, after making that directory and its missing parents (_make_dirs) if need be. A
    cleaner may remove an empty directory at any moment, also one just made: then `create` finds it missing
    again and everything is made anew, until `create` succeeds (for _CREATE_PATIENCE seconds at most; from the
    fourth attempt on after a jittered pause, see _CREATE_BACKOFF)."""
    deadline = time.monotonic() + _CREATE_PATIENCE
    attempt = 0
    while True:
        try:
            return create(target)
        except FileNotFoundError:
            attempt += 1
            if time.monotonic() > deadline:
                raise
            if attempt > 3:
                time.sleep(random.uniform(0, min(_CREATE_BACKOFF, 0.0002 * 2 ** attempt)))
            _make_dirs(target.parent)


def _make_dirs(directory: Path) -> None:
    """Make `directory` and its missing parents, where a cleaner may remove any empty one at any time: one that
    exists (EEXIST) counts as made, whoever made it; when one above vanishes before the one below it is made
    (ENOENT), making stops and the caller's next attempt (_create_in) starts over. Any other refusal (EACCES,
    ENOTDIR, ENOSPC) is raised. Never asks whether a directory exists: an answer could be stale when used."""
    missing = []
    while True:  # up, to the first directory that exists or can be made
        try:
            os.mkdir(directory)
            break
        except FileExistsError:
            break
        except FileNotFoundError:
            if directory.parent == directory:
                raise
            missing.append(directory)
            directory = directory.parent
    for below in reversed(missing):  # then down again
        try:
            os.mkdir(below)
        except FileExistsError:
            continue
        except FileNotFoundError:
            return


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
    """Write `target` whole: a temporary file in its directory (made if need be), fsynced, then renamed over it."""
    prefix, suffix = f".{target.name}.", ".tmp"
    fd, tmp = _create_in(target, lambda new: tempfile.mkstemp(dir=new.parent, prefix=prefix, suffix=suffix))
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


def _injected_disk_full(root: Path) -> None:
    """Tests only: with FAULT_QUOTA_ENV set, a write that leaves the storage root above that many bytes fails
    with ENOSPC, as on a full disk (where no small filesystem can be mounted). Unset: one dict lookup."""
    quota = environment.fault_storage_quota()
    if quota is not None and tree_size(root) > int(quota):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
