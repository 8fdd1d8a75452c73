"""Checking and conforming incoming data to a table's Arrow schema (invariant 9: reject before writing)."""

from __future__ import annotations

import pyarrow as pa

from airflow_txn.errors import SchemaMismatchError
from airflow_txn.model.types import check_values


def conform(data: object, schema: pa.Schema, table: str) -> pa.Table:
    """Return `data` with exactly `schema`, or raise SchemaMismatchError listing every difference.

    Columns must have the table's names, in its order, with identical types; a non-nullable column
    must hold no nulls. Nothing is converted silently.
    """
    if isinstance(data, pa.RecordBatch):
        data = pa.Table.from_batches([data])
    if not isinstance(data, pa.Table):
        raise SchemaMismatchError(f"data for {table} must be a pyarrow.Table, got {type(data).__name__}")
    problems = _differences(data.schema, schema)
    problems += [
        f"column {f.name!r} is not nullable but holds {data[f.name].null_count} null(s)"
        for f in schema
        if not f.nullable and data.column_names.count(f.name) == 1 and data[f.name].null_count
    ]
    if problems:
        raise SchemaMismatchError(f"data does not match the schema of {table}: " + "; ".join(problems))
    conformed = pa.Table.from_arrays(data.columns, schema=schema)
    check_values(conformed, table)
    return conformed


def _differences(got: pa.Schema, want: pa.Schema) -> list[str]:
    problems: list[str] = []
    missing = [n for n in want.names if n not in got.names]
    extra = [n for n in got.names if n not in want.names]
    if missing:
        problems.append(f"missing column(s) {missing}")
    if extra:
        problems.append(f"unknown column(s) {extra}")
    if len(set(got.names)) != len(got.names):
        problems.append(f"duplicate column names in {got.names}")
    if not missing and not extra and got.names != want.names:
        problems.append(f"columns are in order {got.names}, the table has {want.names}")
    for field in want:
        if got.names.count(field.name) == 1 and got.field(field.name).type != field.type:
            problems.append(f"column {field.name!r} is {got.field(field.name).type}, the table has {field.type}")
    return problems

