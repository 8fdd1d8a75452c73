"""Harness of the real-Airflow tests: ONE deployment for the module (tests/harness/airflow_services.py: the wheel in
its own venv, api-server, scheduler, dag-processor and triggerer on a PostgreSQL metadata database), a Spark Connect
server the Spark tasks attach to, and a warehouse on a PostgreSQL catalog of its own that the deployment's
`airflow_txn_default` connection (created through the REST API, so it lives in the metadata database) names.

Run by scripts/test.sh's own phase (`-m real_airflow`, one pytest process: the services are the parallelism).
"""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from airflow_txn import Warehouse
from tests.conftest import pg_base_url
from tests.harness.airflow_services import Deployment, deployment, fresh_database

REPO = Path(__file__).resolve().parents[2]
HAVE_AIRFLOW = importlib.util.find_spec("airflow") is not None and importlib.util.find_spec("pyspark") is not None
collect_ignore_glob = [] if HAVE_AIRFLOW and importlib.util.find_spec("psycopg2") is not None else ["test_*.py"]
DAG_FILES = [REPO / "dags" / "multi_table_backfill.py", REPO / "dags" / "cdc_apply.py",
             Path(__file__).parent / "dag_files" / "real_probes.py",
             REPO / "tests" / "airflow" / "dag_files" / "txn_mapped_group_probe.py"]
CONN_ID = "airflow_txn_default"


@dataclass
class RealAirflow:
    af: Deployment
    wh: Warehouse
    catalog: str
    root: Path
    workdir: Path


@pytest.fixture(scope="session")
def real_airflow(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealAirflow]:
    if "AIRFLOW_TXN_TEST_PG" not in os.environ:
        pytest.skip("the real-Airflow tests need PostgreSQL: run scripts/test.sh (it sets AIRFLOW_TXN_TEST_PG)")
    from tests.harness.spark_connect import server

    workdir = tmp_path_factory.mktemp("real_airflow")
    root = workdir / "warehouse"
    with fresh_database(pg_base_url(), "airflow_txn_catalog") as catalog, \
            server(workdir / "spark_connect") as connect, \
            deployment(workdir / "airflow", pg_base_url(), DAG_FILES,
                       env={"AIRFLOW_TXN_HOME": str(workdir / "txn_home")}) as af:
        extra = {"catalog": catalog, "root": str(root), "spark_conf": {"spark.remote": connect.url}}
        af.api("POST", "/api/v2/connections", {"connection_id": CONN_ID, "conn_type": "airflow_txn",
                                               "extra": json.dumps(extra)}, ok=(201,))
        wh = Warehouse.open(catalog=catalog, root=str(root))
        wh.init()
        try:
            yield RealAirflow(af, wh, catalog, root, workdir)
        finally:
            wh.close()
