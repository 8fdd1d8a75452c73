"""Lazy reads for Python engines: a planned read (exactly the visible parts at one snapshot) as a
`pyarrow.dataset.Dataset`, and the tables of one snapshot as DuckDB views over such datasets.

A dataset reads nothing until it is scanned: DuckDB, Polars (`pl.scan_pyarrow_dataset`) or `to_table(filter=...)`
push projections and filters into the Parquet reader, which skips row groups by their statistics. It holds exactly
the planned parts' files, on the root's own filesystem (an object store through pyarrow.fs: DuckDB needs no
httpfs extension), each file with its partition's values as its partition expression, so the partition columns
read as their values and a filter on them skips whole files. Files are read in the table's types (a Spark-written
file's INT96 timestamps as microseconds, as the core reads them).

The snapshot must stay readable while the dataset is scanned (inside the retention window, or a tag): vacuum may
delete a file of a snapshot that fell behind the horizon. Views at a CSN or a tag name one consistent version of
every table they register (the point of a CSN).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from airflow_txn.catalog.part_records import PartRow
from airflow_txn.catalog.table_registry import TableInfo
from airflow_txn.core import reading, versions
from airflow_txn.core.runtime import Runtime
from airflow_txn.model.partitioning import text_to_value
from airflow_txn.storage.root import Storage


class DuckDBConnection(Protocol):
    """What Warehouse.duckdb needs of a DuckDB connection (`duckdb.connect()`): the core never imports duckdb."""

    def register(self, view_name: str, python_object: object, /) -> object: ...

    def execute(self, query: str, /) -> object: ...

PARQUET = ds.ParquetFileFormat(read_options=ds.ParquetReadOptions(coerce_int96_timestamp_unit="us"))
"""Spark writes timestamps as INT96 by default: read as microseconds, Spark's own precision (storage/root.py)."""


def plan(rt: Runtime, table: str, csn: int | None = None, tag: str | None = None) -> reading.Planned:
    """The parts a read of `table` sees at `csn` (None: the watermark) or at tag `tag`: the core's read planner,
    with every read's checks (SnapshotTooOldError, TagNotFoundError, TableNotInTagError, TableNotFoundError)."""
    return reading.plan(rt, table, csn=csn, tag=tag)


def planned_dataset(rt: Runtime, planned: reading.Planned) -> ds.Dataset:
    """A planned read as a dataset: the parts written under the version the read uses stay lazy files; parts
    written under another version of the table's schema (docs/DESIGN.md, D27) are read and projected now (a
    renamed column or a default has no lazy form in a pyarrow dataset), kept in memory beside them."""
    info = planned.info
    mine = [p for p in planned.parts if p.schema_version == info.version]
    if len(mine) == len(planned.parts):
        return dataset_of(rt.storage, info, planned.parts)
    others = [versions.read_part(rt, info, p, planned.schemas)
              for p in planned.parts if p.schema_version != info.version]
    schema = info.schema.remove_metadata()
    projected = ds.dataset(pa.concat_tables([t.cast(schema) for t in others]))
    if not mine:
        return projected
    return ds.dataset([dataset_of(rt.storage, info, mine), projected])


def dataset_of(storage: Storage, info: TableInfo, parts: Sequence[PartRow]) -> ds.Dataset:
    """The files of `parts` (all of `info`'s table) as one lazy dataset of the table's schema."""
    paths: list[str] = []
    partitions: list[pc.Expression] = []
    for part in parts:
        guarantee = _partition_expression(info, part)
        for path in storage.part_paths(info.directory, part.path, part.files):
            paths.append(path)
            partitions.append(guarantee)
    schema = info.schema.remove_metadata()
    if not paths:
        return ds.dataset(schema.empty_table())
    return ds.FileSystemDataset.from_paths(paths, schema=schema, format=PARQUET, filesystem=storage.fs,
                                           partitions=partitions)


def _partition_expression(info: TableInfo, part: PartRow) -> pc.Expression:
    """What every row of the part holds in the partition columns (true: the table has none)."""
    guarantee: pc.Expression = pc.scalar(True)
    for column, text in part.partition.items():
        field = pc.field(column)
        holds = field.is_null() if text is None else field == text_to_value(text, info.schema.field(column).type)
        guarantee = guarantee & holds
    return guarantee


def register_views(connection: DuckDBConnection, datasets: dict[str, ds.Dataset], suffix: str) -> list[str]:
    """Register each dataset ({"ns.table": dataset}) in `connection` and make the view `ns.table` (schema `ns`)
    over it, replacing a view of that name; returns the view names. `suffix` makes the registered objects'
    names unique per snapshot, so views of two snapshots can live in one connection under other names."""
    made = []
    for qualified, dataset in datasets.items():
        namespace, table = qualified.split(".", 1)
        hidden = f"__airflow_txn_{namespace}_{table}_{suffix}"
        connection.register(hidden, dataset)
        connection.execute(f"CREATE SCHEMA IF NOT EXISTS {_quote(namespace)}")
        view = f"{_quote(namespace)}.{_quote(table)}"  # identifiers quoted; table names are checked names
        connection.execute(f"CREATE OR REPLACE VIEW {view} AS SELECT * FROM {_quote(hidden)}")  # noqa: S608
        made.append(qualified)
    return made


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'

