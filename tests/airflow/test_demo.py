"""The README's main command: the Airflow demo, in a fresh process as scripts/demo.sh runs it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.airflow

REPO = Path(__file__).resolve().parents[2]


# pytest's 300 s default would cut the demo off before its own 600 s bound: four DAG runs of Spark tasks, each
# task also building Airflow 3.2's in-process execution API anew (3.3 reuses one), on a machine others load
@pytest.mark.timeout(660)
def test_airflow_demo_runs_end_to_end(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW_", "AIRFLOW__"))}
    result = subprocess.run([sys.executable, "-m", "demo.airflow_demo", "--home", str(tmp_path / "demo"),
                             "--dags", str(REPO / "dags")], cwd=REPO, env=env, capture_output=True, text=True,
                            timeout=600, check=False)
    out = result.stdout
    assert result.returncode == 0, out[-3000:] + result.stderr[-3000:]
    assert "AIRFLOW DEMO OK" in out
    assert "backfill.load_orders[0]            success (try 2)" in out  # a retried task ...
    assert "customers=15  orders=30  order_items=60" in out  # ... without duplicates
    assert out.count("tables unchanged: True") == 2  # after the failed task, and after the failed check
    assert "check 'every item has its order': 1 (bounds ..0) FAILED" in out  # write-audit-publish
    assert "'orphan_orders': 0, 'orphan_items': 0" in out
    assert (tmp_path / "demo" / "airflow.log").stat().st_size > 0
