"""A worker killed mid-task (SIGKILL, Spark JVM included) while staging: the lease the task renewed
runs out, and recovery rolls the transaction back; and a run marked failed by hand rolls back at once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from airflow_txn import ROLLBACK_CSN, Warehouse
from airflow_txn.catalog.txn_records import ACTIVE, ROLLED_BACK
from tests.airflow.conftest import CRASH_SPARK_CONF, connection_json
from tests.airflow.helpers import PROBE_SCHEMA, mark_run_failed, run_dag, task_states, transactions_of
from tests.helpers import catalog_time, storage_files, wait_past

pytestmark = pytest.mark.airflow

REPO = Path(__file__).resolve().parents[2]
TABLE = "probe.events"
RUN_DAG = """
import json, os, sys
from airflow_txn.airflow.version_compat import dagbag_module
DagBag = dagbag_module().DagBag
bag = DagBag(dag_folder=os.environ["AIRFLOW__CORE__DAGS_FOLDER"])
bag.get_dag(sys.argv[1]).test(run_conf=json.loads(sys.argv[2]))
"""


def _wait_for(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


# The production catalog only (a killed process's server connection and its locks die with it); the core's crash
# tests kill writers on both catalogs. The SQLite variant cost a minute of the Airflow phase.
@pytest.mark.parametrize("catalog_url", ["postgres"], indirect=True)
def test_killed_worker_leaves_nothing_visible_and_recovery_rolls_back_after_the_lease(
        dagbag: Any, txn_conn: Warehouse, catalog_url: str, root: Path, tmp_path: Path) -> None:
    wh = txn_conn
    wh.create_table(TABLE, PROBE_SCHEMA)
    watermark = wh.readable_csn()
    marker = tmp_path / "staged"
    env = {**os.environ, "AIRFLOW_CONN_AIRFLOW_TXN_DEFAULT": connection_json(catalog_url, root, CRASH_SPARK_CONF)}
    with open(tmp_path / "worker.log", "w") as log:
        worker = subprocess.Popen(
            [sys.executable, "-c", RUN_DAG, "txn_crash_probe", json.dumps({"marker": str(marker), "rows": 5})],
            cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        _wait_for(lambda: marker.exists() or worker.poll() is not None, 240, "the task to stage its rows")
        assert marker.exists(), (tmp_path / "worker.log").read_text()[-3000:]
        tid, rows = marker.read_text().split()
        assert rows == "5"
        info = wh.transaction_info(tid)
        assert info["state"] == ACTIVE and [p["rows"] for p in info["parts"]] == [5]
        assert wh.read(TABLE).num_rows == 0  # staged, not visible
        # past the lease it began with, by the catalog's clock: the running task keeps renewing it
        wait_past(wh, float(info["lease_deadline"]) + 1.0, "the task's first lease deadline to pass")
        assert wh.transaction_info(tid)["lease_deadline"] > catalog_time(wh)
        assert wh.recover()["rolled_back"] == []
    finally:
        os.killpg(worker.pid, signal.SIGKILL)  # the worker and its Spark JVM, mid-task
        worker.wait(timeout=60)

    _wait_for(lambda: wh.transaction_info(tid)["lease_deadline"] < time.time(), 30, "the lease to run out")
    assert wh.transaction_info(tid)["state"] == ACTIVE  # nobody noticed yet
    report = wh.recover()
    assert report["rolled_back"] == [tid]
    info = wh.transaction_info(tid)
    assert info["state"] == ROLLED_BACK and all(p["creation_csn"] == ROLLBACK_CSN for p in info["parts"])
    assert wh.readable_csn() == watermark and wh.read(TABLE).num_rows == 0
    wh.vacuum(retention_seconds=0)
    assert not [f for f in storage_files(root / "probe") if f.endswith(".parquet")]  # no orphan left


def test_a_run_marked_failed_by_hand_rolls_back_its_transaction(dagbag: Any, spark: Any,
                                                                txn_conn: Warehouse) -> None:
    from airflow.models.dagrun import DagRun
    from airflow.models.serialized_dag import SerializedDagModel
    from airflow.utils.session import create_session

    wh = txn_conn
    wh.create_table(TABLE, PROBE_SCHEMA)
    run = run_dag(dagbag, "txn_hold_probe", {"rows": 3})
    assert str(run.state) == "success", task_states(run)
    [txn] = transactions_of(wh, "txn_hold_probe")
    assert txn["state"] == ACTIVE  # staged, never committed

    with create_session() as session:  # what PATCH /dags/{dag_id}/dagRuns/{run_id} {"state": "failed"} does
        dag_run = session.get(DagRun, run.id)
        dag = SerializedDagModel.get_dag("txn_hold_probe", session=session)
        mark_run_failed(dag, dag_run, session)

    info = wh.transaction_info(txn["tid"])
    assert info["state"] == ROLLED_BACK and "failed" in info["failed_reason"]
    assert wh.read(TABLE).num_rows == 0
