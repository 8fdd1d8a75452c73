"""Reading a table at a snapshot: the visible parts (invariant 2) read from storage and filtered."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from airflow_txn.catalog import part_records
from airflow_txn.catalog.table_registry import TableInfo
from airflow_txn.core.runtime import Runtime
from airflow_txn.errors import SchemaMismatchError


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
