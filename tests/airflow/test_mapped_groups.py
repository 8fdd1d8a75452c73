"""A transaction_group inside a task group mapped over days (`@task_group ... .expand()`): each map index is its own
transaction. Its tasks find their own map index's tid (the group's template pulls `begin`'s XCom of the same map
index), a failing day rolls back only its own transaction (the group's rollback, and the listener: not the other
days'), a day skipped before its group skips its outcome (the outcome asks for its own map index's begin), and the
run's transactions are all found (the Transactions tab, the listener on a failed run). Real dag.test() runs;
tests/real_airflow runs the same DAG under a scheduler."""

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
    assert {d["state"] for d in days.values()} == {COMMITTED}
    assert len({d["tid"] for d in days.values()}) == len(MAPPED_DAYS)
    assert len({d["commit_csn"] for d in days.values()}) == len(MAPPED_DAYS)
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


def test_a_failing_day_rolls_back_alone_and_a_skipped_day_skips_its_outcome(dagbag: Any, txn_conn: Warehouse) -> None:
    """Day 2's task fails for good: its transaction is rolled back (the listener and the group's rollback), day 1's
    commits. Day 3 is skipped before its group: its outcome finds that map index's begin skipped, so it skips (not
    "no transaction began", which failed the run)."""
    wh = txn_conn
    wh.create_table(MAPPED_TABLE, DAYS, partition_by=["day"])
    run = run_dag(dagbag, DAG_ID, {"rows": 3, "fail_day": MAPPED_DAYS[1], "skip_day": MAPPED_DAYS[2]})
    states = task_states(run)
    assert str(run.state) == "failed", states
    assert states["day.txn.commit[0]"][0] == "success" and states["day.txn.outcome[0]"][0] == "success", states
    assert states["day.txn.stage_the_day[1]"][0] == "failed" and states["day.txn.outcome[1]"][0] == "failed", states
    assert states["day.txn.begin[2]"][0] == "skipped" and states["day.txn.outcome[2]"][0] == "skipped", states
    first, second = (xcom(run, "day.txn.begin", index) for index in range(2))
    assert wh.transaction_info(first)["state"] == COMMITTED and wh.transaction_info(second)["state"] == ROLLED_BACK
    assert sorted(t["tid"] for t in transactions_of(wh, DAG_ID)) == sorted([first, second])
    assert wh.read(MAPPED_TABLE).column("day").to_pylist() == [MAPPED_DAYS[0]] * 3
