"""This package's version (pyproject.toml's `version`), `airflow_txn.__version__`: here, in the foundation,
so that the catalog (its refusals name the client's version) and the core read it without importing the
root package, whose lazy names reach the Warehouse."""

from __future__ import annotations

VERSION = "0.1.0"
