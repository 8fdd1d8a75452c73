"""The catalog: a SQL database (SQLite or PostgreSQL) reached through SQLAlchemy Core."""

from airflow_txn.catalog.database import Catalog, State

__all__ = ["Catalog", "State"]
