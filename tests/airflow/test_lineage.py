"""OpenLineage (issue 20, item 2): the real apache-airflow-providers-openlineage, its file transport, and two
dag.test() runs of txn_lineage_probe (pyarrow writers in a transaction_group, then CommitCSNSensor) in a fresh
Airflow process, the transport set before Airflow loads its plugins as in a deployment: a commit reports the
tables it changed as outputs at version = the commit CSN with their row counts, a rollback reports none."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from airflow_txn import Warehouse
from tests.airflow.conftest import REPO

pytest.importorskip("airflow.providers.openlineage", reason="the [openlineage] extra is not installed")
pytestmark = pytest.mark.airflow

PROBE = REPO / "tests/airflow/dag_files/txn_lineage_probe.py"
WAREHOUSE_ID = "0123456789abcdef" * 2
RUN_BOTH = """
import json, sys
from airflow.dag_processing.dagbag import DagBag

bag = DagBag(dag_folder=sys.argv[1])
assert not bag.import_errors, bag.import_errors
dag = bag.get_dag("txn_lineage_probe")
for fail in (False, True):
    run = dag.test(run_conf={"fail": fail})
    print("RESULT " + json.dumps({"run_id": run.run_id, "state": str(run.state)}))
"""


def test_provider_info_converts_a_table_asset_to_the_dataset_the_operators_report() -> None:
    """The real providers manager registers lineage.to_openlineage_dataset for the airflow-txn scheme; the
    OpenLineage provider's translation of a table's Asset names the dataset the commit reports for it."""
    from airflow.providers.openlineage.utils.utils import translate_airflow_asset

    from airflow_txn.airflow import table_asset
    from airflow_txn.airflow.lineage import TableVersion

    converted = translate_airflow_asset(table_asset("shop.order_items", warehouse_id=WAREHOUSE_ID), None)
    assert converted is not None
    assert (converted.namespace, converted.name) == TableVersion(WAREHOUSE_ID, "shop.order_items", 7).namespace_and_name
    assert (converted.namespace, converted.name) == (f"airflow-txn://{WAREHOUSE_ID}", "shop.order_items")


def task_events(path: Path, run_id: str) -> dict[tuple[str, str], dict[str, Any]]:
    """{(task_id, eventType): event} of the task events of DAG run `run_id` in the transport's file."""
    found = {}
    for line in path.read_text().splitlines():
        event = json.loads(line)
        airflow = event["run"]["facets"].get("airflow", {})
        task = airflow.get("taskInstance") or {}
        if airflow.get("dagRun", {}).get("run_id") == run_id and task:
            found[(airflow["task"]["task_id"], event["eventType"])] = event
    return found


def datasets(event: dict[str, Any], kind: str, wh: Warehouse) -> dict[str, dict[str, Any]]:
    """{name: dataset} of the event's inputs or outputs in the warehouse's namespace (checked: the tables'
    Assets name the warehouse the same way, assets.table_uri)."""
    listed = event[kind]
    assert all(d["namespace"] == f"airflow-txn://{wh.warehouse_id}" for d in listed), listed
    return {d["name"]: d for d in listed}


@pytest.mark.parametrize("catalog_url", ["sqlite"], indirect=True)
def test_commit_reports_outputs_at_its_csn_and_a_rollback_none(airflow_db: None, txn_conn: Warehouse,
                                                                tmp_path: Path) -> None:
    wh = txn_conn
    for table in ("lineage.source", "lineage.target", "lineage.audit"):
        wh.create_table(table, pa.schema([("id", pa.int64())]))
    with wh.begin() as txn:
        txn.append("lineage.source", pa.table({"id": [1, 2, 3]}))
    source_csn = wh.last_commit_csn("lineage.source")
    events = tmp_path / "openlineage.jsonl"
    env = {**os.environ, "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(
        {"type": "file", "log_file_path": str(events), "append": True}),
        "AIRFLOW__OPENLINEAGE__NAMESPACE": "lineage-test"}
    done = subprocess.run([sys.executable, "-c", RUN_BOTH, str(PROBE)], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    committed, rolled_back = (json.loads(line.removeprefix("RESULT ")) for line in done.stdout.splitlines()
                              if line.startswith("RESULT "))
    assert (committed["state"], rolled_back["state"]) == ("success", "failed")

    ran = task_events(events, committed["run_id"])
    commit = ran[("load.commit", "COMPLETE")]
    csn = commit["run"]["facets"]["airflowTxn"]["commitCsn"]
    assert csn == wh.last_commit_csn("lineage.target") > source_csn
    outputs = datasets(commit, "outputs", wh)
    assert sorted(outputs) == ["lineage.audit", "lineage.target"]
    assert {n: d["facets"]["version"]["datasetVersion"] for n, d in outputs.items()} == {
        "lineage.audit": str(csn), "lineage.target": str(csn)}
    assert {n: d["outputFacets"]["outputStatistics"]["rowCount"] for n, d in outputs.items()} == {
        "lineage.audit": 1, "lineage.target": 3}
    assert all(d["outputFacets"]["outputStatistics"]["size"] > 0 for d in outputs.values())
    # what the transaction read, at the version its snapshot saw: the commit that wrote lineage.source
    assert {n: d["facets"]["version"]["datasetVersion"] for n, d in datasets(commit, "inputs", wh).items()} == {
        "lineage.source": str(source_csn)}
    # the writers stage: they report what they read, never an output
    copy = ran[("load.copy", "COMPLETE")]
    assert sorted(datasets(copy, "inputs", wh)) == ["lineage.source"] and copy["outputs"] == []
    assert copy["run"]["facets"]["airflowTxn"]["stagingKey"] == "txn_lineage_probe/load.copy/-1"
    assert ran[("load.audit", "COMPLETE")]["outputs"] == []
    # the sensor: the table it waited for, at the commit's version
    wait = ran[("wait", "COMPLETE")]
    assert {n: d["facets"]["version"]["datasetVersion"] for n, d in datasets(wait, "inputs", wh).items()} == {
        "lineage.target": str(csn)}

    failed = task_events(events, rolled_back["run_id"])
    assert ("load.audit", "FAIL") in failed and ("load.rollback", "COMPLETE") in failed
    assert all(event["outputs"] == [] for event in failed.values()), [
        (key, event["outputs"]) for key, event in failed.items() if event["outputs"]]
    assert failed[("load.outcome", "FAIL")]["run"]["facets"]["airflowTxn"]["state"] == "rolled_back"
    assert wh.last_commit_csn("lineage.target") == csn  # the rollback changed nothing
