"""The warehouse's stable identity: the warehouse id its catalog keeps (catalog/meta_records.py).

A warehouse is named by this id, never by how it is reached: the same catalog through two Airflow
connections, a renamed connection, or a catalog URL that changed host is one warehouse; a new catalog
is another. Airflow Asset URIs (airflow/assets/tables.py) and lineage names carry it.
"""

from __future__ import annotations

from airflow_txn.catalog import Catalog, meta_records


def warehouse_id(catalog: Catalog) -> str:
    """The id `catalog` keeps; a catalog made before ids existed claims one (one write, the first time)."""
    with catalog.read() as conn:
        found = meta_records.value(conn, meta_records.WAREHOUSE_ID_KEY)
    if found is not None:
        return found
    with catalog.write() as conn:
        return meta_records.warehouse_id(conn)


def warehouse_id_at(catalog_url: str, where: str | None = None, connect_timeout: float | None = None) -> str:
    """The warehouse id of the catalog at `catalog_url`, opening neither storage nor the oracle (what an
    Airflow DAG file needs while it is parsed). Creates nothing: a catalog that does not exist raises
    WarehouseNotFoundError naming it (`where`, default the catalog URL), and a SQLite file stays unmade
    (docs/DESIGN.md, D16 and D17). A catalog made before ids existed claims its id here (its one write)."""
    catalog = Catalog(catalog_url, where=where, connect_timeout=connect_timeout)
    try:
        return warehouse_id(catalog)
    finally:
        catalog.dispose()
