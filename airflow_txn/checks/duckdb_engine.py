"""The DuckDB engine of the checks: views over the Parquet files of the transaction's manifest.

Each table's view reads exactly the files `Transaction.manifest` lists (its snapshot plus its staged
parts): one `read_parquet([...])` per partition, the partition columns (never stored in the files) added as
typed constants, glued with UNION ALL, as docs/MANIFESTS.md reads a manifest. The views are built with
DuckDB's relational API, so no path or partition value is ever SQL text. DuckDB scans the files itself
(in parallel, only the columns a check uses), so a check reads no table into memory. On an object-store
root DuckDB would need its httpfs extension (downloaded at run time), so there each table is read
through the core into Arrow first (memory-bound: use engine="spark" for large tables there).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from airflow_txn.model.options import CheckEngine
from airflow_txn.model.results import TableManifest

if TYPE_CHECKING:
    from airflow_txn.core.transaction import Transaction


def quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def _import_duckdb() -> Any:
    try:
        import duckdb
    except ImportError as exc:
        raise ImportError("the checks' DuckDB engine needs DuckDB: pip install 'airflow-txn[checks]'") from exc
    return duckdb


def view_relation(con: Any, manifest: TableManifest, types: Mapping[str, Any]) -> Any:
    """The DuckDB relation reading a table's manifest with its columns in order (`types`: column -> DuckDB
    type), built with DuckDB's relational API: the file paths and partition values are arguments, never SQL
    text (invariant 10). None when it lists no part."""
    duckdb = _import_duckdb()
    by_partition: dict[tuple[tuple[str, str | None], ...], list[str]] = {}
    for part in manifest["parts"]:
        key = tuple((c, part["partition"].get(c)) for c in manifest["partition_by"])
        by_partition.setdefault(key, []).extend(f["path"] for f in part["files"])
    found = None
    for key, files in by_partition.items():
        values = dict(key)
        columns = [(duckdb.ConstantExpression(values[c]).cast(types[c]) if c in values
                    else duckdb.ColumnExpression(c)).alias(c) for c in types]
        relation = con.read_parquet(files, union_by_name=True).select(*columns)
        found = relation if found is None else found.union(relation)  # UNION ALL: every row of every part
    return found


class DuckDBEngine:
    """Checks evaluated by DuckDB (an in-memory database per run) over the transaction's files."""

    name: str = CheckEngine.DUCKDB.value

    def __init__(self, threads: int | None = None) -> None:
        self.threads = threads

    def quote(self, identifier: str) -> str:
        return quote(identifier)

    @contextmanager
    def views(self, txn: Transaction, views: Mapping[str, str]) -> Iterator[Callable[[str], object]]:
        duckdb = _import_duckdb()
        manifests = txn.manifest(list(views))
        con = duckdb.connect(":memory:", config={} if self.threads is None else {"threads": int(self.threads)})
        try:
            for table, view in views.items():
                self._create_view(con, txn, table, view, manifests[table])
            yield lambda sql: con.execute(sql).fetchone()[0]
        finally:
            con.close()

    def _create_view(self, con: Any, txn: Transaction, table: str, view: str, manifest: TableManifest) -> None:
        schema: pa.Schema = txn.schema(table)
        on_object_store = any("://" in f["path"] for p in manifest["parts"] for f in p["files"])
        projected = any("columns" in p for p in manifest["parts"])  # files it would misread by name: the core reads
        if on_object_store or projected:
            con.register(view, txn.read(table))
            return
        types = dict(zip(schema.names, con.from_arrow(schema.empty_table()).types, strict=True))
        relation = view_relation(con, manifest, types)
        if relation is None:
            con.register(view, schema.empty_table())
        else:
            relation.create_view(view)
