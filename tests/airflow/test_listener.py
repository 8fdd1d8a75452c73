"""The plugin's listener inside its hosts: the scheduler calls it in its loop, on the loop's own session under
prohibit_commit (committing that session raises UNEXPECTED COMMIT and kills the scheduler), and it must never raise
or block its host for long (invariant 13). tests/real_airflow runs the same under a real scheduler."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest

from airflow_txn import Warehouse
from airflow_txn.airflow.utils.hosted import run_hosted
from airflow_txn.catalog.txn_records import ACTIVE, ROLLED_BACK
from tests.airflow.helpers import PROBE_SCHEMA, run_dag, task_states, transactions_of

pytestmark = pytest.mark.airflow


def test_a_run_failed_inside_the_scheduler_loop_is_rolled_back_without_touching_the_loops_session(
        dagbag: Any, spark: Any, txn_conn: Warehouse) -> None:
    from airflow.models.dagrun import DagRun
    from airflow.models.serialized_dag import SerializedDagModel
    from airflow.utils.session import create_session
    from airflow.utils.sqlalchemy import prohibit_commit

    from airflow_txn.airflow.plugins import listener

    wh = txn_conn
    wh.create_table("probe.events", PROBE_SCHEMA)
    run = run_dag(dagbag, "txn_hold_probe", {"rows": 3})
    assert str(run.state) == "success", task_states(run)
    [txn] = transactions_of(wh, "txn_hold_probe")
    assert txn["state"] == ACTIVE

    with create_session() as session, prohibit_commit(session):  # the scheduler loop's thread-scoped session
        dag_run = session.get(DagRun, run.id)
        dag_run.dag = SerializedDagModel.get_dag("txn_hold_probe", session=session)
        listener.on_dag_run_failed(dag_run=dag_run, msg="task failure")  # as DagRun.update_state calls it
        assert session.is_active and dag_run in session  # neither committed, rolled back nor closed
        assert dag_run.run_id == run.run_id  # still attached: the loop goes on using it

    info = wh.transaction_info(txn["tid"])
    assert info["state"] == ROLLED_BACK and "failed" in info["failed_reason"]
    assert wh.read("probe.events").num_rows == 0


def test_a_listener_given_objects_it_cannot_read_logs_and_returns(caplog: pytest.LogCaptureFixture) -> None:
    from airflow_txn.airflow.plugins import listener

    class Detached:
        @property
        def run_id(self) -> str:
            raise RuntimeError("Instance <DagRun> is not bound to a Session")

        dag_id = "some_dag"
        dag = None
        state = "failed"
        task_id = "t"

    with caplog.at_level(logging.ERROR):
        listener.on_dag_run_failed(dag_run=Detached(), msg="failed")
        listener.on_task_instance_failed(previous_state=None, task_instance=Detached(), error=None)
    assert caplog.text.count("cannot read the failed") == 2


def test_hosted_work_runs_on_its_own_thread_and_never_raises(caplog: pytest.LogCaptureFixture) -> None:
    host = threading.get_ident()
    assert run_hosted("probe", threading.get_ident) not in (None, host)

    def fails() -> None:
        raise RuntimeError("boom")

    with caplog.at_level(logging.ERROR):
        assert run_hosted("failing probe", fails) is None
    assert "airflow_txn: failing probe failed" in caplog.text and "boom" in caplog.text


def test_hosted_work_past_its_deadline_is_left_to_finish_in_the_background(caplog: pytest.LogCaptureFixture) -> None:
    release, finished = threading.Event(), threading.Event()

    def slow() -> str:
        release.wait(120)
        finished.set()
        return "late"

    with caplog.at_level(logging.ERROR):
        assert run_hosted("slow probe", slow, timeout=0.05) is None  # the host does not wait past the deadline
    assert "slow probe still runs after" in caplog.text
    release.set()
    assert finished.wait(60)


def test_a_rollback_of_a_transaction_this_warehouse_does_not_know_says_where_it_looked(
        wh: Warehouse, caplog: pytest.LogCaptureFixture) -> None:
    """The listener in a process that does not see the run's connection reaches another warehouse (the defaults):
    it says so, naming that warehouse, instead of a bare TransactionNotFoundError traceback."""
    from airflow_txn.airflow.operators.transaction import roll_back_quietly

    wh.init()
    with caplog.at_level(logging.ERROR):
        assert roll_back_quietly(wh, "5-1-00000000000000aa", "probe", logging.getLogger("probe")) == ACTIVE
    assert "unknown to the warehouse this process reaches" in caplog.text
    assert "is the Airflow connection defined where this runs?" in caplog.text


def test_the_listener_timeout_comes_from_the_airflow_txn_section(monkeypatch: pytest.MonkeyPatch,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    from airflow_txn.airflow.utils.hosted import DEFAULT_TIMEOUT_SECONDS, hosted_timeout

    assert hosted_timeout() == DEFAULT_TIMEOUT_SECONDS == 60.0
    monkeypatch.setenv("AIRFLOW__AIRFLOW_TXN__LISTENER_TIMEOUT", "12.5")
    assert hosted_timeout() == 12.5
    monkeypatch.setenv("AIRFLOW__AIRFLOW_TXN__LISTENER_TIMEOUT", "soon")
    with caplog.at_level(logging.WARNING):
        assert hosted_timeout() == DEFAULT_TIMEOUT_SECONDS  # a listener never raises: logged, the default kept
    assert "listener_timeout must be a number of seconds" in caplog.text
