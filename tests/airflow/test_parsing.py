"""Parsing never guesses (issue 29, item 3; docs/DESIGN.md D16): the example DAGs parsed in a bare
environment (a process with a fresh HOME, AIRFLOW_HOME and AIRFLOW_TXN_HOME, no connection, a DagBag) either
name their warehouse from what the DAG says (`warehouse_id=`, a catalog configured on purpose) or fail with
an import error naming the connection; nothing is created under those homes (no catalog.db, no warehouse
directory), and a connection whose catalog does not exist is an import error naming it, not a new catalog."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from airflow_txn import Warehouse
from tests.airflow.conftest import connection_json

pytestmark = pytest.mark.airflow

REPO = Path(__file__).resolve().parents[2]
READERS = {"multi_table_reader.py", "external_commits_reader.py", "daily_incremental.py", "cdc_apply.py"}
"""The example DAGs naming table Assets while parsed: scheduled on them, or a commit's outlets (`tables=`)."""
PINNED_ID = "ABCDEF0123456789ABCDEF0123456789"

PARSE = """
import json, sys
from airflow_txn.airflow.version_compat import dagbag_module
DagBag = dagbag_module().DagBag

def walk(condition):
    # (Airflow 3.1's timetable of a DAG scheduled on nothing holds a _NullAsset: no uri, no objects)
    return [condition.uri] if hasattr(condition, "uri") else [
        u for o in getattr(condition, "objects", []) for u in walk(o)]

bag = DagBag(dag_folder=sys.argv[1])
uris = {}
for dag_id, dag in bag.dags.items():
    condition = getattr(dag.timetable, "asset_condition", None)
    if condition is not None:
        uris[dag_id] = sorted(walk(condition))
print("RESULT " + json.dumps({"errors": dict(bag.import_errors),
                              "dag_ids": sorted(bag.dag_ids), "uris": uris}))
"""

PINNED_DAG = f'''
from airflow.sdk import DAG
from airflow_txn.airflow import commit_watcher, table_asset

with DAG("pinned_reader", schedule=[table_asset("shop.orders", warehouse_id="{PINNED_ID}")
                                   & commit_watcher("shop.customers", warehouse_id="{PINNED_ID}")]):
    pass
'''


def bare_parse(tmp_path: Path, folder: Path, **env: str) -> dict[str, Any]:
    """DagBag(folder) in a new process with fresh homes under tmp_path and no airflow_txn setting but `env`."""
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("AIRFLOW_TXN_", "AIRFLOW_CONN_", "AIRFLOW__", "AIRFLOW_HOME"))}
    clean.update(HOME=str(tmp_path / "home"), AIRFLOW_HOME=str(tmp_path / "airflow_home"),
                 AIRFLOW_TXN_HOME=str(tmp_path / "txn_home"), AIRFLOW__CORE__LOAD_EXAMPLES="False",
                 AIRFLOW__CORE__DAGS_FOLDER=str(folder), PYTHONPATH=str(REPO), **env)
    (tmp_path / "home").mkdir(parents=True, exist_ok=True)
    result = subprocess.run([sys.executable, "-c", PARSE, str(folder)], cwd=tmp_path, env=clean, capture_output=True,
                            text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    [line] = [x for x in result.stdout.splitlines() if x.startswith("RESULT ")]
    parsed: dict[str, Any] = json.loads(line.removeprefix("RESULT "))
    parsed["errors"] = {Path(k).name: v for k, v in parsed["errors"].items()}
    return parsed


def created_by_airflow_txn(tmp_path: Path) -> list[str]:
    """Anything airflow_txn would have made under the homes: a catalog file, a warehouse root, its home."""
    return sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")
                  if p.name in ("catalog.db", "warehouse", ".airflow_txn", "txn_home") or p.suffix == ".db-wal")


def test_without_the_connection_the_example_readers_fail_naming_it_and_nothing_is_created(tmp_path: Path) -> None:
    seen = bare_parse(tmp_path, REPO / "dags")
    assert set(seen["errors"]) == READERS, seen["errors"]
    for text in seen["errors"].values():
        assert "ConnectionNotFoundError" in text and "connection 'airflow_txn_default' is not defined" in text, text
        assert "warehouse_id=" in text, text  # the other way out, named
    assert set(seen["dag_ids"]) == {"month_end_close", "multi_table_backfill",
                                    "warehouse_maintenance"}  # the DAGs naming no Asset parse as before
    assert created_by_airflow_txn(tmp_path) == []


def test_a_dag_naming_its_warehouse_id_parses_with_no_connection_and_no_catalog(tmp_path: Path) -> None:
    folder = tmp_path / "dags"
    folder.mkdir()
    (folder / "pinned_reader.py").write_text(PINNED_DAG)
    seen = bare_parse(tmp_path, folder)
    assert seen["errors"] == {} and seen["dag_ids"] == ["pinned_reader"]
    wid = PINNED_ID.lower()  # one check owns the id's form: assets.uris.check_warehouse_id lower-cases it
    assert seen["uris"]["pinned_reader"] == [f"airflow-txn://{wid}/shop.customers?watch=commit-log",
                                             f"airflow-txn://{wid}/shop.orders"]
    assert created_by_airflow_txn(tmp_path) == []


def test_a_missing_catalog_is_an_import_error_naming_it_not_a_new_warehouse(tmp_path: Path) -> None:
    """Through the connection, and through a catalog configured on purpose (AIRFLOW_TXN_CATALOG): read only."""
    elsewhere = tmp_path / "elsewhere"
    via_conn = connection_json(f"sqlite:///{elsewhere}/conn/catalog.db", elsewhere / "conn" / "warehouse")
    seen = bare_parse(tmp_path, REPO / "dags", AIRFLOW_CONN_AIRFLOW_TXN_DEFAULT=via_conn)
    assert set(seen["errors"]) == READERS
    for text in seen["errors"].values():
        assert "WarehouseNotFoundError" in text, text
        where = f"catalog sqlite:///{elsewhere}/conn/catalog.db (connection 'airflow_txn_default')"
        assert f"no warehouse at {where}" in text, text
    seen = bare_parse(tmp_path, REPO / "dags", AIRFLOW_TXN_CATALOG=f"sqlite:///{elsewhere}/env/catalog.db")
    assert set(seen["errors"]) == READERS
    assert all(f"no warehouse at catalog sqlite:///{elsewhere}/env/catalog.db" in t for t in seen["errors"].values())
    assert created_by_airflow_txn(tmp_path) == [] and not elsewhere.exists()


def test_with_the_connection_the_readers_name_its_warehouse_and_parsing_writes_nothing(tmp_path: Path) -> None:
    made = tmp_path / "made"
    with Warehouse.open(f"sqlite:///{made}/catalog.db", made / "root") as wh:
        wh.init()
        wid = wh.warehouse_id
    before = {p: p.stat().st_mtime_ns for p in made.rglob("*")}
    seen = bare_parse(tmp_path / "bare", REPO / "dags", AIRFLOW_CONN_AIRFLOW_TXN_DEFAULT=connection_json(
        f"sqlite:///{made}/catalog.db", made / "root"))
    assert seen["errors"] == {}
    assert seen["uris"]["multi_table_reader"] == [f"airflow-txn://{wid}/{t}" for t in
                                                  ("shop.customers", "shop.order_items", "shop.orders")]
    assert seen["uris"]["external_commits_reader"] == [f"airflow-txn://{wid}/shop.orders?watch=commit-log"]
    assert created_by_airflow_txn(tmp_path / "bare") == []
    assert {p: p.stat().st_mtime_ns for p in made.rglob("*")} == before  # read only: no file added or written
