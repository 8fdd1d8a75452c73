"""`Warehouse.maintenance` and `Warehouse.tags`: a warehouse's maintenance and its named snapshots as two groups
of calls (as delta-rs groups `DeltaTable.optimize` and `DeltaTable.alter`), thin facades over what the flat
names run; those keep working, unchanged:

    wh.maintenance.vacuum(retention_seconds=..., dry_run=False)     wh.vacuum(...)
    wh.maintenance.compact(table, partitions=None, ...)              wh.compact(...)
    wh.maintenance.recover()                                         wh.recover()
    wh.maintenance.retention(table)                                  wh.retention(table)
    wh.maintenance.set_retention(table, seconds=None, versions=None) wh.set_retention(...)
    wh.tags.create(name, csn=None, tables=None, note=None)           wh.tag(...)
    wh.tags.list()                                                   wh.tags()
    wh.tags.get(name)                                                wh.tag_info(name)
    wh.tags.drop(name)                                               wh.untag(name)

Maintenance calls the Warehouse's own methods (compact checks the storage root first, recover wakes the
publisher after: those steps keep one owner); Tags calls core/tags.py, as the flat names do. This module
imports no Warehouse: Maintenance reaches it through the protocol `Maintainable`, which mypy checks the
Warehouse against where it builds the group (core/warehouse.py).
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Protocol

from airflow_txn.core import compaction, recovery, tags, vacuum
from airflow_txn.core.config import DEFAULT_RETENTION_SECONDS
from airflow_txn.core.runtime import Runtime
from airflow_txn.model.results import (
    CompactionReport,
    PartitionSpec,
    RecoveryReport,
    RetentionInfo,
    TagInfo,
    VacuumReport,
)


class Maintainable(Protocol):
    """What Maintenance delegates to: the Warehouse's maintenance methods."""

    def vacuum(self, retention_seconds: float = ..., dry_run: bool = ...,
               progress: vacuum.Progress | None = ...) -> VacuumReport: ...

    def compact(self, table: str, partitions: PartitionSpec | None = ..., target_file_bytes: int = ...,
                min_parts: int = ..., progress: compaction.Progress | None = ...,
                writer: compaction.Writer | None = ...) -> CompactionReport: ...

    def recover(self, progress: recovery.Progress | None = ...) -> RecoveryReport: ...

    def set_retention(self, table: str, seconds: float | None = ..., versions: int | None = ...) -> RetentionInfo: ...

    def retention(self, table: str) -> RetentionInfo: ...


class Maintenance:
    """`wh.maintenance`: vacuum, compact, recover, retention and set_retention; each the Warehouse method of
    the same name (its docstring says what it does), with the same arguments, defaults, result and errors."""

    def __init__(self, warehouse: Maintainable) -> None:
        self._warehouse = warehouse

    def vacuum(self, retention_seconds: float = DEFAULT_RETENTION_SECONDS, dry_run: bool = False,
               progress: vacuum.Progress | None = None) -> VacuumReport:
        """Delete what no snapshot in the retention window can see (Warehouse.vacuum)."""
        return self._warehouse.vacuum(retention_seconds, dry_run=dry_run, progress=progress)

    def compact(self, table: str, partitions: PartitionSpec | None = None,
                target_file_bytes: int = compaction.DEFAULT_TARGET_FILE_BYTES, min_parts: int = 2,
                progress: compaction.Progress | None = None,
                writer: compaction.Writer | None = None) -> CompactionReport:
        """Merge small visible parts of `table` into larger ones (Warehouse.compact)."""
        return self._warehouse.compact(table, partitions, target_file_bytes=target_file_bytes, min_parts=min_parts,
                                       progress=progress, writer=writer)

    def recover(self, progress: recovery.Progress | None = None) -> RecoveryReport:
        """Roll forward, roll back, reconcile (Warehouse.recover)."""
        return self._warehouse.recover(progress=progress)

    def retention(self, table: str) -> RetentionInfo:
        """`table`'s own retention policy and horizon (Warehouse.retention)."""
        return self._warehouse.retention(table)

    def set_retention(self, table: str, seconds: float | None = None, versions: int | None = None) -> RetentionInfo:
        """Keep `table` readable `seconds` back and/or its last `versions` commits (Warehouse.set_retention)."""
        return self._warehouse.set_retention(table, seconds=seconds, versions=versions)


class Tags:
    """`wh.tags`: the named snapshots, read with `wh.read(table, tag=name)` for as long as the tag exists
    (vacuum keeps every file one sees). Calling it, `wh.tags()`, lists them, as `wh.tags.list()`."""

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime

    def create(self, name: str, csn: int | None = None, tables: Sequence[str] | None = None,
               note: str | None = None) -> TagInfo:
        """Name snapshot `csn` (None: the readable watermark) of `tables` (None: every table), as Warehouse.tag:
        TagExistsError when the name is taken (a tag never moves), SnapshotTooOldError below a table's
        retention horizon, InvalidArgumentError above the readable watermark."""
        return tags.create(self._runtime, name, csn, tables, note)

    def list(self) -> builtins.list[TagInfo]:
        """Every tag ({name, csn, tables, created_at, note}), the newest CSN first."""
        return tags.all_tags(self._runtime)

    def get(self, name: str) -> TagInfo:
        """The tag `name` (TagNotFoundError when there is none), as Warehouse.tag_info."""
        return tags.get(self._runtime, name)

    def drop(self, name: str) -> TagInfo:
        """Remove the tag (the next vacuum may delete what only it kept); returns what it was. As Warehouse.untag."""
        return tags.drop(self._runtime, name)

    def __call__(self) -> builtins.list[TagInfo]:
        """`wh.tags()`: every tag, the newest CSN first (list)."""
        return self.list()
