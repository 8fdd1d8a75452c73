"""Alembic's environment for the catalog's migrations (versions/): it runs them on the connection the
caller hands in, inside the caller's transaction, which already holds the catalog's schema lock.

airflow_txn.catalog.migrate drives it (`Catalog.initialize`, `airflow-txn init`, `airflow-txn upgrade`):
there is no alembic.ini and no URL here. This directory is not a Python package on purpose: nothing
imports this file, Alembic runs it (an import outside Alembic would find no migration context).
"""

from __future__ import annotations

from alembic import context

from airflow_txn.catalog import migrate

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("the catalog's migrations run through airflow_txn.catalog.migrate "
                       "(`airflow-txn upgrade`), on a connection it hands in")
context.configure(connection=connection, **migrate.context_options())
with context.begin_transaction():
    context.run_migrations()
