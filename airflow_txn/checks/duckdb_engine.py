"""The DuckDB engine of the checks: views over the Parquet files of the transaction's manifest.

Each table's view reads exactly the files `Transaction.manifest` lists (its snapshot plus its staged
parts): one `read_parquet([...])` per partition, the partition columns (never stored in the files) added as
typed literals, glued with UNION ALL, as docs/MANIFESTS.md reads a manifest. DuckDB scans the files itself
(in parallel, only the columns a check uses), so a check reads no table into memory. On an object-store
root DuckDB would need its httpfs extension (downloaded at run time), so there each table is read
through the core into Arrow first (memory-bound: use engine="spark" for large tables there).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from airflow_txn.model.results import TableManifest

if TYPE_CHECKING:
    from airflow_txn.core.transaction import Transaction


def quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _import_duckdb() -> Any:
    try:
        import duckdb
    except ImportError as exc:
        raise ImportError("the checks' DuckDB engine needs DuckDB: pip install 'airflow-txn[checks]'") from exc
    return duckdb


def view_sql(manifest: TableManifest, types: Mapping[str, str]) -> str | None:
    """The SELECT reading a table's manifest with its columns in order (`types`: column -> DuckDB type);
    None when it lists no part."""
    by_partition: dict[tuple[tuple[str, str | None], ...], list[str]] = {}
    for part in manifest["parts"]:
        key = tuple((c, part["partition"].get(c)) for c in manifest["partition_by"])
        by_partition.setdefault(key, []).extend(f["path"] for f in part["files"])
    selects = []
    for key, files in by_partition.items():
        values = dict(key)
        columns = [f"CAST({'NULL' if values[c] is None else _literal(str(values[c]))} AS {types[c]}) AS {quote(c)}"
                   if c in values else quote(c) for c in types]
        listed = ", ".join(_literal(f) for f in files)
        selects.append(f"SELECT {', '.join(columns)} FROM read_parquet([{listed}], union_by_name = true)")  # noqa: S608
    return " UNION ALL ".join(selects) or None


class DuckDBEngine:
    """Checks evaluated by DuckDB (an in-memory database per run) over the transaction's files."""

    name = "duckdb"

    def __init__(self, threads: int | None = None) -> None:
        self.threads = threads

    def quote(self, identifier: str) -> str:
        return quote(identifier)

    @contextmanager
    def views(self, txn: Transaction, views: Mapping[str, str]) -> Iterator[Callable[[str], object]]:
        duckdb = _import_duckdb()
        manifests = txn.manifest(list(views))
        con = duckdb.connect(":memory:")
        try:
            if self.threads is not None:
                con.execute(f"SET threads = {int(self.threads)}")
            for table, view in views.items():
                self._create_view(con, txn, table, view, manifests[table])
            yield lambda sql: con.execute(sql).fetchone()[0]
        finally:
            con.close()

    def _create_view(self, con: Any, txn: Transaction, table: str, view: str, manifest: TableManifest) -> None:
        schema: pa.Schema = txn.warehouse.schema(table)
        on_object_store = any("://" in f["path"] for p in manifest["parts"] for f in p["files"])
        if on_object_store:
            con.register(view, txn.read(table))
            return
        types = dict(zip(schema.names, (str(t) for t in con.from_arrow(schema.empty_table()).types), strict=True))
        select = view_sql(manifest, types)
        if select is None:
            con.register(view, schema.empty_table())
        else:
            con.execute(f"CREATE VIEW {quote(view)} AS {select}")
