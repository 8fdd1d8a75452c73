"""Looking at a catalog database without opening it as a Catalog (`airflow-txn doctor`): which of
airflow_txn's tables it lacks and the schema version it records, over one short-lived connection with a
connect timeout, and the Alembic revision it records. Nothing is created or written (Catalog.initialize
would create a missing catalog).

Also, over a connection of an open catalog, what it holds: rows and bytes per catalog table (`table_sizes`)
and part rows by state (`part_states`), for sizing a deployment (benchmarks/b16_year.py, docs/DEPLOYMENT.md)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Connection, and_, create_engine, func, select, text
from sqlalchemy.engine import URL
from sqlalchemy.exc import OperationalError
from sqlalchemy.pool import NullPool
from sqlalchemy.sql.elements import ColumnElement

from airflow_txn.catalog import meta_records, migrate, schema
from airflow_txn.model.csn import ROLLBACK_CSN


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
            present = migrate.catalog_tables(conn)
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


# -- what an open catalog holds ---------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class TableSize:
    rows: int
    bytes: int | None
    """Bytes on disk of the table and its indexes (SQLite: its pages, through dbstat; PostgreSQL:
    pg_total_relation_size); None where the database cannot tell (a SQLite built without dbstat)."""


_SQLITE_PAGES = text(  # dbstat names tables and indexes; sqlite_master says which table an index is of
    "SELECT m.tbl_name AS owner, SUM(d.pgsize) AS size FROM dbstat AS d JOIN sqlite_master AS m ON m.name = d.name "
    "GROUP BY m.tbl_name")
_PG_SIZE = text("SELECT pg_total_relation_size(CAST(:name AS regclass))")


def table_sizes(conn: Connection) -> dict[str, TableSize]:
    """{catalog table name: its rows and bytes} for every table of airflow_txn the database holds."""
    present = migrate.catalog_tables(conn)
    tables = [t for t in schema.metadata.sorted_tables if t.name in present]
    rows = {t.name: int(conn.execute(select(func.count()).select_from(t)).scalar_one()) for t in tables}
    sizes: dict[str, int | None] = dict.fromkeys(rows)
    dialect = conn.dialect.name
    if dialect == "sqlite":
        try:
            pages = {str(r.owner): int(r.size) for r in conn.execute(_SQLITE_PAGES)}
        except OperationalError:  # a SQLite built without the dbstat virtual table: sizes unknown
            pages = {}
        sizes = {name: pages.get(name) for name in rows} if pages else sizes
    elif dialect == "postgresql":
        sizes = {name: int(conn.execute(_PG_SIZE, {"name": name}).scalar_one()) for name in rows}
    return {name: TableSize(rows[name], sizes[name]) for name in rows}


@dataclass(frozen=True, slots=True)
class PartStates:
    """Part rows by state (docs/DESIGN.md, data model)."""

    live: int
    """Committed and not removed: what the latest snapshot reads."""
    removed: int
    """Committed and removed at some CSN (replaced, deleted, merged away): kept for older snapshots until vacuum."""
    rolled_back: int
    """Stamped RollbackCSN (a rolled-back transaction's, a withdrawn key's): never visible; vacuum deletes them."""
    staged: int
    """Of transactions not committed yet (no creation CSN)."""

    @property
    def total(self) -> int:
        return self.live + self.removed + self.rolled_back + self.staged


_p = schema.parts.c
def part_states(conn: Connection, table_id: int | None = None) -> PartStates:
    """Part rows by state, of one table (None: of all)."""
    where = [] if table_id is None else [_p.table_id == table_id]

    def count(*conditions: ColumnElement[bool]) -> int:
        stmt = select(func.count()).select_from(schema.parts).where(and_(*where, *conditions))
        return int(conn.execute(stmt).scalar_one())

    committed = and_(_p.creation_csn.is_not(None), _p.creation_csn != ROLLBACK_CSN)
    return PartStates(live=count(committed, _p.removal_csn.is_(None)),
                      removed=count(committed, _p.removal_csn.is_not(None)),
                      rolled_back=count(_p.creation_csn == ROLLBACK_CSN),
                      staged=count(_p.creation_csn.is_(None)))
