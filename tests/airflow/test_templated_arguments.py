"""Templated transaction arguments (issue 20, item 4): BeginTransactionOperator's isolation and
lease_seconds are rendered, then checked (and checked when the DAG is parsed when they are no template);
a templated conn_id on the commit needs outlets the DAG names (an AssetAlias is registered at parse
time), and the events' table Assets name the warehouse the rendered connection reaches."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from airflow_txn import Warehouse
from airflow_txn.errors import InvalidArgumentError
from tests.airflow.conftest import connection_json
from tests.airflow.helpers import asset_events, run_dag, task_states, xcom

pytestmark = pytest.mark.airflow

START = dt.datetime(2024, 1, 1)


def probe_dag(dag_id: str) -> Any:
    from airflow.sdk import DAG

    return DAG(dag_id, schedule=None, start_date=START, catchup=False)


# --- templated begin arguments -------------------------------------------------------------------------------------


def test_begin_arguments_are_templated_and_checked_when_the_dag_is_parsed_if_they_can_be() -> None:
    from airflow_txn.airflow import transaction_group
    from airflow_txn.operators import BeginTransactionOperator

    assert {"isolation", "lease_seconds"} <= set(BeginTransactionOperator.template_fields)
    with probe_dag("templated_begin_parse_probe"):
        templated = BeginTransactionOperator(task_id="templated", isolation="{{ params.isolation }}",
                                             lease_seconds="{{ params.lease }}")
        assert (templated.isolation, templated.lease_seconds) == ("{{ params.isolation }}", "{{ params.lease }}")
        plain = BeginTransactionOperator(task_id="plain", isolation="serializable", lease_seconds="120")
        assert (plain.isolation, plain.lease_seconds) == ("serializable", 120.0)
        assert BeginTransactionOperator(task_id="default").lease_seconds is None
        for bad in (-5, "soon", float("inf"), 604801, True):
            with pytest.raises(InvalidArgumentError, match="lease_seconds"):
                BeginTransactionOperator(task_id="bad_lease", lease_seconds=bad)
        with pytest.raises(InvalidArgumentError, match="isolation"):
            BeginTransactionOperator(task_id="bad_isolation", isolation="chaos")
        with transaction_group("group", isolation="{{ params.isolation }}", lease_seconds="{{ params.lease }}") as g:
            pass
    assert g.begin is not None and g.begin.isolation == "{{ params.isolation }}"


@pytest.fixture
def probe_warehouse(catalog_url: str, root: Path, txn_conn: Warehouse, monkeypatch: pytest.MonkeyPatch) -> Warehouse:
    """This test's warehouse as connection `probe_warehouse` too (the templated DAG picks it by param)."""
    monkeypatch.setenv("AIRFLOW_CONN_PROBE_WAREHOUSE", connection_json(catalog_url, root))
    return txn_conn


def test_templated_arguments_are_rendered_then_checked_and_assets_name_the_warehouse_not_the_connection(
        dagbag: Any, probe_warehouse: Warehouse) -> None:
    wh = probe_warehouse
    run = run_dag(dagbag, "txn_templated_probe",
                  {"conn": "probe_warehouse", "isolation": "serializable", "lease": "120", "rows": 3})
    assert str(run.state) == "success", task_states(run)
    info = wh.transaction_info(xcom(run, "begin"))
    assert (info["isolation"], info["lease_seconds"]) == ("serializable", 120.0)
    assert info["commit_csn"] == xcom(run, "commit")
    # the Asset names the warehouse, not the connection: both connections reach the same Asset
    from airflow_txn.airflow import table_asset

    uri = f"airflow-txn://{wh.warehouse_id}/probe.templated"
    assert table_asset("probe.templated", "probe_warehouse").uri == table_asset("probe.templated").uri == uri
    assert asset_events(run) == [(uri, {"table": "probe.templated", "csn": info["commit_csn"], "tid": info["tid"],
                                        "metadata": info["metadata"], "warehouse_id": wh.warehouse_id})]

    for bad in ({"isolation": "SERIALIZABLE"}, {"lease": "soon"}, {"lease": "604801"}):
        failed = run_dag(dagbag, "txn_templated_probe", {"conn": "probe_warehouse", **bad})
        states = task_states(failed)
        assert str(failed.state) == "failed" and states["begin"] == ("failed", 1), (bad, states)  # retries=1 unused


# --- a templated conn_id on the commit ----------------------------------------------------------------------------


def test_a_templated_commit_conn_id_needs_outlets_the_dag_names() -> None:
    from airflow.sdk import AssetAlias

    from airflow_txn.airflow import commit_alias, transaction_group
    from airflow_txn.operators import CommitTransactionOperator

    with probe_dag("templated_commit_probe"):
        with pytest.raises(InvalidArgumentError, match=r"conn_id '\{\{ params.conn \}\}' is known only when the task "
                                                       r"runs.*outlets=\[AssetAlias"):
            CommitTransactionOperator(task_id="refused", tid="x", conn_id="{{ params.conn }}")
        named = CommitTransactionOperator(task_id="named", tid="x", conn_id="{{ params.conn }}",
                                          outlets=[AssetAlias("shop-commits")])
        static = CommitTransactionOperator(task_id="static", tid="x", conn_id="prod")
        with pytest.raises(InvalidArgumentError, match="transaction_group 'refused_group'"):
            transaction_group("refused_group", conn_id="{{ params.conn }}")
        with transaction_group("group", conn_id="{{ params.conn }}",
                               commit_outlets=[AssetAlias("shop-commits")]) as group:
            pass
    assert [o.name for o in named.outlets] == ["shop-commits"]
    assert static.outlets == [commit_alias("prod")]
    assert group.commit is not None and [o.name for o in group.commit.outlets] == ["shop-commits"]


# --- what the transaction records of the Airflow run ----------------------------------------------------------------


def test_the_transaction_records_the_run_that_began_and_committed_it(
        dagbag: Any, probe_warehouse: Warehouse, monkeypatch: pytest.MonkeyPatch, catalog_url: str, root: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Begin records the Airflow context in the transaction's metadata (test_links: a transaction whose
    commit never ran names its begin task), commit records its own over it; it shows in `airflow-txn show
    --json`, and the commit's Asset event carries it."""
    import json
    from urllib.parse import quote

    from airflow_txn.cli import main

    monkeypatch.setenv("AIRFLOW__API__BASE_URL", "https://airflow.example.com/")
    wh = probe_warehouse
    run = run_dag(dagbag, "txn_templated_probe", {"conn": "probe_warehouse", "lease": "60", "rows": 2})
    assert str(run.state) == "success", task_states(run)
    tid = xcom(run, "begin")
    url = f"https://airflow.example.com/dags/txn_templated_probe/runs/{quote(run.run_id, safe='')}"
    committed = {"airflow": {"dag_id": "txn_templated_probe", "run_id": run.run_id, "task_id": "commit",
                             "try_number": 1, "url": url}}
    assert wh.transaction_info(tid)["metadata"] == committed
    capsys.readouterr()  # the run's own output
    assert main(["--catalog", catalog_url, "--root", str(root), "show", tid, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["metadata"] == committed
    [(_uri, extra)] = asset_events(run)
    assert extra["metadata"] == committed
