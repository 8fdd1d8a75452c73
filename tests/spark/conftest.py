"""One local SparkSession for the whole run (local[2], UI off, few shuffle partitions), and a
warehouse on SQLite for the Spark tests that do not need to run on both catalogs.

Tests here are marked `spark`; scripts/test.sh runs them in their own phase. SPARK_LOCAL_IP is set
to 127.0.0.1 unless the environment says otherwise; no package is downloaded (no spark.jars.packages).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from airflow_txn import Warehouse
from tests.helpers import SPARK_TEST_CONF

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SPARK_CONF = {**SPARK_TEST_CONF, "spark.python.worker.reuse": "true"}


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # Python UDFs run in this interpreter
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName("airflow_txn-tests")
    for key, value in SPARK_CONF.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
    # py4j logs "Closing down clientserver connection" from __del__ at interpreter exit, after
    # logging's handlers are closed ("--- Logging error ---"); it has nothing left worth saying
    logging.getLogger("py4j").setLevel(logging.WARNING)


@pytest.fixture
def swh(tmp_path: Path) -> Iterator[Warehouse]:
    """A warehouse on a SQLite catalog (the Spark tests' default; `wh` runs on both catalogs)."""
    warehouse = Warehouse.open(catalog=f"sqlite:///{tmp_path / 'catalog.db'}", root=str(tmp_path / "warehouse"))
    yield warehouse
    warehouse.close()
