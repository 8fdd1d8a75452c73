"""A transaction_group inside a task group mapped over days (`@task_group ... .expand()`): each map index is its own
transaction. Its tasks find their own map index's tid (the group's template pulls `begin`'s XCom of the same map
index), a failing day rolls back only its own transaction (the group's rollback, and the listener: not the other
days'), and the run's transactions are all found (the Transactions tab, the listener on a failed run). Real
dag.test() runs; tests/real_airflow runs the same DAG under a scheduler."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from airflow_txn import Warehouse
from airflow_txn.airflow.plugins.web.runs import run_tids
from airflow_txn.catalog.txn_records import COMMITTED, ROLLED_BACK
from tests.airflow.dag_files.txn_mapped_group_probe import MAPPED_DAYS, MAPPED_TABLE
from tests.airflow.helpers import run_dag, task_states, transactions_of, xcom

pytestmark = pytest.mark.airflow
DAG_ID = "txn_mapped_group_probe"
DAYS = pa.schema([("id", pa.int64()), ("day", pa.string())])


def by_day(wh: Warehouse, run: Any) -> dict[str, dict[str, Any]]:
    """{day: {"tid", "state", "commit_csn", "keys"}} of the run's transactions, by the day their rows hold."""
    out = {}
    for index, day in enumerate(MAPPED_DAYS):
        begun = xcom(run, "day.txn.begin", index)
        info = wh.transaction_info(begun)
        out[day] = {"tid": begun, "state": info["state"], "commit_csn": info["commit_csn"],
                    "keys": sorted({str(p["key"]) for p in info["parts"]})}
    return out


def test_each_map_index_of_a_mapped_group_commits_its_own_transaction(dagbag: Any, txn_conn: Warehouse) -> None:
    wh = txn_conn
    wh.create_table(MAPPED_TABLE, DAYS, partition_by=["day"])
    run = run_dag(dagbag, DAG_ID, {"rows": 2})
    states = task_states(run)
    assert str(run.state) == "success", states
    days = by_day(wh, run)
    assert len({d["tid"] for d in days.values()}) == 2 and {d["state"] for d in days.values()} == {COMMITTED}
    assert days["2024-01-01"]["commit_csn"] != days["2024-01-02"]["commit_csn"]
    for index, day in enumerate(MAPPED_DAYS):
        staged = xcom(run, "day.txn.stage_the_day", index)
        assert staged == {"tid": days[day]["tid"], "rows": 2}  # its own map index's transaction
        assert days[day]["keys"] == [f"{DAG_ID}/day.txn.stage_the_day/{index}"]
        assert xcom(run, "day.txn.outcome", index) == days[day]["commit_csn"]
        at_commit = wh.read(MAPPED_TABLE, csn=days[day]["commit_csn"])
        assert day in at_commit.column("day").to_pylist()
    assert sorted(wh.read(MAPPED_TABLE).column("day").to_pylist()) == sorted(MAPPED_DAYS * 2)
    assert sorted(t["tid"] for t in transactions_of(wh, DAG_ID)) == sorted(d["tid"] for d in days.values())
    # the run's Transactions tab (plugins/web/runs.py) finds every map index's, as the listener does on a failed run
    assert sorted(run_tids(DAG_ID, run.run_id)) == sorted(d["tid"] for d in days.values())


def test_a_failing_day_rolls_back_its_own_transaction_and_not_the_others(dagbag: Any, txn_conn: Warehouse) -> None:
    wh = txn_conn
    wh.create_table(MAPPED_TABLE, DAYS, partition_by=["day"])
    run = run_dag(dagbag, DAG_ID, {"rows": 3, "fail_day": "2024-01-02"})
    states = task_states(run)
    assert str(run.state) == "failed", states
    assert states["day.txn.stage_the_day[1]"][0] == "failed" and states["day.txn.outcome[1]"][0] == "failed"
    assert states["day.txn.commit[0]"][0] == "success" and states["day.txn.outcome[0]"][0] == "success"
    days = by_day(wh, run)
    assert days["2024-01-01"]["state"] == COMMITTED and days["2024-01-02"]["state"] == ROLLED_BACK
    assert wh.read(MAPPED_TABLE).column("day").to_pylist() == ["2024-01-01"] * 3
