"""Operator extra links (airflow_txn/airflow/plugins/links.py): the Transaction link of begin, Spark and commit
tasks and the Spark UI link, as provider info registers them and as the API server resolves them after
real dag.test() runs (the serialized DAG's links read what the task runner pushed to XCom)."""

from __future__ import annotations

import datetime as dt
import importlib
from typing import Any
from urllib.parse import quote

import pytest

from airflow_txn import Warehouse
from airflow_txn.airflow import provider
from tests.airflow.helpers import PROBE_SCHEMA, run_dag, task_states, xcom

pytestmark = pytest.mark.airflow

BASE_URL = "https://airflow.example.com/airflow/"


def api_links(dag_run: Any, task_id: str) -> dict[str, str | None]:
    """{link name: URL} of a finished task, as the API server's extra-links route answers them."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select

    from airflow_txn.airflow.version_compat import load_serialized_dag

    task = load_serialized_dag(dag_run.dag_id).get_task(task_id)
    with create_session() as session:
        ti = session.scalars(select(TaskInstance).where(TaskInstance.dag_id == dag_run.dag_id,
                                                        TaskInstance.run_id == dag_run.run_id,
                                                        TaskInstance.task_id == task_id)).one()
        return {name: task.get_extra_links(ti, name) or None for name in sorted(task.extra_links)}


def link_xcoms(dag_run: Any, task_id: str) -> list[str]:
    """The XCom keys of links a finished task pushed."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        return sorted(session.scalars(select(XComModel.key).where(
            XComModel.dag_id == dag_run.dag_id, XComModel.run_id == dag_run.run_id, XComModel.task_id == task_id,
            XComModel.key.startswith("_link_"))))


def test_provider_info_registers_the_links_the_operators_carry() -> None:
    from airflow.providers_manager import ProvidersManager
    from airflow.sdk import BaseOperatorLink

    from airflow_txn.airflow.plugins.links import EXTRA_LINKS, SparkUILink, TransactionLink
    from airflow_txn.operators import BeginTransactionOperator, CommitTransactionOperator, SparkTransactionOperator

    info = provider.get_provider_info()
    classes = []
    for path in info["extra-links"]:
        module, _, name = path.rpartition(".")
        classes.append(getattr(importlib.import_module(module), name))
    assert classes == list(EXTRA_LINKS) and all(issubclass(c, BaseOperatorLink) for c in classes)
    carried = {op: [type(link) for link in op.operator_extra_links]
               for op in (BeginTransactionOperator, SparkTransactionOperator, CommitTransactionOperator)}
    assert carried == {BeginTransactionOperator: [TransactionLink], CommitTransactionOperator: [TransactionLink],
                       SparkTransactionOperator: [TransactionLink, SparkUILink]}
    assert set(info["extra-links"]) <= set(ProvidersManager().extra_links_class_names)


def test_the_transaction_link_goes_to_the_page_of_the_warehouse_it_shows(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.sdk import DAG

    from airflow_txn.airflow.plugins.links import TransactionLink
    from airflow_txn.operators import BeginTransactionOperator

    with DAG("link_probe", schedule=None, start_date=dt.datetime(2024, 1, 1)):
        begin = BeginTransactionOperator(task_id="begin")
        elsewhere = BeginTransactionOperator(task_id="elsewhere", conn_id="other_warehouse")
    link = TransactionLink()
    monkeypatch.delenv("AIRFLOW__API__BASE_URL", raising=False)
    monkeypatch.delenv("AIRFLOW__AIRFLOW_TXN__CONN_ID", raising=False)
    assert link.get_link(begin, ti_key=None) == ""  # no transaction yet (the task has not begun one)
    begin.linked_tid = elsewhere.linked_tid = "t-1/2"
    assert link.get_link(begin, ti_key=None) == "/airflow-txn/transactions/t-1%2F2"  # on the UI's own server
    monkeypatch.setenv("AIRFLOW__API__BASE_URL", BASE_URL)
    assert link.get_link(begin, ti_key=None) == "https://airflow.example.com/airflow/airflow-txn/transactions/t-1%2F2"
    assert link.get_link(elsewhere, ti_key=None) == ""  # the page shows another warehouse
    monkeypatch.setenv("AIRFLOW__AIRFLOW_TXN__CONN_ID", "other_warehouse")
    assert link.get_link(elsewhere, ti_key=None).endswith("/transactions/t-1%2F2")
    assert link.get_link(begin, ti_key=None) == ""


def test_the_spark_ui_link_is_the_drivers_ui_when_it_has_one(spark: Any) -> None:
    from airflow.sdk import DAG

    from airflow_txn.airflow.operators.spark import spark_ui_url
    from airflow_txn.airflow.plugins.links import SparkUILink
    from airflow_txn.operators import SparkTransactionOperator

    assert spark.conf.get("spark.ui.enabled") == "false" and spark_ui_url(spark) is None  # the tests' session
    with DAG("spark_link_probe", schedule=None, start_date=dt.datetime(2024, 1, 1)):
        task = SparkTransactionOperator(task_id="stage", tid="t", python_callable=lambda spark, txn: None)
    assert SparkUILink().get_link(task, ti_key=None) == ""
    task.spark_ui_url = "http://worker-3:4040"
    assert SparkUILink().get_link(task, ti_key=None) == "http://worker-3:4040"


class _Driver:
    """A classic session's face, as far as the operator looks: its driver's UI address."""

    class sparkContext:  # pyspark's attribute name
        uiWebUrl = "http://worker-3:4040"


class _RecordingTaskInstance:
    def __init__(self) -> None:
        self.pushed: list[tuple[str, Any]] = []

    def xcom_push(self, key: str, value: Any) -> None:
        self.pushed.append((key, value))


def test_a_spark_task_publishes_its_ui_link_as_soon_as_spark_runs() -> None:
    """Airflow pushes links when a task ends, when a local driver's UI is gone: the operator pushes it first."""
    from airflow.sdk import DAG

    from airflow_txn.airflow.plugins.links import SparkUILink, TransactionLink
    from airflow_txn.operators import SparkTransactionOperator

    with DAG("spark_link_push_probe", schedule=None, start_date=dt.datetime(2024, 1, 1)):
        task = SparkTransactionOperator(task_id="stage", tid="t", python_callable=lambda spark, txn: None)
    ti = _RecordingTaskInstance()
    task._link_spark_ui(_Driver(), {"ti": ti})  # type: ignore[arg-type, typeddict-item]
    assert ti.pushed == [("_link_SparkUILink", "http://worker-3:4040")] == [(SparkUILink().xcom_key, task.spark_ui_url)]
    # the task runner's push of every link at the end leaves it out (it is pushed); the class keeps both for the UI
    assert [type(link) for link in task.operator_extra_links] == [TransactionLink]
    assert [type(link) for link in SparkTransactionOperator.operator_extra_links] == [TransactionLink, SparkUILink]


def test_finished_tasks_link_to_their_transaction(dagbag: Any, spark: Any, txn_conn: Warehouse,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__API__BASE_URL", BASE_URL)
    page = "https://airflow.example.com/airflow/airflow-txn/transactions/"
    txn_conn.create_table("probe.events", PROBE_SCHEMA)
    held = run_dag(dagbag, "txn_hold_probe", {"rows": 2})  # begin, then a Spark task staging rows
    assert str(held.state) == "success", task_states(held)
    tid = xcom(held, "begin")
    assert api_links(held, "begin") == {"Transaction": page + tid}
    assert txn_conn.transaction_info(tid)["metadata"]["airflow"] == {  # what begin recorded (no commit ran)
        "dag_id": "txn_hold_probe", "run_id": held.run_id, "task_id": "begin", "try_number": 1,
        "url": f"https://airflow.example.com/airflow/dags/txn_hold_probe/runs/{quote(held.run_id, safe='')}"}
    assert api_links(held, "stage") == {"Spark UI": None, "Transaction": page + tid}  # no UI in the tests' Spark
    assert link_xcoms(held, "stage") == ["_link_TransactionLink"]  # no empty Spark UI link pushed when it ended

    committed = run_dag(dagbag, "txn_templated_probe", {"conn": "airflow_txn_default", "lease": "60"})
    assert str(committed.state) == "success", task_states(committed)
    tid = xcom(committed, "begin")
    assert api_links(committed, "begin") == api_links(committed, "commit") == {"Transaction": page + tid}
    assert txn_conn.transaction_info(tid)["state"] == "committed"
