"""Publishing turned on from the Airflow connection (`publish` in its extra): the commit's Asset events carry
each table's Iceberg snapshot id, the one `Warehouse.published` names for the commit's CSN, so an outside job
reads every table at that CSN."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from airflow_txn import Warehouse
from tests.airflow.helpers import asset_events, dag_test, parse_dag, task_states, xcom

pytestmark = pytest.mark.airflow

pytest.importorskip("pyiceberg")
PROBE = Path(__file__).parent / "dag_files" / "txn_publish_probe.py"


def test_asset_events_carry_the_iceberg_snapshot_of_each_table_when_the_connection_publishes(
        dagbag: Any, catalog_url: str, root: Path, wh: Warehouse, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_AIRFLOW_TXN_DEFAULT", json.dumps({"conn_type": "airflow_txn", "extra": {
        "catalog": catalog_url, "root": str(root), "publish": "iceberg"}}))
    run = dag_test(parse_dag(PROBE, "txn_publish_probe"))
    assert str(run.state) == "success", task_states(run)
    csn = xcom(run, "commit")
    with Warehouse.open(catalog=catalog_url, root=str(root), publish="iceberg") as pub:
        published = pub.published(csn=csn)
    events: dict[str, dict[str, Any]] = {extra["table"]: extra for _, extra in asset_events(run)}
    assert set(events) == {"pub.orders", "pub.items"}
    for table, extra in events.items():
        assert extra["csn"] == csn
        assert extra["iceberg_snapshot_id"] == published[table]["iceberg_snapshot_id"], (extra, published)
        assert extra["iceberg_table"] == published[table]["iceberg_table"]
        snapshot = wh_snapshot(catalog_url, root, table, extra["iceberg_snapshot_id"])
        assert snapshot == (table == "pub.items") + 2  # rows the outside reader sees at that snapshot


def wh_snapshot(catalog_url: str, root: Path, table: str, snapshot_id: int) -> int:
    """Rows of `table`'s Iceberg snapshot, read with pyiceberg as an outside engine would."""
    with Warehouse.open(catalog=catalog_url, root=str(root), publish="iceberg") as wh:
        return int(wh.iceberg_catalog().load_table(tuple(table.split("."))).scan(snapshot_id=snapshot_id)
                   .to_arrow().num_rows)
