"""The catalog's clock: the database's time (epoch seconds), by which every lease is set and judged.

A lease deadline is written and compared inside the catalog's own statements (`catalog_now()` is a SQL
expression, so it costs no round trip), never with the clock of the machine that happens to act: a
worker whose clock runs ahead cannot roll back a live transaction or delete its files, and one whose
clock runs behind cannot keep an expired one alive. PostgreSQL: `clock_timestamp()` of the server (all
clients share it). SQLite: the time of the machine that holds the database file (every client runs
there), read by SQLite itself, so a process that patches or skews its own `time.time()` changes nothing.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, Float, select
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement


class CatalogNow(FunctionElement[float]):
    """The database's current time in epoch seconds, as a SQL expression (a float)."""

    type = Float()
    inherit_cache = True
    name = "catalog_now"


def catalog_now() -> CatalogNow:
    """The catalog's time, to use inside a statement (compiled for the catalog's dialect)."""
    return CatalogNow()


@compiles(CatalogNow)
def _standard(_element: CatalogNow, _compiler: SQLCompiler, **_kw: Any) -> str:
    return "CAST(EXTRACT(EPOCH FROM CURRENT_TIMESTAMP) AS DOUBLE PRECISION)"


@compiles(CatalogNow, "postgresql")
def _postgresql(_element: CatalogNow, _compiler: SQLCompiler, **_kw: Any) -> str:
    return "CAST(EXTRACT(EPOCH FROM clock_timestamp()) AS DOUBLE PRECISION)"


@compiles(CatalogNow, "sqlite")
def _sqlite(_element: CatalogNow, _compiler: SQLCompiler, **_kw: Any) -> str:
    return "((julianday('now') - 2440587.5) * 86400.0)"  # the Julian day of 1970-01-01 is 2440587.5


_NOW = select(catalog_now())


def now(conn: Connection) -> float:
    """The catalog's time now (one statement; inside other statements use `catalog_now()`)."""
    return float(conn.execute(_NOW).scalar_one())
