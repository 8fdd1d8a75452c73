"""Every example DAG (and test DAG) imports with no errors; the provider and plugin are discovered."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.airflow.helpers import connection_form

pytestmark = pytest.mark.airflow

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(p.stem for p in (REPO / "dags").glob("*.py"))


def test_every_example_dag_imports_without_errors(parse_warehouse: None) -> None:
    from airflow_txn.airflow.version_compat import dagbag_module

    bag = dagbag_module().DagBag(dag_folder=str(REPO / "dags"))
    assert bag.import_errors == {}
    assert set(bag.dag_ids) == {"cdc_apply", "daily_incremental", "external_commits_reader", "month_end_close",
                                "multi_table_backfill", "multi_table_reader", "warehouse_maintenance"}
    assert EXAMPLES == ["cdc_apply", "daily_incremental", "external_commits_reader", "maintenance", "month_end_close",
                        "multi_table_backfill",
                        "multi_table_reader"]
    for dag in bag.dags.values():
        assert dag.tasks, dag.dag_id


def test_the_test_dag_folder_loads(dagbag: Any) -> None:
    assert {"multi_table_backfill", "multi_table_reader", "txn_sensor_probe", "txn_crash_probe",
            "txn_hold_probe", "warehouse_maintenance", "txn_maintenance_probe"} <= set(dagbag.dag_ids)


def test_backfill_dag_is_wired_as_one_transaction(dagbag: Any) -> None:
    dag = dagbag.get_dag("multi_table_backfill")
    group = {t.task_id: t for t in dag.tasks if t.task_id.startswith("backfill.")}
    assert set(group) == {"backfill.begin", "backfill.load_customers", "backfill.load_orders",
                          "backfill.load_order_items", "backfill.check", "backfill.commit", "backfill.rollback",
                          "backfill.outcome"}
    loads = [group[f"backfill.load_{t}"] for t in ("customers", "orders", "order_items")]
    assert all("backfill.begin" in t.upstream_task_ids for t in loads)
    assert group["backfill.check"].upstream_task_ids == {t.task_id for t in loads}
    assert group["backfill.check"].trigger_rule == group["backfill.commit"].trigger_rule == "none_failed"
    assert [c.label for c in group["backfill.check"].checks] == [
        "every order has its customer", "every item has its order", "unique(shop.orders: order_id)"]
    assert group["backfill.commit"].upstream_task_ids == {"backfill.begin", "backfill.check"}  # audit, then publish
    assert group["backfill.rollback"].upstream_task_ids == {*(t.task_id for t in loads), "backfill.check",
                                                            "backfill.commit"}
    assert group["backfill.rollback"].trigger_rule == "one_failed"
    assert group["backfill.outcome"].upstream_task_ids == {"backfill.commit", "backfill.rollback"}
    assert group["backfill.outcome"].trigger_rule == "all_done"
    assert [t.task_id for t in dag.leaves] == ["backfill.outcome"]


def test_cdc_dag_merges_both_tables_in_one_group_checked_before_the_commit(dagbag: Any) -> None:
    dag = dagbag.get_dag("cdc_apply")
    group = {t.task_id: t for t in dag.tasks if t.task_id.startswith("apply.")}
    assert set(group) == {"apply.begin", "apply.merge_customers", "apply.merge_orders", "apply.check",
                          "apply.commit", "apply.rollback", "apply.outcome"}
    merges = {"apply.merge_customers", "apply.merge_orders"}
    assert all(type(group[m]).custom_operator_name == "@task.txn" for m in merges)
    assert group["apply.check"].upstream_task_ids == merges
    assert [c.label for c in group["apply.check"].checks] == [
        "every order has its customer", "unique(sales.customers: customer_id)", "unique(sales.orders: order_id)",
        "no negative amount"]
    assert group["apply.commit"].upstream_task_ids == {"apply.begin", "apply.check"}
    assert dag.get_task("wait_for_commit").upstream_task_ids == {"apply.commit", "apply.outcome"}  # its CSN, after
    assert [t.task_id for t in dag.leaves] == ["summary"]


def test_reader_dag_is_scheduled_on_the_three_table_assets(dagbag: Any) -> None:
    from airflow_txn.airflow import table_asset

    dag = dagbag.get_dag("multi_table_reader")
    condition = dag.timetable.asset_condition
    assert type(condition).__name__ == "AssetAll"  # all three tables, not any one of them
    uris = {a.uri for a in condition.objects}
    assert uris == {table_asset(t).uri for t in ("shop.customers", "shop.orders", "shop.order_items")}


def test_provider_registers_the_connection_type() -> None:
    from airflow.providers_manager import ProvidersManager
    from airflow.sdk import Connection

    from airflow_txn.airflow import TxnHook

    manager = ProvidersManager()
    assert "airflow-txn" in manager.providers
    conn = Connection(conn_id="some_warehouse", conn_type="airflow_txn", extra='{"catalog": "sqlite:////tmp/c.db"}')
    hook = conn.get_hook()
    assert isinstance(hook, TxnHook) and hook.conn_id == "some_warehouse"
    form = connection_form()  # what the UI's connection form gets
    assert [f for f in ("description", "url_schema", "host", "port", "login", "password")
            if (form["standard_fields"][f] or {}).get("hidden")] == ["url_schema", "host", "port", "login"]
    assert {"catalog", "root", "oracle"} <= set(form["extra_fields"])


def test_plugin_registers_the_listener_in_workers_and_servers() -> None:
    """Through the `airflow.plugins` entry point: the task runner's and the scheduler's listener managers."""
    from airflow_txn.airflow.plugins import listener
    from airflow_txn.airflow.version_compat import listener_managers

    managers = listener_managers()  # 3.2+: the core's and the task SDK's; 3.1: one, the task runner uses it too
    assert managers and all(manager.pm.is_registered(listener) for manager in managers)
