"""Assets the Airflow 3.3 way (issue 20, item 3): a table's Asset names the warehouse by the id its catalog
keeps (not the connection), with a name and a group; commits with known tables emit concrete events with
partition keys (test_taskflow: the daily_incremental example); commits made outside Airflow reach readers
through commit_watcher's CommitLogTrigger, driven here against a real catalog, and the example DAG
scheduled on it registers its watcher in Airflow."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from airflow_txn import Warehouse
from airflow_txn.errors import InvalidArgumentError, InvalidNameError, WarehouseNotFoundError
from tests.airflow.conftest import connection_json
from tests.airflow.helpers import run_dag, task_states, xcom

pytestmark = pytest.mark.airflow

ORDERS = pa.schema([("id", pa.int64()), ("day", pa.string())])


def test_a_table_asset_names_the_warehouse_its_catalog_keeps_not_the_connection(
        txn_conn: Warehouse, open_wh: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, catalog_url: str,
        root: Path) -> None:
    from airflow_txn.airflow import commit_alias, table_asset, table_identity
    from airflow_txn.operators import CommitTransactionOperator

    wh = txn_conn
    wid = wh.warehouse_id
    assert len(wid) == 32 and open_wh().warehouse_id == wid  # kept in the catalog: every handle reads the same
    # a second connection to the same warehouse (or the first one renamed): the same Asset
    monkeypatch.setenv("AIRFLOW_CONN_RENAMED_WAREHOUSE", connection_json(catalog_url, root))
    asset = table_asset("shop.orders")
    assert asset == table_asset("shop.orders", "renamed_warehouse") == table_asset("shop.orders", warehouse_id=wid)
    assert (asset.uri, asset.name, asset.group) == (f"airflow-txn://{wid}/shop.orders", f"shop.orders@{wid[:12]}",
                                                    "airflow-txn")
    assert asset.extra == {"warehouse_id": wid, "table": "shop.orders"}
    ident = table_identity(wid, "shop.orders")  # the one naming function (lineage names too)
    assert (ident.namespace, ident.uri, ident.name) == (f"airflow-txn://{wid}", asset.uri, asset.name)
    # another warehouse with a table of the same name, through another connection: another Asset
    monkeypatch.setenv("AIRFLOW_CONN_OTHER_WAREHOUSE", connection_json(f"sqlite:///{tmp_path / 'other.db'}",
                                                                       tmp_path / "other"))
    with pytest.raises(WarehouseNotFoundError, match="connection 'other_warehouse'"):
        table_asset("shop.orders", "other_warehouse")  # naming its tables does not create it (D16, D17)
    assert not (tmp_path / "other.db").exists()
    with Warehouse.open(f"sqlite:///{tmp_path / 'other.db'}", tmp_path / "other") as other_wh:
        other_wh.init()
    other = table_asset("shop.orders", "other_warehouse")
    assert other.uri != asset.uri and other.name != asset.name
    for bad_id, bad_table in (("not-hex", "shop.orders"), (wid, "orders"), ("", "shop.orders")):
        with pytest.raises(InvalidNameError):
            table_identity(bad_id, bad_table)
    assert table_identity(wid.upper(), "shop.orders") == ident  # one check of the id's form, as the URI handler's

    # a commit whose tables are known gets their Assets as outlets, the alias for any other table
    from airflow.sdk import DAG

    with DAG("asset_outlets_probe", schedule=None):
        commit = CommitTransactionOperator(task_id="commit", tid="x", tables=["shop.orders"])
        with pytest.raises(InvalidArgumentError, match="`tables` or `outlets`, not both"):
            CommitTransactionOperator(task_id="both", tid="x", tables=["shop.orders"], outlets=[])
    assert commit.outlets == [asset, commit_alias()]


def test_partition_keys_are_the_values_in_partition_order() -> None:
    from airflow_txn.airflow.assets.tables import asset_partition_keys

    assert asset_partition_keys([{"day": "2024-01-02"}, {"day": "2024-01-01"}, {"day": "2024-01-02"}]) == [
        "2024-01-01", "2024-01-02"]
    assert asset_partition_keys([{"day": "2024-01-01", "region": "eu"}, {"day": "2024-01-01", "region": None},
                                 {"day": "2024-01-01", "region": ""}]) == [
        "2024-01-01|__empty__", "2024-01-01|__null__", "2024-01-01|eu"]  # ProductMapper's delimiter
    assert asset_partition_keys([{}]) == []  # an unpartitioned table: the event has no key
    assert asset_partition_keys([{"k": "x" * 251}]) == []  # longer than Airflow takes: left out


# --- commits made outside Airflow: CommitLogTrigger ---------------------------------------------------------------


def collect(trigger: Any, count: int) -> list[dict[str, Any]]:
    """The payloads of the first `count` events the trigger fires (it never ends by itself)."""
    async def first() -> list[dict[str, Any]]:
        events = trigger.run()
        try:
            return [(await asyncio.wait_for(anext(events), timeout=60)).payload for _ in range(count)]
        finally:
            await events.aclose()

    return asyncio.run(first())


def test_the_commit_log_trigger_fires_for_each_commit_made_outside_airflow(txn_conn: Warehouse) -> None:
    from airflow_txn.airflow import CommitLogTrigger

    wh = txn_conn
    wh.create_table("shop.orders", ORDERS, partition_by=["day"])
    wh.create_table("shop.other", ORDERS)
    with wh.begin() as txn:  # before the watch starts: not news
        txn.append("shop.orders", pa.table({"id": [0], "day": ["2024-01-01"]}))
    start = wh.readable_csn()
    csns = []
    for table, metadata in (("shop.orders", None), ("shop.orders", {"airflow": {"dag_id": "load"}}),
                            ("shop.other", None), ("shop.orders", {"job": "nightly"})):
        with wh.begin(metadata=metadata) as txn:
            txn.append(table, pa.table({"id": [1, 2], "day": ["2024-01-01", "2024-01-01"]}))
        csns.append(wh.readable_csn())
    assert wh.compact("shop.orders")["merged"] == 1  # a merge writes no commit record: it never fires

    trigger = CommitLogTrigger(tables=["shop.orders"], poll_interval=0.05, after_csn=start, include_airflow=False)
    assert CommitLogTrigger(**trigger.serialize()[1]).serialize() == trigger.serialize()
    outside = collect(trigger, 2)
    assert [(e["table"], e["csn"], e["metadata"]) for e in outside] == [
        ("shop.orders", csns[0], {}), ("shop.orders", csns[3], {"job": "nightly"})]  # not Airflow's, not other's
    assert outside[0]["warehouse_id"] == wh.warehouse_id and outside[0]["tables"] == ["shop.orders"]
    every = collect(CommitLogTrigger(tables=["shop.orders"], poll_interval=0.05, after_csn=start), 3)
    assert [e["csn"] for e in every] == [csns[0], csns[1], csns[3]]  # the default: Airflow's commits too

    async def later_commits() -> tuple[int, list[int]]:  # a trigger started at the watermark hears commits made after
        events = CommitLogTrigger(tables=["shop.orders"], poll_interval=0.05).run()
        waiting = asyncio.ensure_future(anext(events))
        made: list[int] = []
        deadline = time.monotonic() + 60
        try:  # when it has read its starting watermark is not known: commit until it hears one (in CSN order)
            while not waiting.done():
                assert time.monotonic() < deadline, "the trigger heard no commit made after it started"
                with wh.begin() as txn:
                    txn.append("shop.orders", pa.table({"id": [3 + len(made)], "day": ["2024-01-02"]}))
                made.append(wh.readable_csn())
                await asyncio.wait({waiting}, timeout=0.5)
            return waiting.result().payload["csn"], made
        finally:
            waiting.cancel()
            await asyncio.gather(waiting, return_exceptions=True)
            await events.aclose()

    heard, made = asyncio.run(later_commits())
    assert heard in made[1:]  # the first commit was made before the trigger ran: not news to it


def test_the_example_reader_is_scheduled_on_a_watched_asset_that_airflow_registers(
        dagbag: Any, txn_conn: Warehouse) -> None:
    from airflow.models.trigger import Trigger
    from airflow.utils.session import create_session
    from sqlalchemy import select

    from airflow_txn.airflow import CommitLogTrigger, commit_watcher, table_asset

    dag = dagbag.get_dag("external_commits_reader")
    [watched] = dag.timetable.asset_condition.objects
    [watcher] = watched.watchers
    assert isinstance(watcher.trigger, CommitLogTrigger) and watcher.trigger.tables == ["shop.orders"]
    wh = txn_conn
    log_asset = commit_watcher("shop.orders")  # not the table's Asset, which other DAGs define with no watcher
    assert (log_asset.uri, log_asset.name) == (f"{table_asset('shop.orders').uri}?watch=commit-log",
                                               f"{table_asset('shop.orders').name}:commit-log")
    wh.create_table("shop.orders", ORDERS, partition_by=["day"])
    with wh.begin() as txn:
        txn.append("shop.orders", pa.table({"id": [1, 2], "day": ["2024-01-01", "2024-01-01"]}))
    run = run_dag(dagbag, "external_commits_reader")  # a manual run: reads at the watermark
    assert str(run.state) == "success", task_states(run)
    assert xcom(run, "count_orders") == {"csn": wh.readable_csn(), "rows": 2}
    # dag.test() synced the DAG folder as the DAG processor does: the watcher's trigger is registered, on the
    # commit-log Asset of this warehouse's table (the folder parsed with this test's connection)
    with create_session() as session:
        triggers = session.scalars(select(Trigger).where(
            Trigger.classpath == "airflow_txn.airflow.triggers.commits.CommitLogTrigger")).all()
        watched_uris = {asset.uri for t in triggers for asset in t.assets}
    assert log_asset.uri in watched_uris


@pytest.mark.parametrize(("uri", "wrong"), [
    ("airflow-txn://airflow_txn_default/shop.orders", "names a warehouse by its id"),  # the old conn-id form
    ("airflow-txn://0a1b2c/shop", "table"),
    ("airflow-txn://0a1b2c/shop.orders?version=3", "the only query"),
])
def test_an_asset_uri_naming_no_warehouse_table_is_refused_when_written(uri: str, wrong: str) -> None:
    """Airflow calls the scheme's handler (provider info asset-uris) on every airflow-txn URI: a malformed one fails
    the DAG file, rather than becoming an Asset no commit ever updates."""
    from airflow.sdk import Asset

    with pytest.raises(ValueError, match=wrong):
        Asset(uri=uri)
    assert Asset(uri="airflow-txn://0A1B2C/shop.orders").uri == "airflow-txn://0a1b2c/shop.orders"
    assert Asset(uri="airflow-txn://0a1b2c/shop.orders?watch=commit-log").uri.endswith("?watch=commit-log")
