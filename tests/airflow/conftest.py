"""Harness of the Airflow tests: a throw-away AIRFLOW_HOME with a SQLite metadata database, a DAG
folder holding dags/*.py and dag_files/*.py, and the
`airflow_txn_default` connection pointed at each test's warehouse (SQLite or PostgreSQL catalog).

Airflow reads its configuration when first imported, so the environment is set when this file is
loaded, before any test module imports Airflow. Without Airflow installed these tests are skipped.

The SparkSession is the run's one `spark` (tests/spark/sessions.py, loaded by tests/conftest.py):
SparkTransactionOperator reuses it under dag.test().
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from airflow_txn import Warehouse
from tests.helpers import SPARK_TEST_CONF, SPARK_TEST_JVM

if TYPE_CHECKING:
    pass

REPO = Path(__file__).resolve().parents[2]
HAVE_AIRFLOW = importlib.util.find_spec("airflow") is not None and importlib.util.find_spec("pyspark") is not None
collect_ignore_glob = [] if HAVE_AIRFLOW else ["test_*.py"]

SPARK_CONF = SPARK_TEST_CONF
"""The session conf (benchmarks/b11_airflow_dag.py measures with it too); the tests' own JVMs add SPARK_TEST_JVM."""
CRASH_SPARK_CONF = {**SPARK_CONF, **SPARK_TEST_JVM, "spark.master": "local[1]"}


def _prepare_airflow_home() -> Path:
    base = Path(tempfile.mkdtemp(prefix="airflow_txn_airflow_tests_"))
    dags = base / "dags"
    dags.mkdir()
    for source in [*sorted((REPO / "dags").glob("*.py")), *sorted((REPO / "tests/airflow/dag_files").glob("*.py"))]:
        (dags / source.name).symlink_to(source)
    os.environ.update({
        "AIRFLOW_HOME": str(base / "home"),
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(base / "plugins"),
        # the default warehouse (no connection set, e.g. DAG files parsed outside a test) lives here too, not in
        # ~/.airflow_txn; named on purpose, so a DAG file parsed without the connection may read its warehouse
        # id there (parsing never falls back to the embedded default: parse_warehouse creates it first)
        "AIRFLOW_TXN_HOME": str(base / "txn_home"),
        "AIRFLOW_TXN_CATALOG": f"sqlite:///{base / 'txn_home' / 'catalog.db'}",
    })
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    return base


BASE = _prepare_airflow_home() if HAVE_AIRFLOW else None
DAGS_FOLDER = BASE / "dags" if BASE is not None else None


# Warnings Airflow's own imports raise; every other warning still fails the test (pyproject: error).
AIRFLOW_WARNING_FILTERS = [
    "ignore:Using .httpx. with .starlette.testclient. is deprecated",
    # DagRun.serialized_dag joins on dag_id alone: SQLAlchemy warns once a DAG has two versions, as a DAG whose
    # table Assets name the warehouse has when two tests' warehouses (two ids) parse it
    "ignore:Multiple rows returned with uselist=False for lazily-loaded attribute 'DagRun.serialized_dag'",
]


def pytest_configure(config: pytest.Config) -> None:
    for line in AIRFLOW_WARNING_FILTERS:
        config.addinivalue_line("filterwarnings", line)


def pytest_unconfigure(config: pytest.Config) -> None:
    if BASE is not None:
        shutil.rmtree(BASE, ignore_errors=True)


@pytest.fixture(scope="session")
def airflow_db() -> None:
    """Airflow's metadata database (SQLite under the throw-away AIRFLOW_HOME), created once."""
    from airflow.utils import db

    db.initdb()


@pytest.fixture(scope="session")
def parse_warehouse() -> None:
    """The warehouse of AIRFLOW_TXN_CATALOG, created: the example DAGs parsed with no connection set name
    their Assets by its id (a DAG file never creates a warehouse while parsed)."""
    with Warehouse.open() as wh:
        wh.init()


@pytest.fixture(autouse=True)
def _close_shared_warehouses() -> Iterator[None]:
    """Each test's hooks share one Warehouse per configuration (TxnHook.get_conn); close them after the test,
    before its catalog (a PostgreSQL schema, a temporary directory) goes away."""
    yield
    from airflow_txn.airflow.hooks.txn import close_warehouses

    close_warehouses()


@pytest.fixture(scope="session")
def dagbag(airflow_db: None, parse_warehouse: None) -> Any:
    from airflow_txn.airflow.version_compat import dagbag_module

    bag = dagbag_module().DagBag(dag_folder=str(DAGS_FOLDER))
    assert bag.import_errors == {}, bag.import_errors
    return bag


def connection_json(catalog_url: str, root: Path, spark_conf: dict[str, str] | None = None) -> str:
    return json.dumps({"conn_type": "airflow_txn", "extra": {
        "catalog": catalog_url, "root": str(root), "spark_conf": spark_conf or SPARK_CONF}})


@pytest.fixture
def txn_conn(catalog_url: str, root: Path, wh: Warehouse, monkeypatch: pytest.MonkeyPatch) -> Warehouse:
    """Point connection `airflow_txn_default` at this test's warehouse; returns the warehouse."""
    monkeypatch.setenv("AIRFLOW_CONN_AIRFLOW_TXN_DEFAULT", connection_json(catalog_url, root))
    return wh
