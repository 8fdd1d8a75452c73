"""MERGE of a DataFrame into a table (Transaction.merge, docs/CONCEPTS.md "MERGE"): the source DataFrame is
collected to the driver as Arrow (a MERGE's source is a batch of changes: a day of CDC, a dimension's new rows),
its columns cast to the table's types with every value checked to fit, and the core does the rest: it reads and
rewrites only the parts that can hold a matching key and appends the unmatched rows, in one statement of the
transaction. It works the same on a local session and through Spark Connect, on any root; the target table is
never read by Spark. A source too large for the driver is better written as an overwrite of its partitions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pyarrow as pa
from pyspark.sql import DataFrame

from airflow_txn.core.adapter import stored_table
from airflow_txn.core.transaction import Transaction
from airflow_txn.errors import SchemaMismatchError
from airflow_txn.model.results import MergeCounts
from airflow_txn.spark.types import writable


def merge(df: DataFrame, txn: Transaction, table: str, on: Sequence[str] | str,
          when_matched: str | Mapping[str, object] = "update", when_not_matched: str = "insert",
          when_not_matched_by_source: str = "keep", key: str | None = None) -> MergeCounts:
    """Upsert the rows of `df` into `table` within `txn`, as `Transaction.merge` does with a pyarrow.Table (the
    same clauses, the same refusals before anything is staged); returns {updated, inserted, deleted}. `df` may hold
    every column of the table, or (deleting, or setting columns from expressions) the key columns and those it
    sets; each column in Spark's type for the table's (docs/TYPES.md), each value checked to fit."""
    schema = stored_table(txn.warehouse, table, txn=txn).schema  # as the transaction sees it, its changes included
    unknown = [f.name for f in df.schema.fields if f.name not in schema.names]
    if unknown:
        raise SchemaMismatchError(f"merge into {table}: the source has column(s) {unknown} the table has not")
    wrong = [f"{f.name!r} is {f.dataType.simpleString()}, the table has {schema.field(f.name).type}"
             for f in df.schema.fields if not writable(f.dataType, schema.field(f.name).type)]
    if wrong:
        raise SchemaMismatchError(f"merge into {table}: source column " + "; ".join(wrong))
    source = df.toArrow()
    target = pa.schema([schema.field(name).with_nullable(True) for name in source.column_names])
    try:
        source = source.cast(target, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise SchemaMismatchError(f"merge into {table}: a source value does not fit its column: {exc}") from exc
    return txn.merge(table, source, on, when_matched, when_not_matched, when_not_matched_by_source, key)
