"""Compaction: merging a partition's small parts into fewer, bigger ones, invisibly to every snapshot.

Why a merge may keep old CSNs: docs/DESIGN.md, decision D9.

Three steps, each usable alone; `prepare` is step 1 and `run` steps 2 and 3 for every group, whoever writes (the
pyarrow writer here, or an engine's through the adapter's compaction plan, adapter.open_compaction):
  1. plan   groups of small parts per partition. Candidates are committed, unlocked parts created at
            a CSN <= the readable watermark and <= every open transaction's snapshot, so every running
            transaction already sees all of them. Bin-packed in (CSN, id) order up to target_file_bytes,
            at least min_parts per group.
  2. write  per group, a merge transaction row of its own (its lease kept alive meanwhile) and the
            merged rows in a new part file whose footer names the merge (storage/root.py; an engine's
            writer: a write dir, sidecar first). A merge killed here leaves an unregistered file of a
            dead transaction, which vacuum's orphan rule removes.
  3. swap   ONE catalog transaction: compare-and-swap the removal of every source (NULL -> the merge),
            register the merged part, mark the merge committed. The merged part takes the CSN
            M = max(source CSNs) and every source the removal CSN M; no CSN is allocated and no commit
            record written. A snapshot S < M sees exactly the sources it saw before (those created
            <= S; their removal at M > S is invisible to it), a snapshot S >= M sees the merged part:
            the same rows. No open transaction has a snapshot below M (step 1), so none notices.
A source that a user transaction locked (or removed) meanwhile makes the merge YIELD: it rolls its
own transaction back and deletes its files; the user transaction never notices. A user statement
that chose sources before the swap and locks them after it is redirected to the merged part, or
chooses again (compaction_records.follow_merges, staging.py). Vacuum keeps the sources for the
retention window after the swap and while a transaction older than the swap is open (vacuum.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from sqlalchemy import Connection

from airflow_txn.catalog import compaction_records, counters, part_records, table_registry, txn_records
from airflow_txn.catalog.compaction_records import SwapResult
from airflow_txn.catalog.part_records import PartRow
from airflow_txn.catalog.table_registry import TableInfo
from airflow_txn.core import bounds, crashpoints, rollback, versions
from airflow_txn.core.isolation import Isolation
from airflow_txn.core.leases import LeaseKeeper
from airflow_txn.core.runtime import Runtime
from airflow_txn.errors import LeaseExpiredError, StorageError, TransactionClosedError, TxnError
from airflow_txn.model.partitioning import Partition, normalize_partitions, parse_partition_key, partition_key
from airflow_txn.model.parts import WrittenPart
from airflow_txn.model.results import CompactionReport, MergeOutcome, MergeStatus, PartitionSpec
from airflow_txn.storage.root import footer_tags, stored_unit
from airflow_txn.telemetry import logs

log = logs.get_logger(__name__)

DEFAULT_TARGET_FILE_BYTES = 128 * 1024 * 1024
MERGE_LEASE_SECONDS = 600.0
ROW_GROUP_ROWS = 1 << 20
"""The arrow writer buffers small sources up to this many rows per Parquet row group."""

Progress = Callable[[str, int, int], None]


@dataclass(frozen=True, slots=True)
class MergeGroup:
    """Source parts of one partition that one merge combines, in (creation_csn, id) order."""

    table: TableInfo
    partition_key: str
    sources: tuple[PartRow, ...]

    @property
    def partition(self) -> Partition:
        return parse_partition_key(self.partition_key)

    @property
    def merge_csn(self) -> int:
        """M: the merged part's creation CSN and the sources' removal CSN."""
        return max(int(s.version.creation_csn or 0) for s in self.sources)

    @property
    def rows(self) -> int:
        return sum(s.row_count for s in self.sources)

    @property
    def size_bytes(self) -> int:
        return sum(s.size_bytes for s in self.sources)


@dataclass(frozen=True, slots=True)
class MergeJob:
    """A group being merged by the transaction `tid` (its row is in txn_transactions)."""

    group: MergeGroup
    tid: str
    snapshot: int

    @property
    def tags(self) -> dict[str, Any]:
        """What the writer records of itself: in the part file's footer (the core's writer), or in its write
        dir's sidecar BEFORE any data file (an engine's: adapter.MergePlan.new_write_dir)."""
        return {"tid": self.tid, "table": self.group.table.name.qualified, "key": None,
                "partition": self.group.partition, "writer": "compaction",
                "sources": [s.id for s in self.group.sources]}


Writer = Callable[[Runtime, MergeJob], WrittenPart]
"""Step 2: write the merged rows of `job.group.sources` into a new part of the table (a part file whose
footer names job.tid, or a write dir, sidecar first) and return it. The rows must be exactly the sources'."""


class _Yield(Exception):
    """Raised inside the swap's catalog transaction to roll it back: the merge yields."""


def check_options(target_file_bytes: object, min_parts: object) -> None:
    """InvalidArgumentError unless target_file_bytes is 1..bounds.MAX_TARGET_FILE_BYTES and min_parts >= 2."""
    bounds.target_file_bytes(target_file_bytes)
    bounds.min_parts(min_parts)


# -- step 1 -----------------------------------------------------------------------------------------
def plan(rt: Runtime, table: str, partitions: PartitionSpec | None = None,
         target_file_bytes: int = DEFAULT_TARGET_FILE_BYTES, min_parts: int = 2) -> list[MergeGroup]:
    """Step 1 (module doc): the groups to merge; validates everything first and changes nothing."""
    check_options(target_file_bytes, min_parts)
    with rt.catalog.read() as conn:
        bound = rt.oracle.readable_csn(conn)
        info = versions.table_at(conn, table_registry.get(conn, table), None, bound)  # a renamed table's new name
        keys = _partition_keys(conn, rt, info, partitions)
        oldest = txn_records.oldest_active_snapshot(conn)
        if oldest is not None:
            bound = min(bound, oldest)
        parts = compaction_records.candidates(conn, info.id, bound, keys)
        schemas = versions.written_schemas(conn, info, parts)
    # parts written under different versions of the table's schema are never merged: the merged part is written
    # under its sources' version, which every snapshot that sees it reads it as (docs/DESIGN.md, D27)
    by_partition: dict[tuple[str, int], list[PartRow]] = {}
    for part in parts:
        by_partition.setdefault((part.partition_key, part.schema_version), []).append(part)
    return [MergeGroup(versions.with_version(info, version, schemas[version]) if version in schemas
                       else versions.with_version(info, version, info.schema), key, group)
            for (key, version), members in sorted(by_partition.items())
            for group in pack(members, target_file_bytes, min_parts)]


def _partition_keys(conn: Connection, rt: Runtime, info: TableInfo,
                    partitions: PartitionSpec | None) -> list[str] | None:
    """The catalog keys of the listed partitions; each must hold visible parts (None: every partition)."""
    if partitions is None:
        return None
    listed = normalize_partitions(partitions, info.schema, info.partition_by)
    keys = list(dict.fromkeys(partition_key(p) for p in listed))
    watermark = rt.oracle.readable_csn(conn)
    present = {p.partition_key for p in part_records.visible_parts(conn, info.id, None, watermark, keys)}
    missing = [parse_partition_key(k) for k in keys if k not in present]
    if missing:
        raise TxnError(f"partition {missing[0]} of {info.name} has no visible parts: nothing to compact there "
                       "(check the partition values)")
    return keys


def pack(parts: Sequence[PartRow], target_file_bytes: int, min_parts: int) -> list[tuple[PartRow, ...]]:
    """Consecutive runs of parts, each run's bytes <= target; parts already that big stay alone."""
    groups: list[tuple[PartRow, ...]] = []
    current: list[PartRow] = []
    size = 0
    for part in parts:
        if current and (part.size_bytes >= target_file_bytes or size + part.size_bytes > target_file_bytes):
            if len(current) >= min_parts:
                groups.append(tuple(current))
            current, size = [], 0
        if part.size_bytes >= target_file_bytes:
            continue
        current.append(part)
        size += part.size_bytes
    if len(current) >= min_parts:
        groups.append(tuple(current))
    return groups


# -- step 2 -----------------------------------------------------------------------------------------
def begin(rt: Runtime, group: MergeGroup, lease_seconds: float = MERGE_LEASE_SECONDS) -> MergeJob:
    """The merge's transaction row, begun like a user transaction (at the watermark, under the gate)."""
    with rt.catalog.write() as conn:
        counters.share_snapshot_gate(conn, rt.catalog)
        snapshot = rt.oracle.readable_csn(conn)
        tid = str(rt.tids.next(snapshot))
        label = f"compaction of {group.table.name} {group.partition_key} ({len(group.sources)} parts)"
        txn_records.insert_row(conn, tid, label, Isolation.SNAPSHOT.value, snapshot, float(lease_seconds))
    return MergeJob(group, tid, snapshot)


def write_arrow(rt: Runtime, job: MergeJob) -> WrittenPart:
    """The default writer: the sources' rows in (CSN, id) order into one Parquet file, read one
    source at a time (memory: about one row group), with the table's layout (no partition columns)."""
    info, partition = job.group.table, job.group.partition
    stored = pa.schema([f for f in info.schema if f.name not in partition], metadata=footer_tags(job.tags))

    def write(sink: pa.NativeFile) -> int:
        rows = 0
        with pq.ParquetWriter(sink, stored) as out:
            buffer: list[pa.Table] = []
            for source in job.group.sources:
                piece = rt.storage.read_part(info.directory, source.path, source.files, info.schema, partition)
                buffer.append(piece.select(stored.names))
                rows += piece.num_rows
                if sum(t.num_rows for t in buffer) >= ROW_GROUP_ROWS:
                    out.write_table(pa.concat_tables(buffer).combine_chunks())
                    buffer = []
            if buffer:
                out.write_table(pa.concat_tables(buffer).combine_chunks())
        return rows

    return rt.storage.write_part_file(info.directory, partition, job.tid, write)


def _renewer(rt: Runtime, tid: str, lease_seconds: float) -> Callable[[], bool]:
    def renew() -> bool:
        with rt.catalog.write() as conn:
            return txn_records.renew(conn, tid, lease_seconds)
    return renew


# -- step 3 -----------------------------------------------------------------------------------------
def swap(rt: Runtime, job: MergeJob, written: WrittenPart) -> SwapResult:
    """Step 3 (module doc). Returns the merged part's id, or None with the reason the merge yields
    (nothing changed then). Raises StorageError if the writer's part does not hold the sources' rows."""
    group = job.group
    if written.row_count != group.rows:
        raise StorageError(f"the merge of {len(group.sources)} parts of {group.table.name} wrote "
                           f"{written.row_count} rows instead of {group.rows}; nothing was swapped")
    try:
        with rt.catalog.write() as conn:
            try:
                txn_records.require_usable(txn_records.fetch(conn, job.tid, rt.catalog))
            except (LeaseExpiredError, TransactionClosedError) as exc:
                raise _Yield(f"the merge transaction cannot commit: {exc}") from exc
            oldest = txn_records.oldest_active_snapshot(conn)
            if oldest is not None and oldest < group.merge_csn:  # cannot happen (plan); never risk it
                raise _Yield(f"a transaction with snapshot {oldest} < {group.merge_csn} is open")
            result = compaction_records.swap(conn, rt.catalog, job.tid, group.table.id, group.partition_key,
                                             group.sources, written, group.merge_csn, group.table.version)
            if result.merged_part_id is None:
                raise _Yield(result.reason)
            if not txn_records.cas_state(conn, job.tid, txn_records.COMMITTED, commit_csn=None):
                raise AssertionError(f"merge transaction {job.tid} changed state under its row lock")
    except _Yield as exc:
        return SwapResult(None, str(exc))
    return result


# -- the three steps together -------------------------------------------------------------------------
def merge_group(rt: Runtime, group: MergeGroup, writer: Writer | None = None,
                lease_seconds: float = MERGE_LEASE_SECONDS) -> MergeOutcome:
    """Merge one group as a transaction of its own; returns its outcome (status merged or yielded)."""
    job = begin(rt, group, lease_seconds)

    def outcome(status: MergeStatus) -> MergeOutcome:
        return MergeOutcome(tid=job.tid, partition=group.partition, sources=len(group.sources), rows=group.rows,
                            bytes_before=group.size_bytes, csn=group.merge_csn, status=status)

    with logs.bind(job.tid, group.merge_csn):
        try:
            with rt.catalog.read() as conn:
                free = compaction_records.still_free(conn, group.sources)
            if not free:
                _abandon(rt, job, None)
                return {**outcome("yielded"), "reason": "a source part was locked before the merge wrote"}
            with LeaseKeeper(_renewer(rt, job.tid, lease_seconds), lease_seconds / 3, job.tid):
                written = (writer or write_arrow)(rt, job)
            crashpoints.hit(crashpoints.COMPACT_AFTER_FILES)
            result = swap(rt, job, written)
        except BaseException:
            _roll_back_unless_committed(rt, job.tid)  # files stay for vacuum: the swap may have committed
            raise
        if result.merged_part_id is None:
            _abandon(rt, job, written)
            log.info("merge of %d parts yielded: %s", len(group.sources), result.reason)
            return {**outcome("yielded"), "reason": result.reason}
        log.info("merged %d parts (%d rows) into part %d", len(group.sources), group.rows, result.merged_part_id)
        crashpoints.hit(crashpoints.COMPACT_AFTER_SWAP)
    return {**outcome("merged"), "part": result.merged_part_id, "bytes_after": written.size_bytes}


def _abandon(rt: Runtime, job: MergeJob, written: WrittenPart | None) -> None:
    """A yielding merge: its transaction rolled back, then its files deleted (never registered)."""
    _roll_back_unless_committed(rt, job.tid)
    if written is not None:
        rt.storage.delete_write_dir(job.group.table.directory, stored_unit(written.path))


def _roll_back_unless_committed(rt: Runtime, tid: str) -> None:
    try:
        rollback.rollback(rt, tid, reason="compaction yielded or failed")
    except TransactionClosedError:  # the swap committed: the merge stands
        return
    except TxnError as exc:  # the lease runs out and recovery finishes it
        log.warning("could not roll back merge %s: %s", tid, exc)


@dataclass(frozen=True, slots=True)
class Prepared:
    """A compaction planned (step 1) and not run yet: the table, its groups, what its visible parts were."""

    table: TableInfo
    groups: tuple[MergeGroup, ...]
    keys: list[str] | None
    """The listed partitions' keys (None: every partition)."""
    parts_before: int
    bytes_before: int


def prepare(rt: Runtime, table: str, partitions: PartitionSpec | None = None,
            target_file_bytes: int = DEFAULT_TARGET_FILE_BYTES, min_parts: int = 2) -> Prepared:
    """Step 1 with the counts a report starts from: validates everything first and changes nothing."""
    groups = plan(rt, table, partitions, target_file_bytes, min_parts)
    info = groups[0].table if groups else _table(rt, table)
    keys = None if partitions is None else list(dict.fromkeys(
        partition_key(p) for p in normalize_partitions(partitions, info.schema, info.partition_by)))
    parts_before, bytes_before = _visible_totals(rt, info, keys)
    return Prepared(info, tuple(groups), keys, parts_before, bytes_before)


def run(rt: Runtime, prepared: Prepared, writer: Writer | None = None, progress: Progress | None = None,
        lease_seconds: float = MERGE_LEASE_SECONDS) -> CompactionReport:
    """Steps 2 and 3 for every group of `prepared` (`writer` None: write_arrow); returns counts before/after and
    each merge's outcome. Every writer, the core's and an engine's (adapter.CompactionPlan), runs here."""
    groups = prepared.groups
    merges = []
    for index, group in enumerate(groups):
        if progress is not None:
            progress("merge", index, len(groups))
        merges.append(merge_group(rt, group, writer, lease_seconds))
    if progress is not None:
        progress("merge", len(groups), len(groups))
    parts_after, bytes_after = _visible_totals(rt, prepared.table, prepared.keys)
    return CompactionReport(
        table=prepared.table.name.qualified, groups=len(groups),
        merged=sum(m["status"] == "merged" for m in merges),
        yielded=sum(m["status"] == "yielded" for m in merges),
        parts_before=prepared.parts_before, parts_after=parts_after,
        bytes_before=prepared.bytes_before, bytes_after=bytes_after,
        tids=[m["tid"] for m in merges if m["status"] == "merged"],
        merges=merges,
    )


def compact(rt: Runtime, table: str, partitions: PartitionSpec | None = None,
            target_file_bytes: int = DEFAULT_TARGET_FILE_BYTES, min_parts: int = 2,
            progress: Progress | None = None, writer: Writer | None = None,
            lease_seconds: float = MERGE_LEASE_SECONDS) -> CompactionReport:
    """Plan, then merge every group (module doc): prepare, then run."""
    return run(rt, prepare(rt, table, partitions, target_file_bytes, min_parts), writer, progress, lease_seconds)


def _table(rt: Runtime, table: str) -> TableInfo:
    with rt.catalog.read() as conn:
        watermark = rt.oracle.readable_csn(conn)
        return versions.table_at(conn, table_registry.get(conn, table), None, watermark)


def _visible_totals(rt: Runtime, info: TableInfo, keys: list[str] | None) -> tuple[int, int]:
    with rt.catalog.read() as conn:
        watermark = rt.oracle.readable_csn(conn)
        parts = part_records.visible_parts(conn, info.id, None, watermark, keys)
    return len(parts), sum(p.size_bytes for p in parts)
