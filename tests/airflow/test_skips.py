"""A skip inside transaction_group is not a failure (issue 20, item 4): real Airflow dag.test() runs of the
probe DAGs in dag_files/txn_probes.py, with the catalog on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_txn import Warehouse
from airflow_txn.catalog.txn_records import COMMITTED, ROLLED_BACK
from tests.airflow.helpers import run_dag, task_states, transactions_of, xcom

pytestmark = pytest.mark.airflow
TABLE = "probe.events"


def test_a_skipped_task_commits_what_the_others_staged(dagbag: Any, txn_conn: Warehouse) -> None:
    wh = txn_conn
    run = run_dag(dagbag, "txn_skip_probe", {"rows": 4})
    states = task_states(run)
    assert str(run.state) == "success", states
    assert states["txn.no_new_data"][0] == "skipped" and states["txn.after_the_skip"][0] == "skipped"
    assert (states["txn.commit"][0], states["txn.rollback"][0], states["txn.outcome"][0]) == (
        "success", "skipped", "success")
    [txn] = transactions_of(wh, "txn_skip_probe")
    assert txn["state"] == COMMITTED and xcom(run, "txn.outcome") == txn["commit_csn"]
    assert wh.read(TABLE).num_rows == 4


def test_on_skip_rollback_rolls_everything_back_and_fails_the_run(dagbag: Any, txn_conn: Warehouse) -> None:
    wh = txn_conn
    run = run_dag(dagbag, "txn_skip_rollback_probe", {"rows": 4})
    states = task_states(run)
    assert str(run.state) == "failed", states
    assert states["txn.commit"][0] == "skipped" and states["txn.outcome"][0] == "failed"
    [txn] = transactions_of(wh, "txn_skip_rollback_probe")
    assert txn["state"] == ROLLED_BACK
    assert TABLE not in wh.tables() or wh.read(TABLE).num_rows == 0


@pytest.mark.parametrize("go", [False, True])
def test_a_group_skipped_by_a_branch_begins_nothing_and_fails_nothing(dagbag: Any, txn_conn: Warehouse,
                                                                      go: bool) -> None:
    wh = txn_conn
    run = run_dag(dagbag, "txn_skip_group_probe", {"rows": 2, "go": go})
    states = task_states(run)
    assert str(run.state) == "success", states
    group = {k: v[0] for k, v in states.items() if k.startswith("txn.")}
    if go:
        assert group == {"txn.begin": "success", "txn.append_probe_rows": "success", "txn.commit": "success",
                         "txn.rollback": "skipped", "txn.outcome": "success"}
        assert wh.read(TABLE).num_rows == 2
    else:
        assert set(group.values()) == {"skipped"}, group
        assert transactions_of(wh, "txn_skip_group_probe") == []


def test_on_skip_is_checked_when_the_dag_is_parsed() -> None:
    import datetime as dt

    from airflow.sdk import DAG

    from airflow_txn.airflow import transaction_group
    from airflow_txn.errors import InvalidArgumentError

    with (DAG("on_skip_probe", schedule=None, start_date=dt.datetime(2024, 1, 1)),
          pytest.raises(InvalidArgumentError, match="on_skip must be one of 'commit', 'rollback'")):
        transaction_group("bad", on_skip="ignore")


# -- a task cleared alone after its run ended (issue 20, item 4: re-runs) ------------------------------------------
@pytest.mark.parametrize("ending", ["commit", "rollback"])
def test_a_task_meeting_an_ended_transaction_fails_at_once_saying_what_to_do(
        dagbag: Any, txn_conn: Warehouse, capfd: pytest.CaptureFixture[str], ending: str) -> None:
    import pyarrow as pa

    wh = txn_conn
    wh.create_table(TABLE, pa.schema([("id", pa.int64())]))
    t = wh.begin()
    t.append(TABLE, pa.table({"id": [1]}))
    if ending == "rollback":
        t.rollback()
    else:
        t.commit()
    run = run_dag(dagbag, "txn_ended_probe", {"tid": t.tid})
    states = task_states(run)
    assert str(run.state) == "failed" and states["stage"] == ("failed", 1), states  # no retry: it cannot help
    assert wh.read(TABLE).num_rows == (1 if ending == "commit" else 0)  # the ended transaction is untouched
    logged = "".join(capfd.readouterr())  # dag.test() prints the task's log
    assert f"transaction {t.tid} has already ended" in logged and "clear the whole transaction group" in logged, (
        logged[-3000:])
