"""Under a real Airflow (api-server, scheduler with the LocalExecutor, dag-processor and triggerer as separate
processes on PostgreSQL, the package installed from its wheel), driven through the REST API as a user drives it.

Every case ends by checking that every service is still alive: a listener of ours runs INSIDE the scheduler loop
(whose session is under prohibit_commit) and inside the API server, and must never break either (invariant 13).
The tests share one deployment and run in file order (the clearing case reruns the first case's run).
"""

from __future__ import annotations

import urllib.parse
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from airflow_txn.core.adapter import ACTIVE, COMMITTED, ROLLED_BACK
from tests.airflow.dag_files.txn_mapped_group_probe import MAPPED_DAYS, MAPPED_TABLE
from tests.harness.airflow_services import SERVICES, wait_until
from tests.real_airflow.conftest import RealAirflow

pytestmark = [pytest.mark.airflow, pytest.mark.real_airflow, pytest.mark.timeout(1500)]

BACKFILL = "multi_table_backfill"
TABLES = ("shop.customers", "shop.orders", "shop.order_items")
ONE_DAY = {"shop.customers": 5, "shop.orders": 10, "shop.order_items": 20}
CDC, CDC_TABLES = "cdc_apply", ("sales.customers", "sales.orders")
RUNS: dict[str, str] = {}
"""Run ids a later case reuses, by name."""


def assert_services_alive(real: RealAirflow) -> None:
    af = real.af
    dead = [name for name in SERVICES if not af.alive(name)]
    assert not dead, f"dead: {dead}{af.problems()}"
    assert "UNEXPECTED COMMIT" not in af.log("scheduler", tail=10**7), af.log("scheduler")


def counts(real: RealAirflow, csn: int | None = None) -> dict[str, int]:
    return {t: real.wh.read(t, csn=csn).num_rows for t in TABLES if t in real.wh.tables()}


def transactions_of(real: RealAirflow, dag_id: str, run_id: str) -> list[dict[str, Any]]:
    return [t for t in real.wh.transactions(limit=1000) if t["label"] == f"{dag_id}/{run_id}"]


def test_a_backfill_with_a_retry_commits_once_and_clearing_its_group_commits_anew(real_airflow: RealAirflow) -> None:
    real, af = real_airflow, real_airflow.af
    af.wait_dag(BACKFILL)
    run = af.trigger(BACKFILL, {"start": "2024-01-01", "days": 1, "fail_task": "load_orders", "fail_tries": 1})
    RUNS["committed"] = run
    assert af.wait_run(BACKFILL, run) == "success", af.task_states(BACKFILL, run)
    states = af.task_states(BACKFILL, run)
    assert states["backfill.load_orders[0]"] == ("success", 2)  # the first try failed after staging
    csn = int(af.xcom(BACKFILL, run, "backfill.commit"))
    assert counts(real, csn) == ONE_DAY  # the retry replaced what its failed try staged
    assert_services_alive(real)

    af.api("POST", f"/api/v2/dags/{BACKFILL}/clearTaskInstances",
           {"dry_run": False, "dag_run_id": run, "task_ids": ["backfill.begin"], "include_downstream": True,
            "only_failed": False, "reset_dag_runs": True})
    assert af.wait_run(BACKFILL, run) == "success", af.task_states(BACKFILL, run)
    assert af.task_states(BACKFILL, run)["backfill.commit"] == ("success", 2)
    again = int(af.xcom(BACKFILL, run, "backfill.commit"))
    assert again > csn
    assert counts(real) == ONE_DAY == counts(real, csn)  # the new transaction's overwrites replaced the old
    assert [t["state"] for t in transactions_of(real, BACKFILL, run)] == [COMMITTED, COMMITTED]
    assert_services_alive(real)


def test_a_run_failing_for_good_rolls_back_and_leaves_the_scheduler_alive(real_airflow: RealAirflow) -> None:
    """The scheduler marks the run failed inside its loop; the plugin's listener rolls its transaction back there.
    Before the fix, the listener committed the scheduler's own session (UNEXPECTED COMMIT) and the scheduler died."""
    real, af = real_airflow, real_airflow.af
    af.wait_dag(BACKFILL)
    before_csn, before = real.wh.readable_csn(), counts(real)
    run = af.trigger(BACKFILL, {"start": "2024-02-01", "days": 1, "fail_task": "load_orders", "fail_tries": 99})
    assert af.wait_run(BACKFILL, run) == "failed", af.task_states(BACKFILL, run)
    states = af.task_states(BACKFILL, run)
    assert states["backfill.load_orders[0]"] == ("failed", 2)
    assert states["backfill.outcome"][0] == "failed"
    [txn] = transactions_of(real, BACKFILL, run)
    assert txn["state"] == ROLLED_BACK
    assert real.wh.readable_csn() == before_csn and counts(real) == before  # no table changed
    # the scheduler goes on scheduling: another run of the DAG is scheduled, runs and commits
    run = af.trigger(BACKFILL, {"start": "2024-02-02", "days": 1})
    assert af.wait_run(BACKFILL, run) == "success", af.task_states(BACKFILL, run)
    assert_services_alive(real)


def test_a_deferred_sensor_is_released_by_the_triggerer(real_airflow: RealAirflow) -> None:
    real, af = real_airflow, real_airflow.af
    af.wait_dag("real_sensor_probe")
    real.wh.create_table("probe.sensed", pa.schema([("id", pa.int64())]), exist_ok=True)
    target = real.wh.readable_csn() + 1
    run = af.trigger("real_sensor_probe", {"csn": target})
    wait_until(lambda: af.task_states("real_sensor_probe", run).get("wait", (None, 0))[0] == "deferred", 240,
               "the sensor to defer", on_timeout=lambda: f" (task states {af.task_states('real_sensor_probe', run)})")
    with real.wh.begin(label="real airflow test") as t:
        t.append("probe.sensed", pa.table({"id": [1]}))
    csn = real.wh.readable_csn()
    assert csn >= target
    assert af.wait_run("real_sensor_probe", run) == "success", af.task_states("real_sensor_probe", run)
    assert int(af.xcom("real_sensor_probe", run, "wait")) == csn
    assert_services_alive(real)


def test_a_day_of_cdc_with_a_retried_merge_commits_both_tables_at_one_csn(real_airflow: RealAirflow) -> None:
    """cdc_apply (pyarrow MERGE tasks, no Spark): merge_orders fails after merging on its first try, in its own
    worker process; the retry replaces that try's merge, and both tables change at the commit's one CSN."""
    real, af = real_airflow, real_airflow.af
    af.wait_dag(CDC)
    run = af.trigger(CDC, {"day": "2024-03-01", "fail_task": "merge_orders", "fail_tries": 1})
    assert af.wait_run(CDC, run) == "success", af.task_states(CDC, run)
    states = af.task_states(CDC, run)
    assert states["apply.merge_orders"] == ("success", 2) and states["apply.merge_customers"] == ("success", 1)
    csn = int(af.xcom(CDC, run, "apply.commit"))
    assert af.xcom(CDC, run, "summary") == {"csn": csn, "customers": 5, "orders": 8,
                                            "orders_per_day": {"2024-02-29": 2, "2024-03-01": 6}}
    orders = real.wh.read("sales.orders", csn=csn).column("order_id").to_pylist()
    assert len(orders) == len(set(orders)) == 8  # the retry did not merge twice
    assert {t: real.wh.read(t, csn=csn - 1).num_rows for t in CDC_TABLES} == dict.fromkeys(CDC_TABLES, 0)
    [txn] = transactions_of(real, CDC, run)
    assert txn["state"] == COMMITTED and txn["commit_csn"] == csn
    assert_services_alive(real)


def test_a_run_marked_failed_from_the_api_rolls_back_its_active_transaction(real_airflow: RealAirflow,
                                                                             tmp_path: Path) -> None:
    """The API server runs the listener when a user marks a run failed: the transaction is rolled back there."""
    real, af = real_airflow, real_airflow.af
    af.wait_dag("real_hold_probe")
    real.wh.create_table("probe.held", pa.schema([("id", pa.int64())]), exist_ok=True)
    tmp_path.chmod(0o777)
    release = tmp_path / "release"
    run = af.trigger("real_hold_probe", {"release": str(release)})
    try:
        wait_until(lambda: (tmp_path / "staged").exists(), 240, "the task to stage its rows",
                   on_timeout=lambda: f" (task states {af.task_states('real_hold_probe', run)})")
        tid = str(af.xcom("real_hold_probe", run, "txn.begin"))
        assert real.wh.transaction_info(tid)["state"] == ACTIVE
        af.api("PATCH", f"/api/v2/dags/real_hold_probe/dagRuns/{run}", {"state": "failed"})
        wait_until(lambda: real.wh.transaction_info(tid)["state"] == ROLLED_BACK, 120, f"{tid} to be rolled back")
    finally:
        release.touch()
    assert af.run_state("real_hold_probe", run) == "failed"
    assert "marked failed" in str(real.wh.transaction_info(tid)["failed_reason"]) or \
        "failed" in str(real.wh.transaction_info(tid)["failed_reason"])
    assert real.wh.read("probe.held").num_rows == 0
    assert_services_alive(real)


def test_a_mapped_group_commits_each_day_alone_and_a_failing_day_rolls_back_alone(real_airflow: RealAirflow) -> None:
    """A transaction_group inside a task group mapped over three days, under the scheduler: each map index's tasks
    find their own map index's tid; the failing day's task (no retries) rolls back its day only, in its worker (the
    listener) and through the group's rollback; the first day commits; the day skipped before its group skips its
    outcome; the run's Transactions tab lists both transactions."""
    real, af = real_airflow, real_airflow.af
    dag_id = "txn_mapped_group_probe"
    af.wait_dag(dag_id)
    real.wh.create_table(MAPPED_TABLE, pa.schema([("id", pa.int64()), ("day", pa.string())]), partition_by=["day"],
                         exist_ok=True)
    run = af.trigger(dag_id, {"rows": 3, "fail_day": MAPPED_DAYS[1], "skip_day": MAPPED_DAYS[2]})
    assert af.wait_run(dag_id, run) == "failed", af.task_states(dag_id, run)
    states = af.task_states(dag_id, run)
    assert states["day.txn.commit[0]"][0] == "success" and states["day.txn.outcome[0]"][0] == "success", states
    assert states["day.txn.stage_the_day[1]"][0] == "failed" and states["day.txn.outcome[1]"][0] == "failed", states
    assert states["day.txn.begin[2]"][0] == "skipped" and states["day.txn.outcome[2]"][0] == "skipped", states
    first, second = (str(af.xcom(dag_id, run, "day.txn.begin", index)) for index in range(2))
    assert af.xcom(dag_id, run, "day.txn.stage_the_day", 0) == {"tid": first, "rows": 3}
    csn = real.wh.transaction_info(first)["commit_csn"]
    assert real.wh.transaction_info(first)["state"] == COMMITTED and csn is not None
    assert real.wh.transaction_info(second)["state"] == ROLLED_BACK
    assert real.wh.read(MAPPED_TABLE, csn=csn).column("day").to_pylist() == [MAPPED_DAYS[0]] * 3
    query = urllib.parse.urlencode({"dag_id": dag_id, "run_id": run})
    listed = af.api("GET", f"/airflow-txn/api/transactions?{query}")
    assert sorted(t["tid"] for t in listed["transactions"]) == sorted([first, second])
    assert_services_alive(real)


def test_the_page_and_the_run_tab_render_with_a_token(real_airflow: RealAirflow) -> None:
    real, af = real_airflow, real_airflow.af
    run = RUNS.get("committed")
    if run is None:
        pytest.skip("needs the committed backfill run of the first case")
    page = af.api("GET", "/airflow-txn/")
    assert "Transactions" in page
    query = urllib.parse.urlencode({"dag_id": BACKFILL, "run_id": run})  # a manual run id holds '+' and ':'
    tab = af.api("GET", f"/airflow-txn/?{query}")
    tids = [t["tid"] for t in transactions_of(real, BACKFILL, run)]
    assert tids and all(tid in tab for tid in tids)
    listed = af.api("GET", f"/airflow-txn/api/transactions?{query}")
    assert sorted(t["tid"] for t in listed["transactions"]) == sorted(tids)
    assert_services_alive(real)
