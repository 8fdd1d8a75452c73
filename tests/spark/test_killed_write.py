"""A Spark job killed mid-write (driver, JVM and workers at once) leaves only an unregistered write
dir: nothing becomes visible, recovery rolls the transaction back once its lease runs out, and
vacuum deletes every file the job wrote (invariant 8)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pytest

import airflow_txn.spark as txn_spark
from airflow_txn import Warehouse
from tests.helpers import storage_files

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark
REPO = Path(__file__).resolve().parents[2]


def _wait_for(predicate: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def test_a_job_killed_mid_write_leaves_nothing_after_recover_and_vacuum(spark: SparkSession, tmp_path: Path) -> None:
    catalog, root = f"sqlite:///{tmp_path / 'catalog.db'}", tmp_path / "warehouse"
    wh = Warehouse.open(catalog=catalog, root=str(root))
    wh.create_table("ns.kill", pa.schema([("id", pa.int64())]))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    child = subprocess.Popen([sys.executable, "-m", "tests.spark.workers.killed_writer", catalog, str(root), "ns.kill"],
                             cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                             start_new_session=True)
    try:
        assert child.stdout is not None
        tid = child.stdout.readline().strip()
        assert tid, "the writer died before beginning its transaction"
        table_dir = root / "ns" / "kill"
        _wait_for(lambda: any(f.endswith(".parquet") and "/_temporary/" in f for f in storage_files(table_dir)),
                  240, "the Spark task to open its Parquet file")
        time.sleep(0.5)
        assert child.poll() is None, "the writer exited on its own instead of hanging mid-write"
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait(timeout=60)
        if child.stdout is not None:
            child.stdout.close()
    assert wh.transaction_info(tid)["state"] == "active" and wh.transaction_info(tid)["parts"] == []
    assert wh.read("ns.kill").num_rows == 0
    assert wh.vacuum(retention_seconds=0)["orphan_dirs_removed"] == 0  # its writer might still be alive
    _wait_for(lambda: tid in wh.recover()["rolled_back"], 30, "the lease to run out")
    assert wh.vacuum(retention_seconds=0)["orphan_dirs_removed"] == 1
    assert storage_files(root) == set()
    assert txn_spark.read(spark, wh, "ns.kill").count() == 0
    wh.close()
