"""Opening a warehouse creates nothing (issue 20, item 5; docs/DESIGN.md D17): the first call that writes creates
the catalog and the root, a read of a warehouse that does not exist says so (WarehouseNotFoundError, CLI exit
3), and a read-only consumer (a SELECT-only PostgreSQL role, a SQLite file and root it may not write) can list,
show and read. Real SQLite, a real PostgreSQL role, a real second user for the read-only files."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.engine import make_url

from airflow_txn import Warehouse
from airflow_txn.cli import exit_codes, main
from airflow_txn.errors import CatalogReadOnlyError, WarehouseNotFoundError

REPO = Path(__file__).resolve().parents[2]
TABLE = "shop.orders"
SCHEMA = pa.schema([("id", pa.int64())])


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def fresh_catalog(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The URL of a catalog nobody created: a SQLite file in a directory that does not exist yet, or an empty
    PostgreSQL schema."""
    if request.param == "postgres":
        return str(request.getfixturevalue("pg_schema_url"))
    return f"sqlite:///{tmp_path / 'home' / 'catalog.db'}"


def _catalog_tables(url: str) -> list[str]:
    """The tables the catalog database holds (SQLite: [] while its file does not exist, never creating it)."""
    if url.startswith("sqlite"):
        database = make_url(url).database
        assert database is not None
        if not Path(database).exists():
            return []
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return sorted(inspect(conn).get_table_names())
    finally:
        engine.dispose()


def test_open_creates_nothing_a_read_names_the_missing_warehouse_and_the_first_write_creates_it(
        fresh_catalog: str, tmp_path: Path) -> None:
    root = tmp_path / "warehouse"
    with Warehouse.open(catalog=fresh_catalog, root=str(root)) as wh, \
            Warehouse.open(catalog=fresh_catalog, root=str(root)) as other:
        assert not wh.exists()
        for read in (wh.tables, wh.transactions, wh.readable_csn, wh.commit_log, wh.recover,
                     lambda: wh.read(TABLE), lambda: wh.resolve_tid("1-1")):
            with pytest.raises(WarehouseNotFoundError, match=r"no warehouse at catalog .* \(root .*warehouse\); "
                                                             r"run `airflow-txn init`"):
                read()
        assert _catalog_tables(fresh_catalog) == [] and not root.exists()  # the reads created nothing either
        if fresh_catalog.startswith("sqlite"):
            assert not (tmp_path / "home").exists()

        wh.create_table(TABLE, SCHEMA)  # the first write creates catalog and root
        assert root.is_dir() and "txn_transactions" in _catalog_tables(fresh_catalog)
        with wh.begin() as t:
            t.append(TABLE, pa.table({"id": [1, 2]}))
        assert other.exists() and other.tables() == [TABLE]  # opened before it existed: finds it now
        assert other.read(TABLE).num_rows == 2
        other.init()  # init on an existing warehouse changes nothing
        assert other.read(TABLE).num_rows == 2


def test_begin_creates_a_missing_warehouse(tmp_path: Path) -> None:
    url, root = f"sqlite:///{tmp_path / 'catalog.db'}", tmp_path / "warehouse"
    with Warehouse.open(catalog=url, root=str(root)) as wh:
        t = wh.begin(label="first")
        t.rollback()
        assert root.is_dir() and [r["label"] for r in wh.transactions()] == ["first"]


def test_cli_read_commands_exit_3_on_a_missing_warehouse_and_create_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    catalog, root = tmp_path / "typo" / "catalog.db", tmp_path / "typo" / "warehouse"
    where = ["--catalog", f"sqlite:///{catalog}", "--root", str(root)]
    for command in (["list"], ["tables"], ["show", "1-1"], ["watermark"], ["read", TABLE]):
        capsys.readouterr()
        assert main([*where, *command, "--json"]) == exit_codes.NOT_FOUND, command
        out, err = capsys.readouterr()
        error = json.loads(out)["error"]
        assert error["type"] == "WarehouseNotFoundError" and error["exit_code"] == exit_codes.NOT_FOUND
        assert f"no warehouse at catalog sqlite:///{catalog}" in err and "run `airflow-txn init`" in err
    assert not (tmp_path / "typo").exists()
    assert main([*where, "init", "--json"]) == exit_codes.OK
    assert catalog.exists() and root.is_dir()
    capsys.readouterr()
    assert main([*where, "list", "--json"]) == exit_codes.OK
    assert json.loads(capsys.readouterr().out) == []


# -- read-only consumers ---------------------------------------------------------------------------------------
def _committed(wh: Warehouse) -> str:
    """A table with one committed transaction of three rows; its tid."""
    wh.create_table(TABLE, SCHEMA)
    with wh.begin(label="load") as t:
        t.append(TABLE, pa.table({"id": [1, 2, 3]}))
    return t.tid


def _cli_json(args: list[str], capsys: pytest.CaptureFixture[str]) -> object:
    capsys.readouterr()
    code = main([*args, "--json"])
    out, err = capsys.readouterr()
    assert code == exit_codes.OK, err
    return json.loads(out)


@pytest.fixture
def read_only_role(pg_schema_url: str) -> Iterator[str]:
    """The URL of a PostgreSQL role that may only SELECT from the test's schema (and its tables made so far)."""
    url = make_url(pg_schema_url)
    schema = pg_schema_url.rsplit("search_path%3D", 1)[1]
    role, password = f"ro_{uuid.uuid4().hex[:10]}", uuid.uuid4().hex
    engine = create_engine(url.set(query={}), isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(text(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'"))
        conn.execute(text(f'GRANT USAGE ON SCHEMA "{schema}" TO {role}'))
    yield url.set(username=role, password=password).render_as_string(hide_password=False)
    with engine.connect() as conn:
        conn.execute(text(f"DROP OWNED BY {role}"))
        conn.execute(text(f"DROP ROLE {role}"))
    engine.dispose()


@pytest.mark.postgres
def test_a_select_only_postgres_role_lists_shows_and_reads_and_may_not_write(
        pg_schema_url: str, read_only_role: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "warehouse"
    with Warehouse.open(catalog=read_only_role, root=str(root)) as reader, pytest.raises(WarehouseNotFoundError):
        reader.tables()  # nothing there yet, and the role could not create it
    with Warehouse.open(catalog=pg_schema_url, root=str(root)) as owner:
        tid = _committed(owner)
    schema = pg_schema_url.rsplit("search_path%3D", 1)[1]
    role = make_url(read_only_role).username
    engine = create_engine(pg_schema_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(text(f'GRANT SELECT ON ALL TABLES IN SCHEMA "{schema}" TO {role}'))
    engine.dispose()

    with Warehouse.open(catalog=read_only_role, root=str(root)) as reader:
        assert reader.tables() == [TABLE]
        assert [r["tid"] for r in reader.transactions()] == [tid]
        assert reader.transaction_info(tid)["state"] == "committed"
        assert reader.read(TABLE).column("id").to_pylist() == [1, 2, 3]
        with pytest.raises(CatalogReadOnlyError, match="the database role may not write"):
            reader.begin()
    where = ["--catalog", read_only_role, "--root", str(root)]
    assert [r["tid"] for r in _cli_json([*where, "list"], capsys)] == [tid]  # type: ignore[union-attr]
    assert _cli_json([*where, "show", tid[:8]], capsys)["tid"] == tid  # type: ignore[index]
    assert _cli_json([*where, "read", TABLE], capsys)["num_rows"] == 3  # type: ignore[index]
    assert _cli_json([*where, "tables"], capsys)[0]["rows"] == 3  # type: ignore[index]


_READER = """
import json, sys
from airflow_txn import Warehouse
from airflow_txn.errors import TxnError
catalog, root, tid = sys.argv[1:]
with Warehouse.open(catalog=catalog, root=root) as wh:
    found = {"tables": wh.tables(), "state": wh.transaction_info(tid)["state"],
             "ids": wh.read("shop.orders").column("id").to_pylist()}
    try:
        wh.begin()
    except TxnError as exc:
        found["begin"] = type(exc).__name__
print(json.dumps(found))
"""


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory another user can enter (pytest's tmp_path is private to this one), removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix="airflow_txn_ro_"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _run_as_reader(catalog: Path, root: Path, tid: str) -> dict[str, object]:
    """_READER in another process that may not write the catalog file, its directory or the root: as user
    `nobody` when the tests run as root (root writes anything), else with the write bits taken away."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "HOME": str(catalog.parent)}
    if os.geteuid() == 0:
        prefix = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
        if shutil.which("setpriv") is None or subprocess.run(
                [*prefix, sys.executable, "-c", "import airflow_txn.core.warehouse"], env=env, capture_output=True,
                timeout=120).returncode != 0:
            pytest.skip("root cannot run this checkout's Python as user nobody (setpriv missing, or the checkout "
                        "or virtualenv is not readable by others): no unprivileged reader to test with")
    else:
        prefix = []
        for path in (catalog.parent, catalog, root):
            path.chmod(path.stat().st_mode & ~0o222)
    done = subprocess.run([*prefix, sys.executable, "-c", _READER, f"sqlite:///{catalog}", str(root), tid],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    found: dict[str, object] = json.loads(done.stdout)
    return found


def test_a_reader_that_may_not_write_the_sqlite_file_or_the_root_lists_shows_and_reads(shared_dir: Path) -> None:
    """While a writer has the catalog open (its -wal and -shm beside the file) and after it closed it."""
    catalog, root = shared_dir / "catalog.db", shared_dir / "warehouse"
    expected = {"tables": [TABLE], "state": "committed", "ids": [1, 2, 3], "begin": "CatalogReadOnlyError"}
    with Warehouse.open(catalog=f"sqlite:///{catalog}", root=str(root)) as owner:
        tid = _committed(owner)
        assert Path(f"{catalog}-wal").exists()  # the writer's pooled connections keep the WAL open
        assert _run_as_reader(catalog, root, tid) == expected
    assert not Path(f"{catalog}-wal").exists()  # the last connection checkpointed the WAL into the file
    assert _run_as_reader(catalog, root, tid) == expected
