"""`merge_schema`: a Spark write that adds the DataFrame's new columns (and widens the columns it holds wider) to the
table in the same statement (docs/CONCEPTS.md, "Changing tables"; docs/DESIGN.md, D27 point 5).

    txn_spark.write(df, t, "shop.orders", merge_schema=True)
    df.write.format("airflow_txn").option("tid", t.tid).option("mergeSchema", "true").mode("append").save(...)

The DataFrame is checked first against the schema the table would have (the version its transaction sees, its own
changes included, plus the changes): a column it lacks, a narrowing, a type no widening reaches is
SchemaMismatchError, nothing staged. Then each change is the core's own statement (Transaction.add_column: a new
column, nullable, in Spark's type for it; Transaction.alter_column: a widening the core allows) under the write's
key and attempt, so a retried task's attempt replaces them with its data; then the write, which checks the DataFrame
against the new version. A key given without an attempt makes every statement under it replace the earlier ones (the
write would withdraw the changes it needs): refused with InvalidArgumentError, before anything is staged.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import types as T

from airflow_txn.core.adapter import stored_table
from airflow_txn.core.transaction import Transaction
from airflow_txn.errors import InvalidArgumentError, SchemaMismatchError, UnsupportedTypeError
from airflow_txn.model import evolution
from airflow_txn.spark.types import check_frame_schema, to_arrow_type, writable

Change = tuple[str, str, pa.DataType]
"""("add", column, its Arrow type) or ("widen", column, the new type)."""


def changes_for(spark_schema: T.StructType, table_schema: pa.Schema, table: str,
                partition_by: tuple[str, ...]) -> tuple[pa.Schema, list[Change]]:
    """The schema `table` would have once a DataFrame of `spark_schema` merged into it, and the changes that make
    it: each column the table lacks added (nullable, the Arrow type of its Spark type), each column whose Spark type
    the table's type cannot hold widened where the core allows it (evolution.is_widening). Checked as the core
    checks a change (a partition column is never widened); what no change reaches is left for check_frame_schema."""
    schema = table_schema
    found: list[Change] = []
    for column in spark_schema.fields:
        try:
            wanted = to_arrow_type(column.dataType)
        except UnsupportedTypeError as exc:
            raise SchemaMismatchError(f"merge_schema into {table}: column {column.name!r}: {exc}") from exc
        if column.name not in schema.names:
            schema, _ = evolution.add_column(schema, pa.field(column.name, wanted, True), table=table,
                                             partition_by=partition_by)
            found.append(("add", column.name, wanted))
            continue
        current = schema.field(column.name).type
        if writable(column.dataType, current) or not evolution.is_widening(current, wanted):
            continue  # fits as it is, or no widening reaches it: check_frame_schema names it
        schema, _ = evolution.alter_column(schema, column.name, wanted, table=table, partition_by=partition_by)
        found.append(("widen", column.name, wanted))
    return schema, found


def merge_schema(txn: Transaction, table: str, spark_schema: T.StructType, key: str | None) -> int:
    """Stage the changes a write of a DataFrame of `spark_schema` into `table` needs (changes_for), under the
    write's `key` (None: the handle's default key and attempt); returns how many. SchemaMismatchError (nothing
    staged) when the DataFrame would not fit even then; InvalidArgumentError for a key without an attempt."""
    stored = stored_table(txn.warehouse, table, txn=txn)
    merged, changes = changes_for(spark_schema, stored.schema, stored.name, stored.partition_by)
    check_frame_schema(spark_schema, merged, stored.name)
    if not changes:
        return 0
    attempt = None if key is not None else txn.default_attempt
    if (key or txn.default_key) is not None and attempt is None:
        raise InvalidArgumentError(
            f"merge_schema into {stored.name} under key {key or txn.default_key!r} needs the key's attempt (a handle "
            "of wh.attach(tid).use_key(key, attempt), as an Airflow task's): a key without one makes each statement "
            "under it replace the earlier ones, so the write would withdraw its own table changes. Nothing was staged")
    for kind, name, type_ in changes:
        if kind == "add":
            txn.add_column(table, pa.field(name, type_, True), key=key)
        else:
            txn.alter_column(table, name, type_, key=key)
    return len(changes)
