"""Statements run on the driver's own cursor (catalog/database.py, `driver_rows`; docs/DESIGN.md, D34): the rows
SQLAlchemy's execution gives, a driver error raised as SQLAlchemy raises it (nothing else of the catalog changes,
the next read works), and a statement SQLAlchemy must render per execution refused up front. SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from sqlalchemy.exc import DBAPIError

from airflow_txn.catalog import Catalog, database, schema


@pytest.fixture
def catalog(catalog_url: str) -> Iterator[Catalog]:
    made = Catalog(catalog_url)
    made.initialize()
    yield made
    made.dispose()


def test_the_driver_gives_what_sqlalchemy_gives(catalog: Catalog) -> None:
    stmt = sa.select(schema.counters.c.name, schema.counters.c.value, sa.literal(7).label("seven")).where(
        schema.counters.c.name != sa.bindparam("skip", type_=sa.String())).order_by(schema.counters.c.name)
    with catalog.read() as conn:
        names, rows = database.driver_rows(conn, database.driver_statement(stmt, conn.dialect), {"skip": "none"})
        expected = conn.execute(stmt, {"skip": "none"})
        assert names == list(expected.keys())
        assert [tuple(r) for r in rows] == [tuple(r) for r in expected.all()]
        assert rows


def test_a_driver_error_is_sqlalchemys_and_the_catalog_reads_on(catalog: Catalog) -> None:
    missing = database.driver_statement(sa.select(sa.column("x")).select_from(sa.table("no_such_table")),
                                        catalog.engine.dialect)
    with pytest.raises(DBAPIError, match="no_such_table") as raised, catalog.read() as conn:
        database.driver_rows(conn, missing, {})
    assert not raised.value.connection_invalidated
    with catalog.read() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(schema.counters)).scalar_one() > 0


def test_an_in_list_statement_is_refused(catalog: Catalog) -> None:
    stmt = sa.select(schema.counters.c.name).where(schema.counters.c.name.in_(sa.bindparam("names", expanding=True)))
    with pytest.raises(ValueError, match="expanding"):
        database.driver_statement(stmt, catalog.engine.dialect)
