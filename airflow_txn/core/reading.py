"""Reading a table at a snapshot: which snapshot a read at a CSN uses, and the visible parts (invariant 2)
read from storage and filtered; at a tag, the tag's CSN with no horizon check (its parts are pinned) and
the tag confirmed to still exist once the files were read (core/tags.py).

`plan` is the one read planner: every read (Warehouse.read, Transaction.read, the manifests, the adapter
interface's plan_read that Spark's native reader and the data source use) decides here what it sees: the
one-of check (a CSN, a tag or a transaction's own view), the retention check, the tag, and the recording of a
transaction's read (its isolation level's read set, and the keyed read retries withdraw: invariant 7), in at
most 2 catalog round trips."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from airflow_txn.catalog import key_records, part_records, read_sets, table_registry, txn_records
from airflow_txn.catalog.part_records import PartRow
from airflow_txn.catalog.table_registry import TableInfo
from airflow_txn.catalog.tag_records import TagRow
from airflow_txn.core import apply, bounds, retention, retries, tags, versions
from airflow_txn.core.runtime import Runtime
from airflow_txn.core.staging import Statement
from airflow_txn.errors import InvalidArgumentError, SchemaMismatchError, SnapshotTooOldError, StorageError, TxnError
from airflow_txn.model.csn import PREHISTORIC_CSN
from airflow_txn.model.partitioning import WHOLE_TABLE
from airflow_txn.model.results import PartitionSpec


def snapshot_for(rt: Runtime, csn: int | None, tables: Sequence[str] | None = None) -> int:
    """The snapshot of a read at `csn` (None: the watermark); refuses CSNs not readable yet and
    CSNs below the retention horizon of one of `tables` (None: of every table; retention.py)."""
    if csn is not None:
        csn = bounds.catalog_int(csn, "csn", PREHISTORIC_CSN)
    watermark = apply.readable_csn(rt)
    if csn is None:
        return watermark
    if csn > watermark:
        apply.apply_pending(rt, up_to=csn)
        watermark = apply.readable_csn(rt)
        if csn > watermark:
            raise TxnError(f"CSN {csn} is not readable yet (watermark {watermark}); use wait_for_csn")
    retention.check_readable(rt, csn, tables)
    return csn


def check_filter(filter: object, info: TableInfo) -> pc.Expression | None:
    """None, or an Expression that evaluates to boolean on the table's schema."""
    import pyarrow.dataset as ds  # (and pandas, which it loads) only where an expression is evaluated

    if filter is None:
        return None
    if not isinstance(filter, pc.Expression):
        raise SchemaMismatchError(f"filter must be a pyarrow.compute.Expression, got {type(filter).__name__}")
    try:
        ds.dataset(info.schema.empty_table()).to_table(filter=filter)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
        raise SchemaMismatchError(f"cannot apply filter {filter} to {info.name}: {exc}") from exc
    return filter


def read(rt: Runtime, info: TableInfo, tid: str | None, snapshot: int, filter: object = None,
         partition_keys: Sequence[str] | None = None) -> pa.Table:
    """Exactly the rows of the parts visible to (tid, snapshot), optionally filtered."""
    with rt.catalog.read() as conn:
        info = versions.table_at(conn, info, tid, snapshot)
        parts = part_records.visible_parts(conn, info.id, tid, snapshot, partition_keys)
        schemas = versions.written_schemas(conn, info, parts)
    predicate = check_filter(filter, info)
    pieces = [versions.read_part(rt, info, p, schemas) for p in parts]
    table = pa.concat_tables(pieces) if pieces else info.schema.empty_table()
    if predicate is not None:
        table = table.filter(predicate)
    return table


def plan_schema(rt: Runtime, table: str, csn: int | None, tag: str | None) -> pa.Schema:
    """The schema of `table` at snapshot `csn` or at tag `tag` (the one version of it visible there), with a read's
    checks (a CSN not readable yet, the retention horizon, the tag)."""
    check_one_of(csn, None, tag)
    if tag is not None:
        row, info = tags.resolve(rt, tag, table)
        snapshot = row.csn
    else:
        snapshot = snapshot_for(rt, csn, [table])
        with rt.catalog.read() as conn:
            info = table_registry.get(conn, table)
    with rt.catalog.read() as conn:
        return versions.table_at(conn, info, None, snapshot).schema


def read_at_tag(rt: Runtime, name: str, table: str, filter: object = None,
                partitions: PartitionSpec | None = None) -> pa.Table:
    """The rows of `table` at tag `name` (TagNotFoundError, TableNotInTagError), optionally filtered and
    limited to `partitions`. Needs no transaction: a tag's content never changes."""
    return read_planned(rt, plan(rt, table, tag=name, partitions=partitions), filter)


# -- the read planner -------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Planned:
    """What one read sees (plan): the table and exactly the parts visible at `snapshot`."""

    info: TableInfo
    parts: tuple[PartRow, ...]
    snapshot: int
    tid: str | None
    """The reading transaction (its own staged parts included); None: a committed snapshot."""
    tag: TagRow | None = None
    """The tag read at: confirm() once the files were read."""
    schemas: versions.Schemas = field(default_factory=dict)
    """The schemas of the other versions of the table some of `parts` were written under (info.schema is the
    version the read reads them as: docs/DESIGN.md, D27)."""

    def confirm(self, rt: Runtime) -> None:
        """After the files were read: a read at a tag checks the tag still exists (else TagNotFoundError)."""
        if self.tag is not None:
            tags.confirm(rt, self.tag)


def check_one_of(csn: object, view: object, tag: object) -> None:
    """InvalidArgumentError unless at most one of a CSN, a transaction's own view and a tag is given."""
    if sum(x is not None for x in (csn, view, tag)) <= 1:
        return
    raise InvalidArgumentError("pass one of csn (a committed snapshot), tag (a named one) or txn (a transaction's own "
                               "view), not several")


def plan(rt: Runtime, table: str, csn: int | None = None, view: Statement | None = None, tag: str | None = None,
         partitions: Sequence[Mapping[str, Any]] | None = None) -> Planned:
    """The parts a read of `table` sees at snapshot `csn` (None: the readable watermark), at tag `tag`, or in the
    view of a transaction (`view`: its tid, snapshot, isolation and key; the read is then recorded in ONE catalog
    transaction as its isolation level asks, and under its key for retries). `partitions` limits it to those.
    InvalidArgumentError for several of csn/view/tag; TxnError for a CSN not readable yet; SnapshotTooOldError
    below the table's horizon; TagNotFoundError, TableNotInTagError, TableNotFoundError; the transaction's
    errors (TransactionClosedError, ...). At most 2 catalog round trips (a CSN above the watermark applies the
    pending commits first)."""
    check_one_of(csn, view, tag)
    if tag is not None:
        row, info = tags.resolve(rt, tag, table)
        keys = info.partition_keys(partitions)
        info, parts, schemas = _visible(rt, info, None, row.csn, keys)
        return Planned(info, parts, row.csn, None, row, schemas)
    if view is not None:
        return _plan_view(rt, table, view, partitions)
    if csn is not None:
        csn = bounds.catalog_int(csn, "csn", PREHISTORIC_CSN)
    with rt.catalog.read() as conn:
        watermark = rt.oracle.readable_csn(conn)
        named = table_registry.get(conn, table)
        pending = csn is not None and csn > watermark
        if not pending:
            snapshot = watermark if csn is None else csn
            info, horizon = _named_at(conn, named, snapshot)
    if pending:
        assert csn is not None
        apply.apply_pending(rt, up_to=csn)
        watermark = apply.readable_csn(rt)
        if csn > watermark:
            raise TxnError(f"CSN {csn} is not readable yet (watermark {watermark}); use wait_for_csn")
        snapshot = csn
        with rt.catalog.read() as conn:
            info, horizon = _named_at(conn, named, snapshot)
    if csn is not None:
        retention.check_table_readable(str(info.name), csn, horizon)
    keys = info.partition_keys(partitions)
    info, parts, schemas = _visible(rt, info, None, snapshot, keys)
    return Planned(info, parts, snapshot, None, None, schemas)


def _named_at(conn: Any, named: TableInfo, snapshot: int) -> tuple[TableInfo, int]:
    """The table a name (`named`, as table_registry finds it) means at `snapshot`, as a read there resolves it (a
    name another table holds today means the table that had it there: docs/DESIGN.md D27), and that table's stored
    retention horizon."""
    info = versions.table_at(conn, named, None, snapshot)
    return info, retention.table_horizon(conn, info.id)


def _plan_view(rt: Runtime, table: str, view: Statement,
               partitions: Sequence[Mapping[str, Any]] | None) -> Planned:
    recorded = view.isolation is not None and view.isolation.tracks_reads
    if not recorded and view.key is None:  # nothing to record: one read
        with rt.catalog.read() as conn:
            txn_records.require_usable(txn_records.fetch(conn, view.tid))
            info = versions.table_at(conn, table_registry.get(conn, table), view.tid, view.snapshot)
            keys = info.partition_keys(partitions)
            rows = part_records.visible_parts(conn, info.id, view.tid, view.snapshot, keys)
            schemas = versions.written_schemas(conn, info, rows)
        return Planned(info, tuple(rows), view.snapshot, view.tid, None, schemas)
    with rt.catalog.read() as conn:  # checked before anything is recorded (a bad table or partition)
        txn_records.require_usable(txn_records.fetch(conn, view.tid))
        info = versions.table_at(conn, table_registry.get(conn, table), view.tid, view.snapshot)
    keys = info.partition_keys(partitions)
    with rt.catalog.write() as conn:
        txn_records.lock_usable(conn, rt.catalog, view.tid)
        _record_read(conn, view, info.id, keys)
        rows = _own_view(conn, view, info.id, keys)
        schemas = versions.written_schemas(conn, info, rows)
    return Planned(info, tuple(rows), view.snapshot, view.tid, None, schemas)


def _own_view(conn: Any, view: Statement, table_id: int, keys: Sequence[str] | None) -> list[PartRow]:
    """What a read of the transaction's own view sees. Through a handle of a key's attempt: the view with the
    key's older attempts (and the keys that built on them) withdrawn, as its writes see it (staging.visible), so
    a newer attempt never reads what only an older one staged (withdrawn at its first write; invariant 7)."""
    if view.key is None or view.attempt is None:
        return part_records.visible_parts(conn, table_id, view.tid, view.snapshot, keys)
    withdrawn = retries.withdrawn(conn, view.tid, view.key, view.attempt)
    return part_records.visible_for_statement(conn, table_id, view.tid, view.snapshot, withdrawn, keys)


def _record_read(conn: Any, view: Statement, table_id: int, keys: Sequence[str] | None) -> None:
    """A transaction's read of `table_id` (`keys` None: all of it), recorded as its isolation level asks (the read
    set commit checks) and, through a keyed handle, for retries: a retry withdrawing what the read saw withdraws the
    reader's work too (retries.py). The caller holds the transaction's row lock (lock_usable)."""
    if view.isolation is not None:
        read = view.isolation.read_set(keys)
        if read:
            read_sets.add_reads(conn, view.tid, table_id, read)
    if view.key is not None:
        key_records.record_scan(conn, view.tid, view.key, view.attempt, table_id, list(keys or [WHOLE_TABLE]),
                                key_records.READ)


def _visible(rt: Runtime, info: TableInfo, tid: str | None, snapshot: int,
             keys: Sequence[str] | None) -> tuple[TableInfo, tuple[PartRow, ...], dict[int, pa.Schema]]:
    """The table as of the version visible at the snapshot, its visible parts, the other versions they were written
    under: one catalog read."""
    with rt.catalog.read() as conn:
        info = versions.table_at(conn, info, tid, snapshot)
        parts = tuple(part_records.visible_parts(conn, info.id, tid, snapshot, keys))
        return info, parts, versions.written_schemas(conn, info, parts)


def read_planned(rt: Runtime, planned: Planned, filter: object = None) -> pa.Table:
    """The rows of a planned read, optionally filtered: the tag confirmed after the files were read; a missing file
    of a snapshot that meanwhile fell below the table's horizon is a SnapshotTooOldError (vacuum removed it)."""
    info = planned.info
    predicate = check_filter(filter, info)
    try:
        pieces = [versions.read_part(rt, info, p, planned.schemas) for p in planned.parts]
    except StorageError as exc:
        planned.confirm(rt)  # the tag went away meanwhile: say so rather than name a missing file
        if planned.tid is None and planned.tag is None:
            horizon = retention.horizon_of(rt, info.id)
            if planned.snapshot < horizon:
                raise SnapshotTooOldError(f"table {info.name}: CSN {planned.snapshot} is past its retention horizon "
                                          f"{horizon}; read a newer one") from exc
        raise
    planned.confirm(rt)
    result = pa.concat_tables(pieces) if pieces else info.schema.empty_table()
    return result.filter(predicate) if predicate is not None else result
