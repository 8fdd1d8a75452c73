"""The catalog's schema migrations (Alembic, airflow_txn/catalog/migrate.py) on SQLite and PostgreSQL: the
revisions form one chain; a fresh catalog lands at its head with exactly the tables, columns and indexes of
catalog/schema.py; a catalog the pre-Alembic code made (schema version 1 or 2, built here with that code's
DDL) is recognised, stamped and upgraded (on request: opening never upgrades, tests/catalog/test_versions.py) with
its rows intact; processes opening a new catalog at once create it once; a catalog of an unknown (newer) revision
that records no min_client_version is refused; `airflow-txn upgrade` and `doctor`."""

from __future__ import annotations

import itertools
import json
import multiprocessing
import threading
import uuid
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from airflow_txn import Warehouse, __version__
from airflow_txn.catalog import Catalog, migrate, schema, table_registry
from airflow_txn.cli import exit_codes, main
from airflow_txn.errors import CatalogTooNewError, CatalogUpgradeRequiredError
from airflow_txn.model.names import parse_table_name
from tests.helpers import events

# What the pre-Alembic code's `metadata.create_all` emitted for schema version 1 (SQLite's and PostgreSQL's
# DDL differ only in the id, serial and blob types).
OLD_V1_DDL = """
CREATE TABLE txn_meta ("key" VARCHAR(64) NOT NULL, value TEXT NOT NULL, PRIMARY KEY ("key"));
CREATE TABLE txn_counters (name VARCHAR(64) NOT NULL, value BIGINT NOT NULL, PRIMARY KEY (name));
CREATE TABLE txn_tables (id {serial} NOT NULL, name VARCHAR(130) NOT NULL, schema_ipc {blob} NOT NULL,
    partition_by TEXT NOT NULL, directory TEXT NOT NULL, created_at FLOAT NOT NULL, PRIMARY KEY (id), UNIQUE (name));
CREATE TABLE txn_transactions (tid VARCHAR(64) NOT NULL, label TEXT, state VARCHAR(16) NOT NULL,
    isolation VARCHAR(16) NOT NULL, snapshot_csn BIGINT NOT NULL, commit_csn BIGINT, lease_seconds FLOAT NOT NULL,
    lease_deadline FLOAT NOT NULL, created_at FLOAT NOT NULL, ended_at FLOAT, failed_reason TEXT,
    cleanup_done BOOLEAN NOT NULL, PRIMARY KEY (tid));
CREATE INDEX ix_txn_transactions_state ON txn_transactions (state);
CREATE TABLE txn_parts (id {serial} NOT NULL, table_id {id} NOT NULL, partition_key TEXT NOT NULL, path TEXT NOT NULL,
    files TEXT NOT NULL, row_count BIGINT NOT NULL, size_bytes BIGINT NOT NULL, creation_tid VARCHAR(64) NOT NULL,
    creation_csn BIGINT, removal_tid VARCHAR(64), removal_csn BIGINT, stage_key TEXT, stage_attempt BIGINT,
    removal_key TEXT, removal_attempt BIGINT, created_at FLOAT NOT NULL, PRIMARY KEY (id),
    FOREIGN KEY(table_id) REFERENCES txn_tables (id));
CREATE INDEX ix_txn_parts_removal_csn ON txn_parts (removal_csn);
CREATE INDEX ix_txn_parts_creation_tid ON txn_parts (creation_tid);
CREATE INDEX ix_txn_parts_removal_tid ON txn_parts (removal_tid);
CREATE INDEX ix_txn_parts_table_creation ON txn_parts (table_id, creation_csn);
CREATE TABLE txn_commit_log (csn BIGINT NOT NULL, tid VARCHAR(64) NOT NULL, tables TEXT NOT NULL,
    committed_at FLOAT NOT NULL, applied BOOLEAN NOT NULL, PRIMARY KEY (csn), UNIQUE (tid));
CREATE INDEX ix_txn_commit_log_applied ON txn_commit_log (applied, csn);
CREATE INDEX ix_txn_commit_log_time ON txn_commit_log (committed_at);
CREATE TABLE txn_table_commits (table_id {id} NOT NULL, csn BIGINT NOT NULL, PRIMARY KEY (table_id, csn),
    FOREIGN KEY(table_id) REFERENCES txn_tables (id));
CREATE TABLE txn_read_set (tid VARCHAR(64) NOT NULL, table_id {id} NOT NULL, partition_key TEXT NOT NULL,
    PRIMARY KEY (tid, table_id, partition_key));
INSERT INTO txn_meta ("key", value) VALUES ('schema_version', '1');
INSERT INTO txn_counters (name, value) VALUES ('last_csn', 1), ('vacuum_horizon', 1), ('snapshot_gate', 0);
"""

# ... and what it added for schema version 2 (with index version 2: the visible-part index).
OLD_V2_DDL = """
CREATE TABLE txn_table_retention (table_id {id} NOT NULL, seconds FLOAT, versions BIGINT, horizon BIGINT NOT NULL,
    updated_at FLOAT NOT NULL, PRIMARY KEY (table_id), FOREIGN KEY(table_id) REFERENCES txn_tables (id));
CREATE TABLE txn_compactions (tid VARCHAR(64) NOT NULL, table_id {id} NOT NULL, partition_key TEXT NOT NULL,
    merge_csn BIGINT NOT NULL, merged_part_id {id} NOT NULL, source_parts BIGINT NOT NULL, rows BIGINT NOT NULL,
    source_bytes BIGINT NOT NULL, merged_bytes BIGINT NOT NULL, committed_at FLOAT NOT NULL, PRIMARY KEY (tid),
    FOREIGN KEY(table_id) REFERENCES txn_tables (id));
CREATE INDEX ix_txn_compactions_table_time ON txn_compactions (table_id, committed_at);
DROP INDEX ix_txn_parts_table_creation;
CREATE INDEX ix_txn_parts_table_removal ON txn_parts (table_id, removal_csn, creation_csn);
UPDATE txn_meta SET value = '2' WHERE "key" = 'schema_version';
INSERT INTO txn_meta ("key", value) VALUES ('index_version', '2');
"""

OLD_TABLE = "legacy.events"


def _build_old_catalog(url: str, version: int) -> None:
    """A catalog as the pre-Alembic airflow_txn left it at `version`, holding one table."""
    engine = sa.create_engine(url)
    types = ({"id": "INTEGER", "serial": "INTEGER", "blob": "BLOB"} if engine.dialect.name == "sqlite"
             else {"id": "BIGINT", "serial": "BIGSERIAL", "blob": "BYTEA"})
    script = OLD_V1_DDL + (OLD_V2_DDL if version >= 2 else "")
    with engine.begin() as conn:
        for statement in script.format(**types).split(";"):
            if statement.strip():
                conn.exec_driver_sql(statement)
        table_registry.create(conn, parse_table_name(OLD_TABLE), events([]).schema, ["day"])
    engine.dispose()


def _versions(catalog: Catalog) -> migrate.Versions:
    with catalog.read() as conn:
        return migrate.read_versions(conn, set(sa.inspect(conn).get_table_names()))


EXPRESSION_INDEXES = {"ix_txn_parts_span"}
"""Indexes on an expression: SQLite's reflection skips them and PostgreSQL's gives back its own rendering of the
expression, so Alembic cannot compare them; `_expression_indexes` checks them instead."""


def _compared(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
    return not (type_ == "index" and name in EXPRESSION_INDEXES)


def _schema_differences(catalog: Catalog, metadata: sa.MetaData = schema.metadata) -> list[Any]:
    """Alembic's autogenerate diff between `metadata` and the catalog's tables (empty: they agree), indexes on an
    expression left to `_expression_indexes`."""
    with catalog.engine.connect() as conn, warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Skipped unsupported reflection of expression-based index")
        warnings.filterwarnings("ignore", "autogenerate skipping metadata-specified expression-based index")
        context = MigrationContext.configure(conn, opts={"version_table": migrate.VERSION_TABLE,
                                                         "compare_type": True, "include_object": _compared})
        return list(compare_metadata(context, metadata))


def _expression_indexes(catalog: Catalog) -> dict[str, str]:
    """{name: its definition} of the catalog's indexes on txn_parts named in EXPRESSION_INDEXES."""
    names = sorted(EXPRESSION_INDEXES)
    with catalog.read() as conn:
        if catalog.dialect == "sqlite":
            rows = conn.execute(sa.text("SELECT name, sql FROM sqlite_master WHERE type = 'index' AND name IN "
                                        "(:a)"), {"a": names[0]})
        else:
            rows = conn.execute(sa.text("SELECT indexname, indexdef FROM pg_indexes WHERE indexname IN (:a) "
                                        "AND schemaname = current_schema()"), {"a": names[0]})  # not another test's
        return {str(r[0]): str(r[1]) for r in rows}


def test_a_fresh_catalog_has_the_span_index_on_its_expression(catalog: Catalog) -> None:
    """ix_txn_parts_span is there, on table_id, the span level (schema.SPAN_LEVEL_SQL), creation_csn, removal_csn."""
    catalog.initialize()
    found = _expression_indexes(catalog)
    assert set(found) == EXPRESSION_INDEXES
    definition = " ".join(found["ix_txn_parts_span"].split()).lower()
    assert "table_id" in definition and "removal_csn - creation_csn" in definition
    assert f"then {schema.SPAN_LEVELS}" in definition and definition.rstrip(")").endswith("removal_csn")


@pytest.fixture
def catalog(catalog_url: str) -> Any:
    cat = Catalog(catalog_url)
    yield cat
    cat.dispose()


def test_the_revisions_form_one_chain() -> None:
    script = ScriptDirectory.from_config(migrate.config())
    assert script.get_heads() == [migrate.HEAD] and script.get_bases() == [migrate.REVISIONS[0]]
    chain = [s.revision for s in reversed(list(script.walk_revisions()))]
    assert tuple(chain) == migrate.REVISIONS
    for older, newer in itertools.pairwise(chain):
        assert script.get_revision(newer).down_revision == older


def test_a_fresh_catalog_lands_at_head_and_matches_schema_py(catalog: Catalog) -> None:
    report = catalog.upgrade()
    assert (report.before, report.after, report.applied) == (None, migrate.HEAD, list(migrate.REVISIONS))
    versions = _versions(catalog)
    assert versions.current and versions.revision == migrate.HEAD
    assert (versions.schema_version, versions.index_version) == (schema.SCHEMA_VERSION, schema.INDEX_VERSION)
    assert _schema_differences(catalog) == []
    with catalog.read() as conn:
        counters = dict(conn.execute(sa.select(schema.counters.c.name, schema.counters.c.value)).all())
    assert counters == {schema.COUNTER_LAST_CSN: 1, schema.COUNTER_VACUUM_HORIZON: 1, schema.COUNTER_SNAPSHOT_GATE: 0}
    assert catalog.upgrade().applied == []  # at head: nothing to run


def _catalog_contents(catalog: Catalog) -> dict[str, Any]:
    """What a new catalog holds besides its tables' shape: its rows of txn_meta, txn_counters and Alembic's record,
    and the definition of the expression index (the comparison with schema.py leaves it aside)."""
    with catalog.read() as conn:
        meta = dict(conn.execute(sa.select(schema.meta.c.key, schema.meta.c.value)
                                 .where(schema.meta.c.key != "warehouse_id")).all())  # written after, by open
        counters = dict(conn.execute(sa.select(schema.counters.c.name, schema.counters.c.value)).all())
        revision = migrate.recorded_revision(conn)
        tables = sorted(sa.inspect(conn).get_table_names())
        schema_name = conn.dialect.default_schema_name
    return {"meta": meta, "counters": counters, "revision": revision, "tables": tables,
            "span_index": " ".join(_expression_indexes(catalog)["ix_txn_parts_span"].split()).replace(
                f" ON {schema_name}.", " ON ")}


def test_running_every_revision_from_nothing_builds_what_a_new_catalog_is_created_as(catalog_url: str,
                                                                                    catalog: Catalog) -> None:
    """A new catalog is created from schema.py in one step (migrate._create_at_head); the revisions, which an
    existing catalog runs, must build exactly the same thing from nothing: same tables, columns, types and
    indexes (the comparison with schema.py), same rows, same Alembic record."""
    created = catalog.upgrade()
    assert (created.before, created.after) == (None, migrate.HEAD)
    one_step = _catalog_contents(catalog)
    assert _schema_differences(catalog) == []
    with catalog.write() as conn:
        for table in reversed(schema.metadata.sorted_tables):
            table.drop(conn)
        conn.execute(sa.text(f"DROP TABLE {migrate.VERSION_TABLE}"))
    with catalog.write() as conn:
        migrate.run_revisions(conn)
    assert _schema_differences(catalog) == []
    assert _catalog_contents(catalog) == one_step


def test_the_schema_comparison_sees_a_difference(catalog: Catalog) -> None:
    """The comparison above is not vacuous: a column schema.py would have and the catalog lacks shows."""
    catalog.initialize()
    changed = sa.MetaData()
    for table in schema.metadata.sorted_tables:
        table.to_metadata(changed)
    sa.Table("txn_meta", changed, sa.Column("note", sa.Text), extend_existing=True)
    assert [d[0] for d in _schema_differences(catalog, changed)] == ["add_column"]


@pytest.mark.parametrize("version", [1, 2])
def test_a_pre_alembic_catalog_is_stamped_and_upgraded(catalog_url: str, catalog: Catalog, tmp_path: Path,
                                                       version: int) -> None:
    _build_old_catalog(catalog_url, version)
    before = _versions(catalog)
    assert (before.revision, before.schema_version, before.start) == (None, version, f"schema_v{version}")
    with pytest.raises(CatalogUpgradeRequiredError):
        Warehouse.open(catalog=catalog_url, root=str(tmp_path / "root"))  # opening never upgrades (D23)
    assert _versions(catalog).revision is None
    with Warehouse.open(catalog=catalog_url, root=str(tmp_path / "root"), upgrade=True) as wh:  # on request
        assert wh.tables() == [OLD_TABLE]
        t = wh.begin().use_key("load", attempt=1)  # txn_keys and txn_scans (version 3) in use
        t.append(OLD_TABLE, events([1, 2]))
        t.commit()
        assert wh.read(OLD_TABLE).num_rows == 2
        assert wh.set_retention(OLD_TABLE, versions=1)["versions"] == 1  # txn_table_retention (version 2)
    after = _versions(catalog)
    assert after.current and after.revision == migrate.HEAD and after.schema_version == schema.SCHEMA_VERSION
    assert _schema_differences(catalog) == []  # the old index is gone, every new table and index is there
    assert set(_expression_indexes(catalog)) == EXPRESSION_INDEXES


def test_the_upgrade_command_reports_the_steps_it_ran(catalog_url: str, catalog: Catalog) -> None:
    _build_old_catalog(catalog_url, 2)
    report = catalog.upgrade()
    assert (report.before, report.after, report.applied) == (
        "schema_v2", migrate.HEAD, ["schema_v3", "indexes_v2", "schema_v4", "schema_v5", "schema_v6",
                                    "schema_v7", "indexes_v3"])


def test_a_catalog_of_an_unknown_revision_is_refused(catalog_url: str, catalog: Catalog, tmp_path: Path) -> None:
    catalog.initialize()
    with catalog.write() as conn:
        conn.execute(sa.text(f"UPDATE {migrate.VERSION_TABLE} SET version_num = 'schema_v99'"))
        conn.execute(sa.text(f"DELETE FROM txn_meta WHERE key = '{migrate.MIN_CLIENT_KEY}'"))  # tolerates no one
    with pytest.raises(CatalogTooNewError, match=r"schema version 7 \(schema_v99\), newer than this airflow-txn"):
        Warehouse.open(catalog=catalog_url, root=str(tmp_path / "root"))
    with pytest.raises(CatalogTooNewError, match="upgrade the airflow-txn package"):
        catalog.upgrade()


def _open_at_once(url: str, barrier: Any) -> None:
    catalog = Catalog(url)
    barrier.wait()
    catalog.initialize()
    catalog.dispose()


@pytest.mark.slow
def test_processes_creating_a_catalog_at_once_create_it_once(catalog_url: str, catalog: Catalog) -> None:
    processes = 4
    # forked: the children import nothing again (four spawned interpreters took 10-24 s per catalog in CI)
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(processes)
    workers = [context.Process(target=_open_at_once, args=(catalog_url, barrier)) for _ in range(processes)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
    assert [w.exitcode for w in workers] == [0] * processes
    assert _versions(catalog).current
    with catalog.read() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(schema.counters)).scalar() == 3
        keys = sorted(conn.execute(sa.select(schema.meta.c.key)).scalars())  # each written once, one warehouse id
        assert keys == ["index_version", "min_client_version", "schema_version", "warehouse_id"]
    assert _schema_differences(catalog) == []



# -- the command line ----------------------------------------------------------------------------------------------
def test_airflow_txn_upgrade_migrates_and_doctor_tells(catalog_url: str, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    _build_old_catalog(catalog_url, 2)
    opts = ["--catalog", catalog_url, "--root", str(tmp_path / "root")]

    def run_json(*args: str, code: int = exit_codes.OK) -> Any:
        assert main([*opts, *args, "--json"]) == code
        return json.loads(capsys.readouterr().out)

    def schema_check(code: int = exit_codes.OK) -> dict[str, str]:
        return next(c for c in run_json("doctor", code=code)["checks"] if c["name"] == "catalog schema")

    (tmp_path / "root").mkdir()  # doctor creates nothing
    older = schema_check(exit_codes.DOCTOR_FAILED)
    assert older["status"] == "fail" and "airflow-txn upgrade" in older["hint"]
    done = run_json("upgrade")
    assert (done["from_revision"], done["to_revision"], done["applied"], done["schema_version"]) == (
        "schema_v2", migrate.HEAD, ["schema_v3", "indexes_v2", "schema_v4", "schema_v5", "schema_v6",
                                    "schema_v7", "indexes_v3"],
        schema.SCHEMA_VERSION)
    assert schema_check() == {
        "name": "catalog schema", "status": "ok", "hint": "",
        "detail": f"client airflow-txn {__version__} (schema version {schema.SCHEMA_VERSION}, {migrate.HEAD}); "
                  f"catalog schema version {schema.SCHEMA_VERSION} ({migrate.HEAD}), "
                  f"min_client_version {migrate.MIN_CLIENT_VERSION}"}
    assert run_json("upgrade")["applied"] == []  # safe to run again
    assert main([*opts, "upgrade"]) == exit_codes.OK
    assert "to_revision" in capsys.readouterr().out


def test_doctor_names_a_current_catalog_made_before_alembic(catalog_url: str, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """A catalog at the current schema version without Alembic's record is healthy; `upgrade` stamps it."""
    catalog = Catalog(catalog_url)
    catalog.initialize()
    with catalog.write() as conn:
        conn.execute(sa.text(f"DROP TABLE {migrate.VERSION_TABLE}"))
    (tmp_path / "root").mkdir()
    args = ["--catalog", catalog_url, "--root", str(tmp_path / "root"), "doctor", "--json"]
    assert main(args) == exit_codes.OK
    check = next(c for c in json.loads(capsys.readouterr().out)["checks"] if c["name"] == "catalog schema")
    assert check["status"] == "ok" and "made before Alembic" in check["detail"]
    catalog.initialize()  # usable as it is: opening and initialize change nothing
    assert _versions(catalog).revision is None
    catalog.upgrade()
    assert _versions(catalog).revision == migrate.HEAD
    catalog.dispose()


def test_threads_creating_catalogs_at_once_each_get_their_own(tmp_path: Path) -> None:
    """Alembic's `op` and `context` are module-wide: threads migrating different catalogs take turns."""
    catalogs = [Catalog(f"sqlite:///{tmp_path / f'c{i}.db'}") for i in range(4)]
    barrier = threading.Barrier(len(catalogs))

    def create(catalog: Catalog) -> None:
        barrier.wait()
        catalog.initialize()

    with ThreadPoolExecutor(len(catalogs)) as pool:
        list(pool.map(create, catalogs))
    for catalog in catalogs:
        assert _versions(catalog).current and _schema_differences(catalog) == []
        catalog.dispose()


@pytest.mark.postgres
def test_the_catalog_s_tables_are_looked_for_in_the_current_schema_only(pg_url: str) -> None:
    """PostgreSQL: `migrate.catalog_tables` (the probe's and upgrade's look) searches the connection's current
    schema, where a catalog is created, as listing its tables did: looking along the whole search path tested the
    visibility of every same-named table of the database, which fails on one another session drops meanwhile
    ("could not open relation with OID", seen in a CI run where tests drop their schemas)."""
    other, mine = (f"t_{uuid.uuid4().hex[:12]}" for _ in range(2))
    admin = sa.create_engine(pg_url, isolation_level="AUTOCOMMIT")
    sep = "&" if "?" in pg_url else "?"
    try:
        with admin.connect() as conn:
            conn.execute(sa.text(f'CREATE SCHEMA "{other}"'))
            conn.execute(sa.text(f'CREATE SCHEMA "{mine}"'))
        elsewhere = Catalog(f"{pg_url}{sep}options=-csearch_path%3D{other}")
        elsewhere.initialize()
        with elsewhere.read() as conn:
            assert migrate.catalog_tables(conn) == {*schema.metadata.tables, migrate.VERSION_TABLE}
        elsewhere.dispose()
        behind = Catalog(f"{pg_url}{sep}options=-csearch_path%3D{mine},{other}")
        with behind.read() as conn:
            assert migrate.catalog_tables(conn) == set()
        behind.dispose()
    finally:
        with admin.connect() as conn:
            for name in (other, mine):
                conn.execute(sa.text(f'DROP SCHEMA IF EXISTS "{name}" CASCADE'))
        admin.dispose()
