"""What Airflow users expect of a provider's deferrable sensor (issue 20, item 4): `[operators]
default_deferrable` honoured, and an error in the triggerer left to Airflow's retries unless no retry
can help (bad input fails at once, in the worker as in the triggerer)."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest

from airflow_txn import Warehouse
from airflow_txn.errors import TxnError

pytestmark = pytest.mark.airflow

START = dt.datetime(2024, 1, 1)


def probe_dag(dag_id: str) -> Any:
    from airflow.sdk import DAG

    return DAG(dag_id, schedule=None, start_date=START, catchup=False)


# --- [operators] default_deferrable -------------------------------------------------------------------------------


def test_the_sensor_defers_by_default_when_the_configuration_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_txn.sensors import CommitCSNSensor

    with probe_dag("default_deferrable_probe"):
        monkeypatch.delenv("AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE", raising=False)
        assert CommitCSNSensor(task_id="unset").deferrable is False  # Airflow's default
        monkeypatch.setenv("AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE", "True")
        assert CommitCSNSensor(task_id="configured").deferrable is True
        assert CommitCSNSensor(task_id="told_not_to", deferrable=False).deferrable is False  # an explicit choice wins
        monkeypatch.setenv("AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE", "False")
        assert CommitCSNSensor(task_id="told_to", deferrable=True).deferrable is True
        assert CommitCSNSensor(task_id="off").deferrable is False


def test_a_sensor_deferrable_by_configuration_hands_its_wait_to_the_trigger(
        txn_conn: Warehouse, monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_txn.airflow.triggers.csn import CommitCSNTrigger
    from airflow_txn.airflow.version_compat import TaskDeferred
    from airflow_txn.sensors import CommitCSNSensor

    monkeypatch.setenv("AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE", "True")
    ahead = txn_conn.readable_csn() + 1  # no commit yet: the sensor must wait
    with probe_dag("default_deferrable_run_probe"):
        sensor = CommitCSNSensor(task_id="wait", csn=str(ahead), tables="probe.a, probe.b", poke_interval=3)
    with pytest.raises(TaskDeferred) as deferred:
        sensor.execute({})
    trigger = deferred.value.trigger
    assert isinstance(trigger, CommitCSNTrigger) and deferred.value.method_name == "execute_complete"
    assert (trigger.csn, trigger.tables, trigger.poke_interval) == (ahead, ["probe.a", "probe.b"], 3.0)


# --- a triggerer error ---------------------------------------------------------------------------------------------


def test_a_triggerer_error_fails_the_try_for_retries_unless_it_is_final() -> None:
    from airflow_txn.airflow.version_compat import AirflowFailException
    from airflow_txn.sensors import CommitCSNSensor

    with probe_dag("trigger_error_probe"):
        sensor = CommitCSNSensor(task_id="wait", csn=7, deferrable=True, retries=2)
    outage = {"status": "error", "csn": 7, "message": "CatalogUnavailableError: connection refused", "final": False}
    with pytest.raises(TxnError, match="connection refused") as retried:
        sensor.execute_complete({}, outage)
    assert not isinstance(retried.value, AirflowFailException)  # Airflow retries a plain exception
    with pytest.raises(TxnError, match="no event"):
        sensor.execute_complete({}, None)
    before_final_flag = {k: v for k, v in outage.items() if k != "final"}  # an event of an older trigger
    with pytest.raises(TxnError):
        sensor.execute_complete({}, before_final_flag)
    bad_input = {"status": "error", "csn": 7, "message": "InvalidNameError: invalid table name", "final": True}
    with pytest.raises(AirflowFailException, match="invalid table name"):  # no retry can fix the arguments
        sensor.execute_complete({}, bad_input)
    assert sensor.execute_complete({}, {"status": "success", "csn": 9}) == 9


def _events(trigger: Any) -> list[Any]:
    import asyncio

    async def collect() -> list[Any]:
        return [event async for event in trigger.run()]

    return asyncio.run(asyncio.wait_for(collect(), timeout=60))


def test_the_trigger_marks_bad_input_final_and_outages_not(txn_conn: Warehouse,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_txn.airflow.triggers.csn import CommitCSNTrigger

    [bad_name] = _events(CommitCSNTrigger(csn=1, tables=["not a name!"]))
    assert bad_name.payload["status"] == "error" and bad_name.payload["final"] is True
    assert "InvalidNameError" in bad_name.payload["message"]
    [beyond] = _events(CommitCSNTrigger(csn=2**63))
    assert beyond.payload["final"] is True and "InvalidArgumentError" in beyond.payload["message"]
    monkeypatch.setenv("AIRFLOW_CONN_UNREACHABLE_WAREHOUSE", json.dumps(
        {"conn_type": "airflow_txn", "extra": {"catalog": "postgresql+psycopg://nobody@127.0.0.1:9/none"}}))
    [outage] = _events(CommitCSNTrigger(csn=1, conn_id="unreachable_warehouse"))
    assert outage.payload["status"] == "error" and outage.payload["final"] is False


def test_bad_sensor_input_fails_without_retry_in_the_worker(txn_conn: Warehouse) -> None:
    from airflow_txn.airflow.version_compat import AirflowFailException
    from airflow_txn.sensors import CommitCSNSensor

    with probe_dag("bad_sensor_input_probe"):
        for i, (csn, tables) in enumerate([("soon", []), (str(2**63), []), (1, ["not a name!"]), (1, "[1, 2")]):
            for deferrable in (False, True):
                sensor = CommitCSNSensor(task_id=f"bad_{i}_{deferrable}", csn=csn, tables=tables,
                                         deferrable=deferrable)
                with pytest.raises(AirflowFailException, match=sensor.task_id):
                    sensor.execute({}) if deferrable else sensor.poke({})
