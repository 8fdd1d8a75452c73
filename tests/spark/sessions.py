"""The local SparkSession, the Spark Connect session and `any_spark`, for every suite that runs Spark (tests/spark,
tests/conformance, tests/airflow): tests/conftest.py loads this module as a plugin, so one session and one Connect
server serve the whole run (under dag.test(), SparkTransactionOperator reuses the session).

`spark` is one local SparkSession for the whole run (local[2], UI off, few shuffle partitions, the JVM options
of tests.helpers.SPARK_TEST_JVM, as the Connect server has); `connect_spark` is
a Spark Connect session on a real server started once for the run; `any_spark` runs a test on both. SPARK_LOCAL_IP
is set to 127.0.0.1 unless the environment says otherwise; no package is downloaded (no spark.jars.packages). Both
keep Spark's own warehouse directory (spark.sql.warehouse.dir) in a temporary directory, not the checkout.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from tests.helpers import SPARK_TEST_CONF, SPARK_TEST_JVM

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SPARK_CONF = {**SPARK_TEST_CONF, **SPARK_TEST_JVM, "spark.python.worker.reuse": "true"}


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # Python UDFs run in this interpreter
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName("airflow_txn-tests")
    for key, value in {**SPARK_CONF, **_warehouse_dir(tmp_path_factory)}.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
    # py4j logs "Closing down clientserver connection" from __del__ at interpreter exit, after
    # logging's handlers are closed ("--- Logging error ---"); it has nothing left worth saying
    logging.getLogger("py4j").setLevel(logging.WARNING)


@pytest.fixture(scope="session")
def connect_spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    """A Spark Connect session on a real Spark Connect server started for the run (tests.harness.spark_connect):
    no JVM in this process. It is made with the Connect session's own builder, so pyspark does not switch this
    process to Connect mode (the classic `spark` session's tests keep working beside it)."""
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    from tests.harness.spark_connect import SparkConnectUnavailable, server

    try:
        conf = {**SPARK_TEST_JVM, **_warehouse_dir(tmp_path_factory)}
        with server(tmp_path_factory.mktemp("spark-connect"), conf=conf) as connect:
            session = ConnectSession.builder.remote(connect.url).getOrCreate()
            yield session
            session.stop()
    except SparkConnectUnavailable as exc:
        pytest.fail(f"the Spark Connect server cannot start: {exc}")


def _warehouse_dir(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Spark's own warehouse directory (CREATE DATABASE, airflow_txn.spark.register_tables) in a temporary
    directory: its default is `spark-warehouse/` in the working directory, the checkout."""
    return {"spark.sql.warehouse.dir": str(tmp_path_factory.mktemp("spark-warehouse"))}


@pytest.fixture(params=["local", "connect"])
def any_spark(request: pytest.FixtureRequest) -> SparkSession:
    """The local SparkSession, then a Spark Connect session: tests taking it run through both. With the Connect
    session this process is in Connect mode for the test, as SparkSession.builder.remote() leaves it (so
    pyspark.sql.functions makes Connect columns)."""
    if request.param == "connect":
        request.getfixturevalue("monkeypatch").setenv("SPARK_CONNECT_MODE_ENABLED", "1")
    session: SparkSession = request.getfixturevalue("spark" if request.param == "local" else "connect_spark")
    return session
