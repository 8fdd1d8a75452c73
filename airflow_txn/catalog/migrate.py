"""The catalog's schema migrations: Alembic runs the revisions in catalog/migrations/versions/ on the
caller's connection, inside the caller's write transaction (which holds the catalog's schema lock).

The revisions form one chain, one step of the schema's history each (REVISIONS):

    schema_v1   the baseline: the tables of schema version 1 and the first rows
    schema_v2   txn_table_retention and txn_compactions
    schema_v3   txn_keys and txn_scans
    indexes_v2  the visible-part index of index version 2
    schema_v4   txn_transactions.metadata_json (a transaction's metadata)
    schema_v5   txn_tags and txn_tag_tables (named snapshots)
    schema_v6   txn_check_reports (write-audit-publish check reports, one row each)
    schema_v7   txn_table_versions and txn_parts.schema_version (a table's schema versioned like a part, D27)
    indexes_v3  the span-level index of index version 3 (visible-part lookups independent of history, D31)

Alembic records the catalog's revision in txn_alembic_version (not Alembic's default alembic_version:
a catalog may share a PostgreSQL database with Airflow's own, which has that table). The revisions
also keep txn_meta's `schema_version` and `index_version` rows, which older airflow_txn, `doctor` and
the fast check on open read. A catalog made before Alembic has only those rows: `upgrade` stamps it at
the revision they name, then runs the rest. When the two records disagree (txn_meta set back by hand,
say), the older one wins: every revision is idempotent, so running one again is harmless.

No alembic.ini is needed: `config()` points Alembic at the migrations directory inside the package.
A developer writes the next revision with
`alembic.command.revision(migrate.config(), message=..., rev_id=...)` and adds it to REVISIONS.
Alembic is imported only when a migration runs: opening a current catalog does not load it, nor does creating
a new one, which `_create_at_head` builds from schema.py in one step (a test checks the revisions build the same).

Versions meet by a rule (docs/DESIGN.md, D23). Opening a catalog never migrates it: only `upgrade` does
(`airflow-txn upgrade`, `Warehouse.open(..., upgrade=True)`), and creating a new catalog. Each revision
declares `older_clients_tolerate`; `upgrade` records in txn_meta's `min_client_version` the oldest client
schema version that may still use the catalog (MIN_CLIENT_VERSION: the schema version of the newest revision
older clients do not tolerate). A client uses a newer catalog when min_client_version is at most its own
schema version (CatalogTooNewError otherwise), and an older one down to schema.MIN_CATALOG_VERSION
(CatalogUpgradeRequiredError below it).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Set
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy import Connection

from airflow_txn.catalog import schema
from airflow_txn.errors import CatalogTooNewError, CatalogUpgradeRequiredError
from airflow_txn.model.version import VERSION

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS = Path(__file__).with_name("migrations")
VERSION_TABLE = "txn_alembic_version"
REVISIONS = ("schema_v1", "schema_v2", "schema_v3", "indexes_v2", "schema_v4", "schema_v5", "schema_v6",
             "schema_v7", "indexes_v3")
"""The chain, oldest first (a test checks it against the script directory)."""
HEAD = REVISIONS[-1]
_BY_SCHEMA_VERSION = {1: "schema_v1", 2: "schema_v2", 3: "schema_v3", 4: "schema_v4", 5: "schema_v5",
                      6: "schema_v6", 7: "schema_v7"}
"""The revision a pre-Alembic catalog is at, by its txn_meta schema_version (index version below 2)."""
_BY_INDEX_VERSION = {2: "indexes_v2", 3: "indexes_v3"}
"""The revision that brings each index version (it follows the schema revision before it in the chain)."""
def index_revisions_after(index_version: int) -> list[str]:
    """The index revisions a catalog recording `index_version` has not run, oldest first (`doctor` names them)."""
    return [revision for version, revision in sorted(_BY_INDEX_VERSION.items()) if version > index_version]


SCHEMA_VERSION_OF = {revision: version for version, revision in _BY_SCHEMA_VERSION.items()}
"""The schema version each revision that raises it brings the catalog to."""
MIN_CLIENT_VERSION = 7
"""The oldest client schema version that may use a catalog at HEAD, which `upgrade` records in txn_meta: the
schema version of the newest revision whose `older_clients_tolerate` is False (a test derives it from them)."""
MIN_CLIENT_KEY = "min_client_version"

ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
"""The type of the catalog's id columns: BigInteger primary keys do not autoincrement on SQLite; INTEGER does."""

_version_table = sa.Table(VERSION_TABLE, sa.MetaData(), sa.Column("version_num", sa.String(32), primary_key=True))
_log = logging.getLogger(__name__)
_ALEMBIC_PROXIES = threading.Lock()
"""Alembic's `context` and `op` are module-wide proxies: two threads migrating two catalogs at once would
swap connections. Taken after the catalog's schema lock (always in that order, so it cannot deadlock)."""


@dataclass(frozen=True)
class Versions:
    """What a catalog says about its own schema."""

    revision: str | None
    """Alembic's record (None: no txn_alembic_version yet: a new or a pre-Alembic catalog)."""
    schema_version: int | None
    """txn_meta's schema_version (None: no such row: a new catalog)."""
    index_version: int
    min_client_version: int | None = None
    """txn_meta's min_client_version: the oldest client schema version that may use the catalog (None: not
    recorded, a catalog no `upgrade` of D23's rule has run on)."""

    @property
    def newer(self) -> bool:
        """Made by an airflow_txn newer than this one (a schema version or a revision this one does not know)."""
        return ((self.schema_version is not None and self.schema_version > schema.SCHEMA_VERSION)
                or (self.revision is not None and self.revision not in REVISIONS))

    @property
    def older(self) -> bool:
        """Older than this airflow_txn works with (schema.MIN_CATALOG_VERSION): `upgrade` must run first."""
        return not self.newer and (self.schema_version or 0) < schema.MIN_CATALOG_VERSION

    def shown(self) -> str:
        """`schema version 5 (schema_v5)`, for messages."""
        return f"schema version {self.schema_version} ({self.revision or 'made before Alembic'})"

    def refuse_newer(self, where: str = "catalog") -> None:
        """CatalogTooNewError for a newer catalog this airflow_txn may not use: one a newer airflow_txn upgraded
        with a revision clients of this schema version do not tolerate (min_client_version above ours, or none
        recorded). A newer catalog that tolerates us is fine."""
        if not self.newer or (self.min_client_version is not None
                              and self.min_client_version <= schema.SCHEMA_VERSION):
            return
        needs = (f"it needs clients of schema version {self.min_client_version} or newer"
                 if self.min_client_version is not None else
                 "it records no min_client_version, so no older client may use it")
        raise CatalogTooNewError(
            f"the {where} is at {self.shown()}, newer than this airflow-txn {VERSION} (schema version "
            f"{schema.SCHEMA_VERSION}, {HEAD}) and {needs}: upgrade the airflow-txn package of this process "
            "(the catalog was left as it is)",
            self.schema_version, schema.SCHEMA_VERSION, self.min_client_version)

    def refuse_older(self, where: str = "catalog") -> None:
        """CatalogUpgradeRequiredError for a catalog older than this airflow_txn works with."""
        if not self.older:
            return
        raise CatalogUpgradeRequiredError(
            f"the {where} is at {self.shown()}, older than this airflow-txn {VERSION} works with (schema "
            f"version {schema.SCHEMA_VERSION}, {HEAD}; catalogs of schema version {schema.MIN_CATALOG_VERSION} "
            "or newer) and opening never upgrades a catalog: the catalog must be upgraded, once, with "
            "`airflow-txn upgrade` (by a writer with this package, as a deliberate step: docs/DEPLOYMENT.md, "
            "Versions), or use the older package here. Nothing was changed",
            self.schema_version, schema.SCHEMA_VERSION)

    @property
    def current(self) -> bool:
        """At HEAD with every record `upgrade` keeps: nothing for `upgrade` to do."""
        return (self.revision == HEAD and self.schema_version == schema.SCHEMA_VERSION
                and self.index_version >= schema.INDEX_VERSION and self.min_client_version == MIN_CLIENT_VERSION)

    @property
    def start(self) -> str | None:
        """The revision to upgrade from: the older of Alembic's record and the one txn_meta names."""
        named = _BY_SCHEMA_VERSION.get(self.schema_version or 0)
        for index_version, revision in _BY_INDEX_VERSION.items():
            before = REVISIONS[REVISIONS.index(revision) - 1]
            if named is None:
                break
            if self.index_version < index_version:  # the index revision must run
                named = min(named, before, key=REVISIONS.index)
            elif named == before:  # at the schema revision before it, with its index: past it
                named = revision
        found = [r for r in (self.revision, named) if r is not None]
        return min(found, key=REVISIONS.index) if found else None


@dataclass(frozen=True)
class Upgrade:
    """What `upgrade` did: the revision the catalog was at (None: a new catalog) and the ones it ran (a new
    catalog: all of them, built in one step)."""

    before: str | None
    after: str
    applied: list[str] = field(default_factory=list)
    schema_version: int = schema.SCHEMA_VERSION
    before_schema_version: int | None = schema.SCHEMA_VERSION
    """The catalog's schema version before (None: a new catalog)."""
    min_client_version: int | None = MIN_CLIENT_VERSION
    """The oldest client schema version that may use the catalog now (txn_meta's min_client_version)."""


def read_versions(conn: Connection, present: Set[str] | None = None) -> Versions:
    """The catalog's version records. `present`: the tables that exist (a missing one is not read);
    None: read both, and let a missing table raise (a cheap probe where a failed read does no harm)."""
    found: dict[str, str] = {}
    if present is None or schema.meta.name in present:
        key, value = schema.meta.c.key, schema.meta.c.value
        rows = conn.execute(sa.select(key, value).where(key.in_(["schema_version", "index_version", MIN_CLIENT_KEY])))
        found = {row.key: row.value for row in rows}
    revision = recorded_revision(conn) if present is None or VERSION_TABLE in present else None
    return Versions(revision=revision,
                    schema_version=int(found["schema_version"]) if "schema_version" in found else None,
                    index_version=int(found.get("index_version") or 0),
                    min_client_version=int(found[MIN_CLIENT_KEY]) if MIN_CLIENT_KEY in found else None)


def catalog_tables(conn: Connection) -> set[str]:
    """Which of the catalog's tables (schema.py's and Alembic's record) the database holds: a lookup of each by
    name, a few milliseconds in all where listing every table of a PostgreSQL schema takes 20-50 ms. On PostgreSQL
    in the connection's current schema only, where the catalog is created (without a schema, has_table looks
    along the whole search path, and its visibility test fails on a table another session drops meanwhile:
    "could not open relation with OID")."""
    inspector = sa.inspect(conn)
    where = conn.dialect.default_schema_name if conn.dialect.name == "postgresql" else None
    return {name for name in (*schema.metadata.tables, VERSION_TABLE) if inspector.has_table(name, schema=where)}


def recorded_revision(conn: Connection) -> str | None:
    """The revision Alembic recorded in txn_alembic_version (which must exist)."""
    return conn.execute(sa.select(_version_table.c.version_num)).scalar()


def upgrade(conn: Connection, create_only: bool = False, where: str = "catalog") -> Upgrade:
    """Bring the catalog to HEAD on `conn`, whose open transaction the caller holds the schema lock in
    and commits: create a new catalog, stamp a pre-Alembic one, run the missing revisions, record
    min_client_version. A newer catalog is never taken back: one this airflow_txn may use is left as it is
    (nothing applied), another refused (CatalogTooNewError). With `create_only` (the first write of a
    process that was not asked to upgrade) an existing catalog is never migrated: one older than this package
    works with raises CatalogUpgradeRequiredError, any other is left as it is."""

    present = catalog_tables(conn)
    versions = read_versions(conn, present)
    versions.refuse_newer(where)
    if versions.newer or versions.current or (create_only and schema.meta.name in present):
        if create_only:
            versions.refuse_older(where)
        at = versions.revision or versions.start or HEAD
        return Upgrade(before=at, after=at, schema_version=versions.schema_version or schema.SCHEMA_VERSION,
                       before_schema_version=versions.schema_version, min_client_version=versions.min_client_version)
    start = versions.start
    if start is None and present.isdisjoint(schema.metadata.tables):
        return _create_at_head(conn)
    run_revisions(conn, stamp_at=start if start != versions.revision else None)
    applied = REVISIONS[REVISIONS.index(start) + 1:] if start is not None else REVISIONS
    level = logging.DEBUG if start is None else logging.INFO  # a new catalog is no news; an upgraded one is
    _log.log(level, "catalog schema migrated from %s to %s (ran %s)", start or "nothing", HEAD, ", ".join(applied))
    return Upgrade(before=start, after=HEAD, applied=list(applied), before_schema_version=versions.schema_version)


def _create_at_head(conn: Connection) -> Upgrade:
    """Create a new catalog as HEAD has it in one step: schema.py's tables and indexes, the first rows, and
    Alembic's record stamped at HEAD (as Airflow's `db migrate` creates a new database from its models).
    Running the nine revisions instead builds the same catalog (a test compares the two) in three to four times
    the time: their reflection and one DDL statement at a time cost about 0.4 s on PostgreSQL."""
    schema.metadata.create_all(conn, checkfirst=False)  # `upgrade` saw none of them
    conn.execute(schema.counters.insert(), [{"name": schema.COUNTER_LAST_CSN, "value": 1},
                                            {"name": schema.COUNTER_VACUUM_HORIZON, "value": 1},
                                            {"name": schema.COUNTER_SNAPSHOT_GATE, "value": 0}])
    conn.execute(schema.meta.insert(), [{"key": "schema_version", "value": str(schema.SCHEMA_VERSION)},
                                        {"key": "index_version", "value": str(schema.INDEX_VERSION)},
                                        {"key": MIN_CLIENT_KEY, "value": str(MIN_CLIENT_VERSION)}])
    _version_table.create(conn)
    conn.execute(_version_table.insert().values(version_num=HEAD))
    _log.debug("catalog created at %s", HEAD)
    return Upgrade(before=None, after=HEAD, applied=list(REVISIONS), before_schema_version=None)


def run_revisions(conn: Connection, stamp_at: str | None = None) -> None:
    """Run the revisions on `conn` up to HEAD, after stamping Alembic's record at `stamp_at` (a catalog made before
    Alembic, or whose records disagree); then record min_client_version. From nothing (no stamp), tests compare
    the result with `_create_at_head`'s."""
    from alembic import command
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory

    with _ALEMBIC_PROXIES:
        if stamp_at is not None:
            context = MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE})
            context.stamp(ScriptDirectory.from_config(config()), stamp_at)
        command.upgrade(config(conn), "head")
    _write_meta(conn, MIN_CLIENT_KEY, str(MIN_CLIENT_VERSION))


def _write_meta(conn: Connection, key: str, value: str) -> None:
    """Insert or update one txn_meta row on `conn` (outside a revision)."""
    meta = schema.meta
    if conn.execute(sa.select(meta.c.value).where(meta.c.key == key)).first() is None:
        conn.execute(meta.insert().values(key=key, value=value))
    else:
        conn.execute(meta.update().where(meta.c.key == key).values(value=value))


def config(connection: Connection | None = None) -> Config:
    """An Alembic configuration for the migrations inside this package; with `connection`, env.py runs
    the migrations on it (and inside its transaction)."""
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS).replace("%", "%%"))
    cfg.attributes["connection"] = connection
    return cfg


def context_options() -> dict[str, Any]:
    """The options env.py configures Alembic's migration context with (autogenerate compares with schema.py)."""
    return {"version_table": VERSION_TABLE, "target_metadata": schema.metadata}


# -- helpers of the revisions ------------------------------------------------------------------------------
def create_table_once(name: str, *items: sa.schema.SchemaItem) -> None:
    """op.create_table (with its indexes) unless the table exists: revisions are idempotent."""
    from alembic import op

    if not sa.inspect(op.get_bind()).has_table(name):
        op.create_table(name, *items)


def set_meta(key: str, value: str, only_if_missing: bool = False) -> bool:
    """Write a txn_meta row (insert or update); with only_if_missing, leave an existing row alone.
    True when it wrote."""
    from alembic import op

    meta = sa.table("txn_meta", sa.column("key", sa.String), sa.column("value", sa.Text))
    bind = op.get_bind()
    if bind.execute(sa.select(meta.c.value).where(meta.c.key == key)).first() is None:
        op.bulk_insert(meta, [{"key": key, "value": value}])
        return True
    if only_if_missing:
        return False
    op.execute(meta.update().where(meta.c.key == key).values(value=value))
    return True
