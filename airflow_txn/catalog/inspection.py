"""Looking at a catalog database without opening it as a Catalog (`airflow-txn doctor`): which of
airflow_txn's tables it lacks and the schema version it records, over one short-lived connection with a
connect timeout, and the Alembic revision it records. Nothing is created or written (Catalog.initialize
would create a missing catalog)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import create_engine, inspect
from sqlalchemy.engine import URL
from sqlalchemy.pool import NullPool

from airflow_txn.catalog import meta_records, migrate, schema


@dataclass(frozen=True, slots=True)
class CatalogLook:
    missing_tables: list[str]
    """airflow_txn's tables the database does not hold (sorted; empty: all there)."""
    schema_version: str | None
    """The schema version txn_meta records (None: no meta table, or no version row)."""
    revision: str | None
    """The Alembic revision txn_alembic_version records (None: no such table: new or pre-Alembic)."""
    warehouse_id: str | None = None
    """The warehouse id txn_meta records (None: none claimed yet: meta_records.warehouse_id)."""
    min_client_version: str | None = None
    """The oldest client schema version txn_meta says may use the catalog (None: not recorded: migrate.py)."""
    index_version: str | None = None
    """The index version txn_meta records (None: not recorded, a catalog older than index versions)."""


def look(url: URL, timeout: float) -> CatalogLook:
    """Connect (PostgreSQL: within `timeout` seconds, at least 1) and read the table names and the
    schema version. Raises SQLAlchemyError (or ImportError for a missing driver) if it cannot."""
    connect_args = {"connect_timeout": max(1, round(timeout))} if url.get_backend_name() == "postgresql" else {}
    engine = create_engine(url, poolclass=NullPool, connect_args=connect_args)
    try:
        with engine.connect() as conn:
            present = set(inspect(conn).get_table_names())
            version = warehouse_id = min_client = index = None
            if schema.meta.name in present:
                version = meta_records.value(conn, meta_records.SCHEMA_VERSION_KEY)
                warehouse_id = meta_records.value(conn, meta_records.WAREHOUSE_ID_KEY)
                min_client = meta_records.value(conn, migrate.MIN_CLIENT_KEY)
                index = meta_records.value(conn, "index_version")
            revision = migrate.recorded_revision(conn) if migrate.VERSION_TABLE in present else None
            return CatalogLook(sorted(set(schema.metadata.tables) - present), version, revision, warehouse_id,
                               min_client, index)
    finally:
        engine.dispose()
