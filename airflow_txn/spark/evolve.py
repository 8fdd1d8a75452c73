"""`merge_schema`: a Spark write that adds the DataFrame's new columns (and widens the columns it holds wider) to the
table in the same statement (docs/CONCEPTS.md, "Changing tables"; docs/DESIGN.md, D27 point 5).

    txn_spark.write(df, t, "shop.orders", merge_schema=True)
    df.write.format("airflow_txn").option("tid", t.tid).option("mergeSchema", "true").mode("append").save(...)

Which changes the DataFrame needs is the core's decision (model/evolution.merge_schema, the one the core's own
`Transaction.append(..., merge_schema=True)` takes), given the DataFrame's columns in their Arrow types and Spark's
own rule for what a column takes as it is (types.writable). The DataFrame is checked first against the schema the
table would have (the version its transaction sees, its own changes included, plus the changes): a column it lacks,
a narrowing, a type no widening reaches is SchemaMismatchError naming the column, nothing staged. Then each change
is the core's own statement (Transaction.add_column: a new column, nullable, in Spark's type for it;
Transaction.alter_column: a widening the core allows) under the write's key and attempt, so a retried task's attempt
replaces them with its data; then the write, which checks the DataFrame against the new version. A key given without
an attempt makes every statement under it replace the earlier ones (the write would withdraw the changes it needs):
refused with InvalidArgumentError, before anything is staged. (The core's own merge_schema stages the changes and the
rows in one statement, so a key needs no attempt there.)
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import types as T

from airflow_txn.core.adapter import stored_table
from airflow_txn.core.transaction import Transaction
from airflow_txn.errors import InvalidArgumentError, UnsupportedTypeError
from airflow_txn.model import evolution
from airflow_txn.spark.types import check_frame_schema, to_arrow_schema, writable


def changes_for(spark_schema: T.StructType, table_schema: pa.Schema, table: str,
                partition_by: tuple[str, ...]) -> evolution.SchemaMerge:
    """The schema `table` would have once a DataFrame of `spark_schema` merged into it, and the changes that make
    it, as the core decides them for any data schema (evolution.merge_schema): the DataFrame's columns in their Arrow
    types, a column fitting the table's as Spark writes it (writable) needing no change. SchemaMismatchError naming
    the column for what no change reaches (a narrowing, a type no widening reaches, a partition column;
    UnsupportedTypeError, as the core, for a column of a type no table may hold)."""
    try:
        data_schema = to_arrow_schema(spark_schema)
    except UnsupportedTypeError as exc:  # "column 'x': ..."
        raise UnsupportedTypeError(f"merge_schema into {table}: {exc}") from exc
    spark_types = {column.name: column.dataType for column in spark_schema.fields}
    return evolution.merge_schema(table_schema, data_schema, table=table, partition_by=partition_by,
                                  fits=lambda name, type_: writable(spark_types[name], type_))


def merge_schema(txn: Transaction, table: str, spark_schema: T.StructType, key: str | None) -> int:
    """Stage the changes a write of a DataFrame of `spark_schema` into `table` needs (changes_for), under the
    write's `key` (None: the handle's default key and attempt); returns how many. SchemaMismatchError (nothing
    staged) when the DataFrame would not fit even then; InvalidArgumentError for a key without an attempt."""
    stored = stored_table(txn.warehouse, table, txn=txn)
    merged = changes_for(spark_schema, stored.schema, stored.name, stored.partition_by)
    check_frame_schema(spark_schema, merged.schema, stored.name)
    if not merged.changes:
        return 0
    attempt = None if key is not None else txn.default_attempt
    if (key or txn.default_key) is not None and attempt is None:
        raise InvalidArgumentError(
            f"merge_schema into {stored.name} under key {key or txn.default_key!r} needs the key's attempt (a handle "
            "of wh.attach(tid).use_key(key, attempt), as an Airflow task's): a key without one makes each statement "
            "under it replace the earlier ones, so the write would withdraw its own table changes. Nothing was staged")
    for change in merged.changes:
        field = merged.schema.field(change.column)
        if change.kind == "add_column":
            txn.add_column(table, pa.field(field.name, field.type, True), key=key)
        else:
            txn.alter_column(table, field.name, field.type, key=key)
    return len(merged.changes)
