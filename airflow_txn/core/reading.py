"""Reading a table at a snapshot: which snapshot a read at a CSN uses, and the visible parts (invariant 2)
read from storage and filtered; at a tag, the tag's CSN with no horizon check (its parts are pinned) and
the tag confirmed to still exist once the files were read (core/tags.py)."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from airflow_txn.catalog import part_records
from airflow_txn.catalog.table_registry import TableInfo
from airflow_txn.core import apply, bounds, retention, tags
from airflow_txn.core.runtime import Runtime
from airflow_txn.errors import SchemaMismatchError, StorageError, TxnError
from airflow_txn.model.csn import PREHISTORIC_CSN
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
    predicate = check_filter(filter, info)
    with rt.catalog.read() as conn:
        parts = part_records.visible_parts(conn, info.id, tid, snapshot, partition_keys)
    pieces = [
        rt.storage.read_part(info.directory, p.path, p.files, info.schema, p.partition) for p in parts
    ]
    table = pa.concat_tables(pieces) if pieces else info.schema.empty_table()
    if predicate is not None:
        table = table.filter(predicate)
    return table


def read_at_tag(rt: Runtime, name: str, table: str, filter: object = None,
                partitions: PartitionSpec | None = None) -> pa.Table:
    """The rows of `table` at tag `name` (TagNotFoundError, TableNotInTagError), optionally filtered and
    limited to `partitions`. Needs no transaction: a tag's content never changes."""
    row, info = tags.resolve(rt, name, table)
    keys = info.partition_keys(partitions)
    try:
        result = read(rt, info, None, row.csn, filter, keys)
    except StorageError:
        tags.confirm(rt, row)  # the tag went away meanwhile: say so rather than name a missing file
        raise
    tags.confirm(rt, row)
    return result
