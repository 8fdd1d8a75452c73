"""cdc_apply end to end (issue 32: a day of CDC merged into a dimension and its fact table in ONE transaction):
real Airflow dag.test() runs, the catalog on SQLite and on PostgreSQL; no Spark (the tasks merge pyarrow)."""

from __future__ import annotations

import datetime as dt
import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import pyarrow as pa
import pytest

from airflow_txn import ROLLBACK_CSN, Warehouse
from airflow_txn.catalog.txn_records import COMMITTED, ROLLED_BACK
from airflow_txn.errors import SchemaMismatchError
from tests.airflow.helpers import (
    asset_events,
    asset_events_with_partitions,
    dag_test,
    parse_dag,
    task_states,
    transactions_of,
    xcom,
)

pytestmark = pytest.mark.airflow

REPO = Path(__file__).resolve().parents[2]
DAG_ID = "cdc_apply"
TABLES = ["sales.customers", "sales.orders"]


def cdc_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("cdc_apply_example", REPO / "dags/cdc_apply.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_cdc(conf: dict[str, Any]) -> Any:
    """One run of cdc_apply to its end (dag.test()), the DAG parsed now as a worker parses it: the group's table
    Assets name this test's warehouse (the session's DagBag parsed the folder with no connection set)."""
    dag = parse_dag(REPO / "dags/cdc_apply.py", DAG_ID)
    return dag_test(dag, run_conf={**{key: dag.params[key] for key in dag.params}, **conf})


def ids(n: int, *ks: int) -> list[int]:
    """Ids of day-number `n` (days since the generator's epoch, 2020-01-01): customer n*100+k."""
    return [n * 100 + k for k in ks]


D1, D2 = "2024-03-01", "2024-03-02"
N1 = (dt.date(2024, 3, 1) - dt.date(2020, 1, 1)).days


def state(wh: Warehouse, csn: int | None = None) -> dict[str, list[dict[str, Any]]]:
    """Both tables' rows, sorted by key (what a reader sees at `csn`)."""
    if not set(TABLES) <= set(wh.tables()):
        return {}
    return {"sales.customers": wh.read("sales.customers", csn=csn).sort_by("customer_id").to_pylist(),
            "sales.orders": wh.read("sales.orders", csn=csn).sort_by("order_id").to_pylist()}


def create_and_apply(wh: Warehouse, day: str) -> int:
    """The tables created and `day` applied by hand (a committed baseline a failing run must leave as it is)."""
    module = cdc_module()
    wh.create_table("sales.customers", module.CUSTOMERS, exist_ok=True)
    wh.create_table("sales.orders", module.ORDERS, partition_by=["day"], exist_ok=True)
    with wh.begin(label="baseline") as t:
        module.apply_customers(t, module.customer_changes(day))
        module.apply_orders(t, module.order_changes(day))
    return wh.readable_csn()


def test_last_changes_keeps_each_keys_last_change_and_ties_reach_the_merge(parse_warehouse: None,
                                                                          tmp_path: Path) -> None:
    """The reduction alone (no Airflow run): the last change of each key by seq; two changes of one key at one
    seq both stay, and the MERGE refuses them before anything is staged."""
    module = cdc_module()
    changes = pa.table({"op": ["insert", "update", "insert", "delete", "update"], "seq": [1, 3, 2, 5, 4],
                        "customer_id": [7, 7, 8, 8, 9], "name": ["a", "b", "c", None, "d"],
                        "city": ["x", "y", "z", None, "w"]}, schema=module.CUSTOMER_CHANGES)
    last = module.last_changes(changes, ["customer_id"])
    assert last.select(["op", "seq", "customer_id"]).to_pylist() == [
        {"op": "update", "seq": 3, "customer_id": 7}, {"op": "update", "seq": 4, "customer_id": 9},
        {"op": "delete", "seq": 5, "customer_id": 8}]
    upserts, deletes = module.split(last)
    assert upserts.column("customer_id").to_pylist() == [7, 9] and deletes.column("customer_id").to_pylist() == [8]
    with pytest.raises(module.BadBatchError, match=r"unknown op\(s\) \['upsert'\]"):
        module.last_changes(changes.set_column(0, "op", pa.array(["upsert"] * 5)), ["customer_id"])

    tied = module.customer_changes(D1, "duplicate_change")
    assert len(module.last_changes(tied, ["customer_id"])) == len(module.last_changes(
        module.customer_changes(D1), ["customer_id"])) + 1
    with Warehouse.open(catalog=f"sqlite:///{tmp_path / 'c.db'}", root=str(tmp_path / "root")) as wh:
        wh.init()
        wh.create_table("sales.customers", module.CUSTOMERS)
        with wh.begin() as t:
            with pytest.raises(SchemaMismatchError, match=r"holds 1 key\(s\) more than once, e.g. \{'customer_id': "
                                                          rf"{ids(N1, 1)[0]}\}}"):
                module.apply_customers(t, tied)
            assert wh.transaction_info(t.tid)["parts"] == []  # refused before anything was staged


def test_reapplying_a_day_changes_nothing_and_an_older_update_never_overwrites_a_newer(
        parse_warehouse: None, tmp_path: Path) -> None:
    """The newer-wins `when_matched` expression of the customer upserts (no Airflow run); a row with no
    `last_seq` (loaded otherwise) takes the change."""
    module = cdc_module()
    with Warehouse.open(catalog=f"sqlite:///{tmp_path / 'c.db'}", root=str(tmp_path / "root")) as wh:
        wh.init()
        wh.create_table("sales.customers", module.CUSTOMERS)
        loaded = ids(N1, 1)[0]
        with wh.begin() as t:
            t.append("sales.customers", pa.table({"customer_id": [loaded], "name": ["loaded by hand"], "city": [None],
                                                  "last_seq": [None]}, schema=module.CUSTOMERS))
        create_and_apply(wh, D1)
        [row] = [r for r in state(wh)["sales.customers"] if r["customer_id"] == loaded]
        assert (row["name"], row["city"]) == (f"customer-{loaded}", "Porto") and row["last_seq"] is not None
        create_and_apply(wh, D2)
        applied = state(wh)
        create_and_apply(wh, D2)  # the same day again (a cleared group)
        assert state(wh) == applied
        create_and_apply(wh, D1)  # an older day, late: its change of customer N1+0 is older than D2's
        renamed = ids(N1, 0)[0]
        [row] = [r for r in state(wh)["sales.customers"] if r["customer_id"] == renamed]
        assert row["name"] == f"customer-{renamed} ({D2})" and row["last_seq"] > (N1 + 1) * 1000


def test_a_day_of_cdc_merges_both_tables_at_one_csn(dagbag: Any, txn_conn: Warehouse) -> None:
    wh = txn_conn
    first = run_cdc({"day": D1})
    assert str(first.state) == "success", task_states(first)
    csn1 = xcom(first, "apply.commit")
    assert xcom(first, "apply.merge_customers") == {"changes": 9, "inserted": 5, "updated": 0, "deleted": 0}
    assert xcom(first, "apply.merge_orders") == {"changes": 10, "inserted": 8, "updated": 0, "deleted": 0}

    second = run_cdc({"day": D2})
    states = task_states(second)
    assert str(second.state) == "success", states
    assert states["apply.rollback"][0] == "skipped"
    csn = xcom(second, "apply.commit")
    assert isinstance(csn, int) and csn > csn1 and xcom(second, "apply.outcome") == csn
    # day 2: its customers inserted (the one created and deleted that day never appears), day 1's +0 renamed
    # (newer than the row), day 1's +3 deleted; orders: day 2's new ones, a correction, a late order of day 1
    # and a cancellation of day 1, each in day 1's partition
    assert xcom(second, "apply.merge_customers") == {"changes": 9, "inserted": 4, "updated": 1, "deleted": 1}
    assert xcom(second, "apply.merge_orders") == {"changes": 10, "inserted": 7, "updated": 1, "deleted": 1}
    after, before = state(wh, csn), state(wh, csn - 1)
    assert before == state(wh, csn1)  # both tables changed at the one CSN, neither before it
    n2 = N1 + 1
    customers = {r["customer_id"]: r for r in after["sales.customers"]}
    assert sorted(customers) == sorted([*ids(N1 - 1, 0), *ids(N1, 0, 1, 2), *ids(n2, 0, 1, 2, 3)])
    assert customers[ids(N1, 0)[0]]["name"] == f"customer-{ids(N1, 0)[0]} ({D2})"  # day 2's change
    assert customers[ids(n2, 0)[0]]["city"] == "Oslo"  # inserted, then moved the same day: the last change
    orders = {r["order_id"]: r for r in after["sales.orders"]}
    assert len(orders) == len(after["sales.orders"]) == 8 + 7 - 1
    corrected, late, cancelled = ids(N1, 0)[0] * 10, ids(N1, 0)[0] * 10 + 5, ids(N1, 1)[0] * 10 + 1
    assert (orders[corrected]["amount"], orders[corrected]["status"]) == (9.5, "corrected")
    assert orders[late]["day"] == orders[corrected]["day"] == dt.date(2024, 3, 1)  # in the earlier day's partition
    assert cancelled not in orders and cancelled in {r["order_id"] for r in before["sales.orders"]}
    assert (orders[ids(n2, 0)[0] * 10]["status"], orders[ids(n2, 0)[0] * 10]["amount"]) == ("paid", 12.5)

    [txn] = [t for t in transactions_of(wh, DAG_ID) if t["label"] == f"{DAG_ID}/{second.run_id}"]
    assert txn["state"] == COMMITTED and txn["commit_csn"] == csn
    keys = {p["key"] for p in wh.transaction_info(txn["tid"])["parts"]}
    assert keys == {f"{DAG_ID}/apply.merge_customers/-1", f"{DAG_ID}/apply.merge_orders/-1"}
    report = xcom(second, "apply.check")  # write-audit-publish: checked before the commit
    assert report["passed"] and [c["name"] for c in report["checks"]] == [
        "every order has its customer", "unique(sales.customers: customer_id)", "unique(sales.orders: order_id)",
        "no negative amount"]

    from airflow_txn.airflow import table_asset
    from airflow_txn.airflow.version_compat import OUTLET_PARTITION_KEYS

    # an Asset event per table carrying the commit's CSN; where Airflow lets a task set partition keys (3.3), one
    # per partition written: the day the late order and the correction landed in, and the day itself
    events = asset_events_with_partitions(second)
    customers_uri, orders_uri = (table_asset(t).uri for t in TABLES)
    assert [(uri, key) for uri, key, _ in events] == (
        [(customers_uri, None), (orders_uri, D1), (orders_uri, D2)] if OUTLET_PARTITION_KEYS
        else [(customers_uri, None), (orders_uri, None)])
    assert all(extra["csn"] == csn and extra["tid"] == txn["tid"] for _, _, extra in events)
    assert xcom(second, "wait_for_commit") == csn
    assert xcom(second, "summary") == {"csn": csn, "customers": 8, "orders": 14, "orders_per_day": {
        "2024-02-29": 2, "2024-03-01": 6, "2024-03-02": 6}}


@pytest.mark.parametrize("catalog_url", ["sqlite"], indirect=True)  # Airflow's retry: one catalog will do
def test_a_retried_merge_replaces_its_failed_try(dagbag: Any, txn_conn: Warehouse, tmp_path: Path) -> None:
    """merge_orders fails after its two MERGE statements staged; its retry merges again under the same key, and
    the failed try's rewrite and inserts are withdrawn: every order once, as a single try leaves them."""
    wh = txn_conn
    run = run_cdc({"day": D1, "fail_task": "merge_orders", "fail_tries": 1})
    states = task_states(run)
    assert str(run.state) == "success", states
    assert states["apply.merge_orders"] == ("success", 2) and states["apply.merge_customers"] == ("success", 1)
    csn = xcom(run, "apply.commit")
    orders = wh.read("sales.orders", csn=csn).column("order_id").to_pylist()
    assert len(orders) == len(set(orders)) == 8
    [txn] = transactions_of(wh, DAG_ID)
    parts = [p for p in wh.transaction_info(txn["tid"])["parts"] if p["key"] == f"{DAG_ID}/apply.merge_orders/-1"]
    assert {p["creation_csn"] for p in parts} == {csn, ROLLBACK_CSN}  # try 1 withdrawn, try 2 committed
    with Warehouse.open(catalog=f"sqlite:///{tmp_path / 'reference.db'}", root=str(tmp_path / "reference")) as ref:
        ref.init()
        create_and_apply(ref, D1)
        assert state(ref) == state(wh)  # exactly what one try of each merge leaves


@pytest.mark.parametrize("catalog_url", ["sqlite"], indirect=True)  # the check reads files: one catalog will do
def test_a_failed_check_rolls_back_both_tables(dagbag: Any, txn_conn: Warehouse) -> None:
    """An order of a customer that does not exist: both merges succeed, the check fails before the commit, and
    the transaction rolls back: neither table changes, though the customer merge alone was fine."""
    wh = txn_conn
    before_csn = create_and_apply(wh, D1)
    before = state(wh)
    run = run_cdc({"day": D2, "bad_batch": "orphan_order"})
    states = task_states(run)
    assert str(run.state) == "failed", states
    assert states["apply.merge_customers"] == states["apply.merge_orders"] == ("success", 1)
    assert states["apply.check"] == ("failed", 1)  # caught, without a retry
    assert states["apply.commit"][0] == "upstream_failed" and states["apply.outcome"][0] == "failed"
    assert states["wait_for_commit"][0] == "upstream_failed"
    assert wh.readable_csn() == before_csn and state(wh) == before  # both tables exactly as they were
    [txn] = transactions_of(wh, DAG_ID)
    assert txn["state"] == ROLLED_BACK
    assert txn["failed_reason"].startswith("checks of apply.check failed: every order has its customer = 1")
    assert asset_events(run) == []


@pytest.mark.parametrize("catalog_url", ["sqlite"], indirect=True)
def test_a_batch_the_merge_refuses_fails_without_retry_and_rolls_back_both_tables(
        dagbag: Any, txn_conn: Warehouse) -> None:
    """Two changes of one customer at the same seq: the reduction cannot pick the last, the MERGE refuses the
    duplicate key before staging, the task fails for good (a retry would merge the same batch) and the
    transaction rolls back, with the orders merged in it if that task ran first."""
    wh = txn_conn
    before_csn = create_and_apply(wh, D1)
    before = state(wh)
    run = run_cdc({"day": D2, "bad_batch": "duplicate_change"})
    states = task_states(run)
    assert str(run.state) == "failed", states
    assert states["apply.merge_customers"] == ("failed", 1)  # AirflowFailException: no retry
    # merged, or failed at once meeting the rolled-back transaction: dag.test() runs the two in either order
    assert states["apply.merge_orders"] in (("success", 1), ("failed", 1))
    assert states["apply.commit"][0] == "upstream_failed" and states["apply.outcome"][0] == "failed"
    assert wh.readable_csn() == before_csn and state(wh) == before
    [txn] = transactions_of(wh, DAG_ID)
    assert txn["state"] == ROLLED_BACK and "apply.merge_customers" in txn["failed_reason"]
