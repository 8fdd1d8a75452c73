"""The transactions page's JSON API in this process (FastAPI's TestClient on the plugin's app) with
Airflow's real SimpleAuthManager in multi-team mode, so that a user may read one DAG and not
another (each DAG's bundle belongs to a team, as Airflow's metadata database records it): the
listing filters by permission before its limit, and the page opens its warehouse once per process.
The live API server's tests are in test_plugin_page.py."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

from airflow_txn import Warehouse

pytestmark = pytest.mark.airflow

TEAMS = {"dag_of_a": "team_a", "dag_of_b": "team_b"}  # DAG: the team its bundle belongs to


@pytest.fixture
def teams(airflow_db: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Multi-team mode, and in Airflow's metadata database one bundle per team with one DAG each."""
    from airflow_txn.airflow.version_compat import multi_team_auth

    if not multi_team_auth():
        pytest.skip("Airflow 3.1 has no multi-team mode (version_compat.multi_team_auth)")
    from airflow.models.dag import DagModel
    from airflow.models.dagbundle import DagBundleModel
    from airflow.models.team import Team
    from airflow.utils.session import create_session

    monkeypatch.setenv("AIRFLOW__CORE__MULTI_TEAM", "True")
    with create_session() as session:
        for dag_id, team_name in TEAMS.items():
            team = session.get(Team, team_name) or Team(name=team_name)
            bundle = session.get(DagBundleModel, f"bundle_{team_name}") or DagBundleModel(name=f"bundle_{team_name}")
            bundle.teams = [team]
            session.add_all([team, bundle])
            session.flush()
            if session.get(DagModel, dag_id) is None:
                session.add(DagModel(dag_id=dag_id, bundle_name=bundle.name, fileloc=f"/dags/{dag_id}.py"))
    yield


@pytest.fixture
def api(txn_conn: Warehouse, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A client of the plugin's app, as the API server mounts it, with the real auth manager."""
    from airflow.api_fastapi.app import init_auth_manager
    from fastapi.testclient import TestClient

    from airflow_txn.airflow.plugins.web.app import app

    monkeypatch.setenv("AIRFLOW__API_AUTH__JWT_SECRET", "a-secret-for-the-page-permission-tests-" + "x" * 40)
    init_auth_manager()
    with TestClient(app) as client:
        yield client


def _bearer(name: str, role: str, teams: list[str]) -> dict[str, str]:
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser

    from airflow_txn.airflow.version_compat import multi_team_auth

    assert multi_team_auth() or not teams  # 3.1's users have no teams (the tests giving some skip there)
    with_teams = {"teams": teams} if multi_team_auth() else {}
    token = get_auth_manager().generate_jwt(SimpleAuthManagerUser(username=name, role=role, **with_teams))
    return {"Authorization": f"Bearer {token}"}


def test_a_user_of_one_dag_gets_its_transactions_whatever_the_others(teams: None, api: Any,
                                                                     txn_conn: Warehouse) -> None:
    """issue 16, case 7: the listing filters by the DAGs the user may read in SQL, then limits: a
    user allowed one DAG whose transactions are older than `limit` others still gets them."""
    wh = txn_conn
    no_dag = wh.begin(label="a manual fix").tid  # names no DAG: for users of DAGs in general
    mine = [wh.begin(label=f"dag_of_a/manual__run{i}").tid for i in range(2)]
    for i in range(8):
        wh.begin(label=f"dag_of_b/manual__run{i}")
    alice = _bearer("alice", "viewer", ["team_a"])
    listed = api.get("/api/transactions", params={"limit": 5}, headers=alice)
    assert listed.status_code == 200, listed.text
    assert [t["tid"] for t in listed.json()["transactions"]] == [*mine[::-1], no_dag]
    of_dag = api.get("/api/transactions", params={"limit": 1, "dag_id": "dag_of_a"}, headers=alice).json()
    assert [t["tid"] for t in of_dag["transactions"]] == [mine[1]]
    refused = api.get("/api/transactions", params={"dag_id": "dag_of_b"}, headers=alice).json()
    assert refused["transactions"] == []
    bob = _bearer("bob", "viewer", ["team_b"])
    theirs = api.get("/api/transactions", params={"limit": 5}, headers=bob).json()["transactions"]
    assert len(theirs) == 5 and {t["dag_id"] for t in theirs} == {"dag_of_b"}


def test_the_page_opens_its_warehouse_once_per_process(api: Any, txn_conn: Warehouse,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    """issue 16, case 8: two requests (and the watermark poll) share one open Warehouse."""
    from airflow_txn.airflow.plugins.web import app as web

    viewer = _bearer("viewer", "viewer", [])
    caplog.set_level(logging.INFO, logger="airflow_txn.airflow.plugins.web")
    opened = len(web.WAREHOUSES._open)
    for path in ("/api/transactions", "/api/watermark", "/api/watermark"):
        assert api.get(path, headers=viewer).status_code == 200
    assert len(web.WAREHOUSES._open) == opened + 1
    assert len([r for r in caplog.records if "opened Warehouse" in r.getMessage()]) == 1


def test_the_api_answers_its_typed_shapes_whole(api: Any, txn_conn: Warehouse) -> None:
    """The routes declare TypedDicts (airflow_txn/airflow/plugins/web/data.py) as FastAPI's response types, so
    FastAPI validates each answer against them: nothing may be dropped or converted on the way."""
    import json

    import pyarrow as pa

    from airflow_txn.airflow.plugins.web import data

    wh = txn_conn
    wh.create_table("shop.days", pa.schema([("day", pa.string()), ("n", pa.int64())]), partition_by=["day"])
    with wh.begin(label="a manual fix") as txn:
        txn.append("shop.days", pa.table({"day": ["d1", None], "n": [1, 2]}), key="manual-fix")
    open_txn = wh.begin(label="another fix")
    open_txn.append("shop.days", pa.table({"day": ["d2"], "n": [3]}))
    open_txn.overwrite("shop.days", pa.table({"day": ["d1"], "n": [4]}), partitions=[{"day": "d1"}])
    viewer = _bearer("viewer", "viewer", [])
    for tid in (txn.tid, open_txn.tid):
        answer = api.get(f"/api/transactions/{tid}", headers=viewer)
        assert answer.status_code == 200, answer.text
        shown = answer.json()
        assert isinstance(shown.pop("can_roll_back"), bool)
        assert shown == json.loads(json.dumps(data.detail(wh.transaction_info(tid))))
    admin = _bearer("admin", "admin", [])  # may read the whole warehouse: the newest commit, the tables
    assert api.get("/api/watermark", headers=admin).json() == json.loads(json.dumps(data.watermark(wh)))
    assert api.get("/api/tables", headers=admin).json() == {"tables": json.loads(json.dumps(data.tables(wh)))}
    listed = api.get("/api/transactions", headers=viewer).json()
    assert listed["transactions"] == json.loads(json.dumps(data.list_transactions(wh)))
    schemas = api.get("/openapi.json").json()["components"]["schemas"]
    assert {"TransactionView", "TransactionList", "PageWatermark", "TableList", "PagePart"} <= set(schemas)


def test_a_state_filter_that_is_no_state_is_a_bad_request_and_private_values_never_show(
        api: Any, txn_conn: Warehouse) -> None:
    """Issue 30, items 7 and 8: `?state=bogus` is refused naming the states (InvalidArgumentError: 400); what
    airflow_txn keeps with a transaction for itself (a Spark Connect session id) is in no answer of the page."""
    admin = _bearer("admin", "admin", [])
    refused = api.get("/api/transactions", params={"state": "bogus"}, headers=admin)
    assert refused.status_code == 400 and "state must be one of" in refused.json()["detail"], refused.text
    txn = txn_conn.begin(label="dag_of_a/manual__secret")
    session = txn.claim_private("spark_connect_session sc://spark:15002", "a-session-id-no-one-may-see")
    for path in ("/api/transactions", f"/api/transactions/{txn.tid}"):
        answer = api.get(path, headers=admin)
        assert answer.status_code == 200 and session not in answer.text and txn.tid in answer.text, answer.text
