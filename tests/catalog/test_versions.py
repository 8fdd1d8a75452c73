"""Versions meet safely (docs/DESIGN.md, D23): opening a catalog never upgrades it; a catalog one schema version
older is used as it is (all but recording check reports); an older one is refused with
CatalogUpgradeRequiredError until `airflow-txn upgrade` (or an explicit `Warehouse.open(..., upgrade=True)`)
runs; a newer catalog is used when every revision above this package's
head is one older clients tolerate (txn_meta's min_client_version), else refused with CatalogTooNewError;
`doctor` and `upgrade` say which side must move.

The catalogs of other releases are real: an older one is made by this package's own revisions up to an
older head (what that release ran), a newer one carries what a future additive revision would write (a
table, its revision, schema version and min_client_version). tests/catalog/test_versions_history.py runs the
previous release's code itself, from git history."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command

from airflow_txn import Warehouse, __version__
from airflow_txn.catalog import Catalog, meta_records, migrate, schema
from airflow_txn.cli import exit_codes, main
from airflow_txn.errors import CatalogTooNewError, CatalogUpgradeRequiredError, CatalogVersionError
from tests.helpers import events, ids

TABLE = "sales.events"
FUTURE = schema.SCHEMA_VERSION + 1
"""The schema version of a release after this one."""


def catalog_at(url: str, revision: str) -> None:
    """A catalog as the release whose head was `revision` made it (its revisions are these files), with a table."""
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        command.upgrade(migrate.config(conn), revision)
        meta_records.warehouse_id(conn)
    engine.dispose()


def future_catalog(url: str, min_client: int | None) -> None:
    """A catalog upgraded by a future release whose schema_v{FUTURE} adds a table: at `min_client` older clients
    still use it (None: a release that records no min_client_version)."""
    catalog = Catalog(url)
    catalog.upgrade()
    catalog.dispose()
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE txn_future (id INTEGER PRIMARY KEY, note TEXT)")
        conn.execute(sa.text(f"UPDATE {migrate.VERSION_TABLE} SET version_num = 'schema_v{FUTURE}'"))
        conn.execute(sa.text(f"UPDATE txn_meta SET value = '{FUTURE}' WHERE key = 'schema_version'"))
        conn.execute(sa.text("DELETE FROM txn_meta WHERE key = 'min_client_version'"))
        if min_client is not None:
            conn.execute(sa.text("INSERT INTO txn_meta (key, value) VALUES ('min_client_version', :v)"),
                         {"v": str(min_client)})
    engine.dispose()


def versions(url: str) -> migrate.Versions:
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        found = migrate.read_versions(conn, set(sa.inspect(conn).get_table_names()))
    engine.dispose()
    return found


def load(wh: Warehouse, rows: list[int]) -> None:
    wh.create_table(TABLE, events([]).schema, ["day"], exist_ok=True)
    t = wh.begin()
    t.append(TABLE, events(rows))
    t.commit()


def test_the_revisions_declare_what_older_clients_tolerate() -> None:
    """Each revision says whether older clients tolerate it; MIN_CLIENT_VERSION follows from that: the schema
    version of the newest revision they do not tolerate (which must raise the schema version)."""
    from alembic.script import ScriptDirectory

    scripts = ScriptDirectory.from_config(migrate.config())
    oldest = 1
    for revision in migrate.REVISIONS:
        module = scripts.get_revision(revision).module
        assert isinstance(module.older_clients_tolerate, bool), revision
        if not module.older_clients_tolerate:
            assert revision in migrate.SCHEMA_VERSION_OF, f"{revision} is not tolerated but keeps the schema version"
            oldest = migrate.SCHEMA_VERSION_OF[revision]
    assert migrate.MIN_CLIENT_VERSION == oldest == 7
    assert schema.MIN_CATALOG_VERSION <= schema.SCHEMA_VERSION


def test_opening_a_catalog_too_old_to_use_never_upgrades_it(catalog_url: str, tmp_path: Path) -> None:
    catalog_at(catalog_url, "schema_v4")
    root = str(tmp_path / "root")
    with pytest.raises(CatalogUpgradeRequiredError) as refused:
        Warehouse.open(catalog=catalog_url, root=root)
    message = str(refused.value)
    assert "schema version 4 (schema_v4)" in message and f"schema version {schema.SCHEMA_VERSION}" in message
    assert "airflow-txn upgrade" in message
    assert (refused.value.catalog_version, refused.value.client_version) == (4, schema.SCHEMA_VERSION)
    assert isinstance(refused.value, CatalogVersionError)
    after = versions(catalog_url)
    assert (after.revision, after.schema_version) == ("schema_v4", 4)  # left as it was
    engine = sa.create_engine(catalog_url)
    assert "txn_tags" not in sa.inspect(engine).get_table_names()
    engine.dispose()


def test_a_catalog_one_schema_version_older_is_used_as_it_is(catalog_url: str, tmp_path: Path) -> None:
    """Schema version 5 lacks only txn_check_reports: this package reads and writes it without upgrading it,
    shows no stored reports, and refuses (typed, before anything is written) to record one."""
    catalog_at(catalog_url, "schema_v5")
    with Warehouse.open(catalog=catalog_url, root=str(tmp_path / "root")) as wh:
        load(wh, [1, 2])
        t = wh.begin()
        t.append(TABLE, events([3]))
        with pytest.raises(CatalogUpgradeRequiredError, match=r"needs catalog schema version 6.*airflow-txn upgrade"):
            t.record_check("audit", {"passed": True})
        t.commit()  # the transaction is still usable
        assert ids(wh.read(TABLE)) == [1, 2, 3]
        assert wh.check_reports(t.tid) == [] and wh.transaction_info(t.tid)["metadata"] == {}
        assert len(wh.transactions()) == 2 and len(wh.commits_after(0)) == 2
        assert wh.vacuum(retention_seconds=0)["rows_purged"]["check_reports"] == 0
    after = versions(catalog_url)
    assert (after.revision, after.schema_version) == ("schema_v5", 5)  # left as it was
    with Warehouse.open(catalog=catalog_url, root=str(tmp_path / "root"), upgrade=True) as wh:
        t = wh.begin()
        t.record_check("audit", {"passed": True})  # once upgraded
        t.commit()
        assert [r["key"] for r in wh.check_reports(t.tid)] == ["audit"]


def test_an_explicit_upgrade_brings_it_to_head_and_records_the_oldest_client(catalog_url: str, tmp_path: Path) -> None:
    catalog_at(catalog_url, "schema_v5")
    with Warehouse.open(catalog=catalog_url, root=str(tmp_path / "root"), upgrade=True) as wh:
        load(wh, [1, 2])
        assert ids(wh.read(TABLE)) == [1, 2]
    after = versions(catalog_url)
    assert (after.revision, after.schema_version, after.min_client_version) == (
        migrate.HEAD, schema.SCHEMA_VERSION, migrate.MIN_CLIENT_VERSION)


def test_a_new_catalog_records_the_oldest_client_that_may_use_it(catalog_url: str, tmp_path: Path) -> None:
    with Warehouse.open(catalog=catalog_url, root=str(tmp_path / "root")) as wh:
        load(wh, [1])  # the first write creates the catalog: creating is not upgrading
    assert versions(catalog_url).min_client_version == migrate.MIN_CLIENT_VERSION


def test_a_newer_catalog_older_clients_tolerate_is_used(catalog_url: str, tmp_path: Path) -> None:
    future_catalog(catalog_url, min_client=schema.SCHEMA_VERSION)
    with Warehouse.open(catalog=catalog_url, root=str(tmp_path / "root")) as wh:
        load(wh, [1, 2, 3])
        assert ids(wh.read(TABLE)) == [1, 2, 3]
    catalog = Catalog(catalog_url)
    assert catalog.upgrade().applied == []  # an older package's `upgrade` leaves it as it is
    catalog.dispose()
    after = versions(catalog_url)
    assert (after.revision, after.schema_version, after.min_client_version) == (
        f"schema_v{FUTURE}", FUTURE, FUTURE - 1)  # never taken back


@pytest.mark.parametrize("min_client", [FUTURE, None])
def test_a_newer_catalog_older_clients_do_not_tolerate_is_refused(catalog_url: str, tmp_path: Path,
                                                                  min_client: int | None) -> None:
    future_catalog(catalog_url, min_client=min_client)
    with pytest.raises(CatalogTooNewError) as refused:
        Warehouse.open(catalog=catalog_url, root=str(tmp_path / "root"))
    message = str(refused.value)
    assert f"schema version {FUTURE}" in message and f"schema version {schema.SCHEMA_VERSION}" in message
    assert "upgrade the airflow-txn package" in message and __version__ in message
    assert (refused.value.catalog_version, refused.value.client_version) == (FUTURE, schema.SCHEMA_VERSION)
    catalog = Catalog(catalog_url)
    with pytest.raises(CatalogTooNewError):
        catalog.upgrade()  # an older package never takes a catalog back
    catalog.dispose()
    assert versions(catalog_url).revision == f"schema_v{FUTURE}"


# -- the command line ----------------------------------------------------------------------------------------------
@pytest.fixture
def cli(catalog_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Any:
    (tmp_path / "root").mkdir()  # doctor creates nothing
    opts = ["--catalog", catalog_url, "--root", str(tmp_path / "root")]

    def run(*args: str, code: int = exit_codes.OK) -> Any:
        assert main([*opts, *args, "--json"]) == code, capsys.readouterr()
        return json.loads(capsys.readouterr().out)

    return run


def versions_check(report: Any) -> dict[str, str]:
    return next(c for c in report["checks"] if c["name"] == "catalog schema")


def test_doctor_says_the_catalog_must_be_upgraded(catalog_url: str, cli: Any) -> None:
    catalog_at(catalog_url, "schema_v4")
    check = versions_check(cli("doctor", code=exit_codes.DOCTOR_FAILED))
    assert check["status"] == "fail"
    assert f"airflow-txn {__version__}" in check["detail"]
    assert f"schema version {schema.SCHEMA_VERSION}" in check["detail"]
    assert "catalog schema version 4 (schema_v4)" in check["detail"]
    assert "the catalog must be upgraded" in check["hint"] and "airflow-txn upgrade" in check["hint"]


def test_upgrade_says_from_and_to_and_doctor_then_agrees(catalog_url: str, cli: Any,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    catalog_at(catalog_url, "schema_v5")
    done = cli("upgrade")
    assert (done["from_schema_version"], done["to_schema_version"], done["from_revision"], done["to_revision"]) == (
        5, schema.SCHEMA_VERSION, "schema_v5", migrate.HEAD)
    assert done["min_client_version"] == migrate.MIN_CLIENT_VERSION
    assert done["applied"] == ["schema_v6", "schema_v7", "indexes_v3"]
    check = versions_check(cli("doctor"))
    assert check["status"] == "ok"
    assert f"min_client_version {migrate.MIN_CLIENT_VERSION}" in check["detail"]
    assert main(["--catalog", catalog_url, "upgrade"]) == exit_codes.OK
    text = capsys.readouterr().out
    assert f"already at schema version {schema.SCHEMA_VERSION} ({migrate.HEAD})" in text


def test_doctor_says_a_tolerated_newer_catalog_is_usable(catalog_url: str, cli: Any) -> None:
    future_catalog(catalog_url, min_client=schema.SCHEMA_VERSION)
    check = versions_check(cli("doctor"))
    assert check["status"] == "ok"
    assert (f"catalog schema version {FUTURE} (schema_v{FUTURE}), min_client_version {schema.SCHEMA_VERSION}"
            in check["detail"])
    assert "newer" in check["detail"]


def test_doctor_says_this_client_must_be_upgraded(catalog_url: str, cli: Any) -> None:
    future_catalog(catalog_url, min_client=FUTURE)
    check = versions_check(cli("doctor", code=exit_codes.DOCTOR_FAILED))
    assert check["status"] == "fail"
    assert f"min_client_version {FUTURE}" in check["detail"]
    assert "this client must be upgraded" in check["hint"] and "airflow-txn package" in check["hint"]


def test_doctor_says_a_catalog_one_schema_version_older_is_usable(catalog_url: str, cli: Any) -> None:
    catalog_at(catalog_url, "schema_v5")
    check = versions_check(cli("doctor"))
    assert check["status"] == "ok" and "catalog schema version 5 (schema_v5)" in check["detail"]
    assert "airflow-txn upgrade" in check["hint"]


def test_the_command_line_refuses_an_older_catalog_with_its_hint(catalog_url: str, cli: Any) -> None:
    catalog_at(catalog_url, "schema_v4")
    failed = cli("tables", code=exit_codes.ERROR)
    assert failed["error"]["type"] == "CatalogUpgradeRequiredError"
    assert "airflow-txn upgrade" in failed["error"]["message"]
    assert versions(catalog_url).revision == "schema_v4"
