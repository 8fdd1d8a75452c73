"""OpenLineage (issue 20, item 2; issue 29, item 6): the real apache-airflow-providers-openlineage, its file
transport, and dag.test() runs of txn_lineage_probe (pyarrow writers in a transaction_group that declares its
tables, CommitCSNSensor, a `@task.txn_read` reader) in a fresh Airflow process, the transport set before
Airflow loads its plugins as in a deployment. The probe runs three times once per module (committed; a writer
fails and the group rolls back; a writer rolls the transaction back and the commit fails), and each test reads
the events the provider wrote: a commit reports the tables it changed as outputs on its COMPLETE event only,
at version = the commit CSN, with schema, storage and output statistics facets; readers report their tables
as inputs at the version read; START and FAIL events carry no outputs; the transaction's run facet is on
every event of a task that knows its transaction, FAIL events included."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from airflow_txn import Warehouse
from tests.airflow.conftest import REPO, connection_json

pytest.importorskip("airflow.providers.openlineage", reason="the [openlineage] extra is not installed")
pytestmark = pytest.mark.airflow

PROBE = REPO / "tests/airflow/dag_files/txn_lineage_probe.py"
WAREHOUSE_ID = "0123456789abcdef" * 2
RUNS = ({"fail": False, "abort": False}, {"fail": True, "abort": False}, {"fail": False, "abort": True})
RUN_ALL = """
import json, sys
from airflow_txn.airflow.version_compat import dagbag_module
DagBag = dagbag_module().DagBag

bag = DagBag(dag_folder=sys.argv[1])
assert not bag.import_errors, bag.import_errors
dag = bag.get_dag("txn_lineage_probe")
with open(sys.argv[3], "w") as results:  # not stdout: the OpenLineage provider logs there from its own threads
    for conf in json.loads(sys.argv[2]):
        run = dag.test(run_conf=conf)
        results.write(json.dumps({"run_id": run.run_id, "state": str(run.state)}) + "\\n")
"""
SCHEMAS = {"lineage.source": pa.schema([("id", pa.int64())]),
           "lineage.target": pa.schema([("id", pa.int64())]),
           "lineage.audit": pa.schema([("id", pa.int64()), ("note", pa.string()),
                                       ("at", pa.timestamp("us", tz="UTC"))])}
Events = dict[tuple[str, str], dict[str, Any]]


def test_provider_info_converts_a_table_asset_to_the_dataset_the_operators_report() -> None:
    """The real providers manager registers lineage.to_openlineage_dataset for the airflow-txn scheme; the
    OpenLineage provider's translation of a table's Asset names the dataset the commit reports for it."""
    from airflow.providers.openlineage.utils.utils import translate_airflow_asset

    from airflow_txn.airflow import table_asset
    from airflow_txn.airflow.assets.lineage import TableVersion

    converted = translate_airflow_asset(table_asset("shop.order_items", warehouse_id=WAREHOUSE_ID), None)
    assert converted is not None
    assert (converted.namespace, converted.name) == TableVersion(WAREHOUSE_ID, "shop.order_items", 7).namespace_and_name
    assert (converted.namespace, converted.name) == (f"airflow-txn://{WAREHOUSE_ID}", "shop.order_items")


@dataclass
class ProbeRuns:
    """The three runs of the probe: the warehouse, and each run's task events {(task_id, eventType): event}."""

    wh: Warehouse
    source_csn: int
    committed: Events
    failed: Events
    aborted: Events
    states: list[str]


def task_events(path: Path, run_id: str) -> Events:
    """{(task_id, eventType): event} of the task events of DAG run `run_id` in the transport's file."""
    found = {}
    for line in path.read_text().splitlines():
        event = json.loads(line)
        airflow = event["run"]["facets"].get("airflow", {})
        task = airflow.get("taskInstance") or {}
        if airflow.get("dagRun", {}).get("run_id") == run_id and task:
            found[(airflow["task"]["task_id"], event["eventType"])] = event
    return found


@pytest.fixture(scope="module")
def probe(airflow_db: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProbeRuns]:
    base = tmp_path_factory.mktemp("lineage")
    catalog, root = f"sqlite:///{base / 'catalog.db'}", base / "warehouse"
    wh = Warehouse.open(catalog=catalog, root=str(root))
    wh.init()
    try:
        for table, schema in SCHEMAS.items():
            wh.create_table(table, schema)
        with wh.begin() as txn:
            txn.append("lineage.source", pa.table({"id": [1, 2, 3]}))
        source_csn = wh.last_commit_csn("lineage.source")
        assert source_csn is not None
        events = base / "openlineage.jsonl"
        env = {**os.environ, "AIRFLOW_CONN_AIRFLOW_TXN_DEFAULT": connection_json(catalog, root),
               "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(
                   {"type": "file", "log_file_path": str(events), "append": True}),
               "AIRFLOW__OPENLINEAGE__NAMESPACE": "lineage-test",
               # the provider emits from a forked process or a thread it waits for at most this long, then drops
               # the event (default 10 s): on a loaded 2-core machine whole runs' events went missing
               "AIRFLOW__OPENLINEAGE__EXECUTION_TIMEOUT": "300"}
        ran = base / "runs.jsonl"
        done = subprocess.run([sys.executable, "-c", RUN_ALL, str(PROBE), json.dumps(RUNS), str(ran)], cwd=REPO,
                              env=env, capture_output=True, text=True, timeout=600, check=False)
        assert done.returncode == 0, done.stderr[-4000:]
        results = [json.loads(line) for line in ran.read_text().splitlines()]
        assert len(results) == len(RUNS), results
        committed, failed, aborted = (task_events(events, r["run_id"]) for r in results)
        yield ProbeRuns(wh, source_csn, committed, failed, aborted, [r["state"] for r in results])
    finally:
        wh.close()


def datasets(event: dict[str, Any], kind: str, wh: Warehouse) -> dict[str, dict[str, Any]]:
    """{name: dataset} of the event's inputs or outputs in the warehouse's namespace (checked: the tables'
    Assets name the warehouse the same way, assets.tables.table_uri)."""
    listed = event[kind]
    assert all(d["namespace"] == f"airflow-txn://{wh.warehouse_id}" for d in listed), listed
    return {d["name"]: d for d in listed}


def versions(event: dict[str, Any], kind: str, wh: Warehouse) -> dict[str, str]:
    return {n: d["facets"]["version"]["datasetVersion"] for n, d in datasets(event, kind, wh).items()}


def test_commit_reports_outputs_at_its_csn_and_a_rollback_none(probe: ProbeRuns) -> None:
    wh, ran = probe.wh, probe.committed
    assert probe.states == ["success", "failed", "failed"]
    commit = ran[("load.commit", "COMPLETE")]
    csn = commit["run"]["facets"]["airflowTxn"]["commitCsn"]
    assert csn == wh.last_commit_csn("lineage.target") > probe.source_csn
    outputs = datasets(commit, "outputs", wh)
    assert sorted(outputs) == ["lineage.audit", "lineage.target"]
    assert versions(commit, "outputs", wh) == {"lineage.audit": str(csn), "lineage.target": str(csn)}
    assert {n: d["outputFacets"]["outputStatistics"]["rowCount"] for n, d in outputs.items()} == {
        "lineage.audit": 1, "lineage.target": 3}
    assert all(d["outputFacets"]["outputStatistics"]["size"] > 0 for d in outputs.values())
    # what the transaction read, at the version its snapshot saw: the commit that wrote lineage.source
    assert versions(commit, "inputs", wh) == {"lineage.source": str(probe.source_csn)}
    # the writers stage: they report what they read, never an output
    copy = ran[("load.copy", "COMPLETE")]
    assert sorted(datasets(copy, "inputs", wh)) == ["lineage.source"] and copy["outputs"] == []
    assert copy["run"]["facets"]["airflowTxn"]["stagingKey"] == "txn_lineage_probe/load.copy/-1"
    assert ran[("load.audit", "COMPLETE")]["outputs"] == []
    # the sensor: the table it waited for, at the commit's version
    assert versions(ran[("wait", "COMPLETE")], "inputs", wh) == {"lineage.target": str(csn)}

    failed = probe.failed
    assert ("load.audit", "FAIL") in failed and ("load.rollback", "COMPLETE") in failed
    assert all(event["outputs"] == [] for event in failed.values()), [
        (key, event["outputs"]) for key, event in failed.items() if event["outputs"]]
    assert failed[("load.outcome", "FAIL")]["run"]["facets"]["airflowTxn"]["state"] == "rolled_back"
    assert wh.last_commit_csn("lineage.target") == csn  # the rollbacks changed nothing


def test_snapshot_reader_reports_its_tables_at_the_version_read(probe: ProbeRuns) -> None:
    """`@task.txn_read` (a SnapshotReadOperator) reports each table it read as an input, version = the
    table's commit the snapshot saw, and the snapshot in its run facet."""
    wh, ran = probe.wh, probe.committed
    csn = ran[("load.commit", "COMPLETE")]["run"]["facets"]["airflowTxn"]["commitCsn"]
    report = ran[("report", "COMPLETE")]
    assert versions(report, "inputs", wh) == {"lineage.target": str(csn), "lineage.source": str(probe.source_csn)}
    assert report["outputs"] == []
    assert report["run"]["facets"]["airflowTxn"]["snapshotCsn"] == csn


def test_datasets_carry_schema_and_storage_facets(probe: ProbeRuns) -> None:
    """Inputs and outputs name their columns (Arrow type strings) and how the table is stored."""
    wh, ran = probe.wh, probe.committed
    reported = [*datasets(ran[("load.commit", "COMPLETE")], "outputs", wh).items(),
                *datasets(ran[("load.commit", "COMPLETE")], "inputs", wh).items(),
                *datasets(ran[("report", "COMPLETE")], "inputs", wh).items(),
                *datasets(ran[("wait", "COMPLETE")], "inputs", wh).items(),
                *datasets(ran[("load.copy", "COMPLETE")], "inputs", wh).items()]
    assert len(reported) == 7
    for name, dataset in reported:
        fields = [(f["name"], f["type"]) for f in dataset["facets"]["schema"]["fields"]]
        assert fields == [(f.name, str(f.type)) for f in SCHEMAS[name]], (name, fields)
        storage = dataset["facets"]["storage"]
        assert (storage["storageLayer"], storage["fileFormat"]) == ("airflow-txn", "parquet"), storage
    audit = datasets(ran[("load.commit", "COMPLETE")], "outputs", wh)["lineage.audit"]
    assert [f["type"] for f in audit["facets"]["schema"]["fields"]] == ["int64", "string", "timestamp[us, tz=UTC]"]


def test_outputs_only_on_the_commits_complete_event(probe: ProbeRuns) -> None:
    """A commit declaring its tables (outlets) lists them on no START event, and a commit that fails (the
    transaction was rolled back) on no FAIL event: outputs appear on the commit's COMPLETE event only."""
    everything = {**{("committed", *k): e for k, e in probe.committed.items()},
                  **{("failed", *k): e for k, e in probe.failed.items()},
                  **{("aborted", *k): e for k, e in probe.aborted.items()}}
    assert ("committed", "load.commit", "START") in everything
    assert ("aborted", "load.commit", "FAIL") in everything
    with_outputs = sorted(key for key, event in everything.items() if event["outputs"])
    assert with_outputs == [("committed", "load.commit", "COMPLETE")]


def test_failure_events_carry_the_transaction_facet(probe: ProbeRuns) -> None:
    """The FAIL event of a writer that raised, and of a commit that found its transaction rolled back, name
    the transaction and its state."""
    writer = probe.failed[("load.audit", "FAIL")]["run"]["facets"]
    begun = probe.failed[("load.begin", "COMPLETE")]["run"]["facets"]["airflowTxn"]["tid"]
    assert writer["airflowTxn"]["tid"] == begun
    assert writer["airflowTxn"]["stagingKey"] == "txn_lineage_probe/load.audit/-1"
    assert writer["airflowTxn"]["state"] in ("active", "rolled_back")
    commit = probe.aborted[("load.commit", "FAIL")]["run"]["facets"]["airflowTxn"]
    assert commit["tid"] == probe.aborted[("load.begin", "COMPLETE")]["run"]["facets"]["airflowTxn"]["tid"]
    assert commit["state"] == "rolled_back"
    # START names the transaction too, once its tid is known (rendered)
    assert probe.committed[("load.copy", "START")]["run"]["facets"]["airflowTxn"]["tid"] == \
        probe.committed[("load.begin", "COMPLETE")]["run"]["facets"]["airflowTxn"]["tid"]
