"""CommitCSNSensor in poke mode and deferred (CommitCSNTrigger run inline by dag.test()), on both catalogs."""

from __future__ import annotations

import asyncio
import importlib
import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from airflow_txn import Warehouse
from tests.airflow.helpers import PROBE_SCHEMA, run_dag, task_states, xcom

pytestmark = pytest.mark.airflow

REPO = Path(__file__).resolve().parents[2]
TABLE = "probe.events"

# A committer that dies right after writing its commit record: the record exists, nothing is applied.
# (With the SQL oracle a commit records and applies in one catalog transaction; a committer with an
# external log, or of an older airflow_txn, can die in between. The record step alone leaves that state.)
DIE_AFTER_RECORD = """
import os, signal, sys, pyarrow as pa
from airflow_txn import Warehouse
from airflow_txn.core import commit
wh = Warehouse.open(catalog=sys.argv[1], root=sys.argv[2])
t = wh.begin(label="dies after its commit record")
t.append("probe.events", pa.table({"id": [1, 2, 3]}))
commit._record(wh.runtime, t.tid)
os.kill(os.getpid(), signal.SIGKILL)
"""


def commit_then_die(catalog_url: str, root: Path) -> None:
    result = subprocess.run([sys.executable, "-c", DIE_AFTER_RECORD, catalog_url, str(root)], cwd=REPO,
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == -9, result.stderr


def ti_state(dag_id: str, task_id: str) -> str | None:
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        rows = session.scalars(select(TaskInstance.state).where(TaskInstance.dag_id == dag_id,
                                                                TaskInstance.task_id == task_id)
                               .order_by(TaskInstance.start_date.desc())).all()
        return str(rows[0]) if rows and rows[0] is not None else None


def rescheduled(dag_run: Any, task_id: str) -> int:
    """How many times the task gave its worker slot back (mode="reschedule")."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.taskreschedule import TaskReschedule
    from airflow.utils.session import create_session
    from sqlalchemy import func, select

    with create_session() as session:
        query = (select(func.count()).select_from(TaskReschedule)
                 .join(TaskInstance, TaskInstance.id == TaskReschedule.ti_id)
                 .where(TaskInstance.run_id == dag_run.run_id, TaskInstance.task_id == task_id))
        return int(session.scalar(query) or 0)


def test_sensor_applies_a_pending_record_then_waits_rescheduled_and_deferred(
        dagbag: Any, txn_conn: Warehouse, catalog_url: str, root: Path, caplog: pytest.LogCaptureFixture) -> None:
    wh = txn_conn
    wh.create_table(TABLE, PROBE_SCHEMA)
    commit_then_die(catalog_url, root)
    [record] = wh.commit_log(limit=1)
    pending = record["csn"]
    assert not record["applied"] and wh.readable_csn() < pending  # nobody would apply it but a reader
    second, third = pending + 1, pending + 2

    # The committer commits only once the sensor it feeds has checked and found nothing: the rescheduled one
    # has given its slot back, the deferred one's trigger runs. (Not a fixed pause after the previous task:
    # how long a task takes to start is the release's and the machine's; Airflow 3.2's dag.test() builds a
    # new in-process execution API for every task, 3.3 reuses one.)
    def commit_when(ready: Any, value: int) -> None:
        deadline = time.monotonic() + 120
        while not ready() and time.monotonic() < deadline:
            time.sleep(0.1)
        other = Warehouse.open(catalog=catalog_url, root=str(root))
        with other.begin(label=f"commit awaited ({value})") as t:
            t.append(TABLE, pa.table({"id": [value]}))
        other.close()

    def committer() -> None:
        commit_when(lambda: ti_state("txn_sensor_probe", "rescheduled") == "up_for_reschedule", 10)
        commit_when(lambda: any("running trigger in line" in r.getMessage() for r in list(caplog.records)), 20)

    thread = threading.Thread(target=committer, daemon=True)
    thread.start()
    with caplog.at_level("INFO"):
        run = run_dag(dagbag, "txn_sensor_probe", {"csn_poke": pending, "csn_reschedule": second,
                                                   "csn_deferred": third, "tables": [TABLE]})
    thread.join(timeout=10)
    assert str(run.state) == "success", task_states(run)
    assert xcom(run, "poke") == pending  # the poke applied the dead committer's record instead of waiting forever
    assert xcom(run, "rescheduled") == second
    assert rescheduled(run, "rescheduled") >= 1  # it gave its slot back while waiting
    assert xcom(run, "deferred") == third
    assert any("running trigger in line" in r.getMessage() for r in caplog.records)  # it really deferred
    assert wh.read(TABLE, csn=third).column("id").to_pylist() == [1, 2, 3, 10, 20]


def test_sensor_with_tables_waits_for_a_commit_of_each_table(dagbag: Any, txn_conn: Warehouse) -> None:
    wh = txn_conn
    for name in ("probe.a", "probe.b"):
        wh.create_table(name, PROBE_SCHEMA)
    with wh.begin() as t:
        t.append("probe.a", pa.table({"id": [1]}))
    with wh.begin() as t:
        t.append("probe.b", pa.table({"id": [2]}))
    first, last = wh.readable_csn() - 1, wh.readable_csn()
    run = run_dag(dagbag, "txn_sensor_probe", {"csn_poke": first, "csn_reschedule": first, "csn_deferred": first,
                                               "tables": ["probe.a", "probe.b"]})
    assert str(run.state) == "success"
    assert xcom(run, "poke") == first
    assert xcom(run, "deferred") == last  # the latest commit of the listed tables at or after `first`


def _events(trigger: Any) -> list[Any]:
    async def collect() -> list[Any]:
        return [event async for event in trigger.run()]

    return asyncio.run(asyncio.wait_for(collect(), timeout=60))


def test_trigger_serializes_plain_kwargs_and_yields_one_event(txn_conn: Warehouse, monkeypatch: pytest.MonkeyPatch,
                                                             tmp_path: Path) -> None:
    from airflow_txn.airflow.triggers.csn import CommitCSNTrigger

    wh = txn_conn
    wh.create_table(TABLE, PROBE_SCHEMA)
    with wh.begin() as t:
        t.append(TABLE, pa.table({"id": [1]}))
    classpath, kwargs = CommitCSNTrigger(csn=wh.readable_csn(), tables=[TABLE], poke_interval=0.1).serialize()
    assert json.loads(json.dumps(kwargs)) == kwargs  # plain values only
    module, _, name = classpath.rpartition(".")  # how the triggerer imports it
    trigger = getattr(importlib.import_module(module), name)(**kwargs)
    [event] = _events(trigger)
    assert event.payload == {"status": "success", "csn": wh.readable_csn()}

    monkeypatch.setenv("AIRFLOW_CONN_BROKEN_WAREHOUSE", json.dumps(
        {"conn_type": "airflow_txn", "extra": {"catalog": "not a url"}}))
    [event] = _events(CommitCSNTrigger(csn=1, conn_id="broken_warehouse"))
    assert event.payload["status"] == "error" and "not a SQLAlchemy URL" in event.payload["message"]
