"""The airflow layer's small parts: connection extra, argument coercion, callable arguments, the group."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from airflow_txn.airflow.hooks.txn import TxnHook, coerce_csn, coerce_tables, config_from_extra
from airflow_txn.airflow.operators.base import call_with_context
from airflow_txn.core.isolation import Isolation
from airflow_txn.errors import InvalidArgumentError, TxnError
from tests.airflow.helpers import connection_form

pytestmark = pytest.mark.airflow


def test_connection_extra_names_the_warehouse(tmp_path: Path) -> None:
    cfg = config_from_extra({"catalog": f"sqlite:///{tmp_path}/c.db", "root": str(tmp_path / "wh"), "oracle": "sql"})
    assert cfg.catalog_url == f"sqlite:///{tmp_path}/c.db" and cfg.root == str(tmp_path / "wh")
    prefixed = config_from_extra({"extra__airflow_txn__catalog": "sqlite:////x/c.db", "extra__airflow_txn__root": ""})
    assert prefixed.catalog_url == "sqlite:////x/c.db"  # as the connection form stores it
    with pytest.raises(TxnError, match="unknown field"):
        config_from_extra({"catalgo": "sqlite:////x.db"})


def test_without_the_connection_the_environment_applies(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("AIRFLOW_CONN_AIRFLOW_TXN_DEFAULT", raising=False)
    monkeypatch.setenv("AIRFLOW_TXN_CATALOG", f"sqlite:///{tmp_path}/env.db")
    monkeypatch.setenv("AIRFLOW_TXN_ROOT", str(tmp_path / "env_root"))
    hook = TxnHook()
    assert hook.extra() == {}
    assert hook.config().catalog_url == f"sqlite:///{tmp_path}/env.db"
    with hook.warehouse() as wh:
        wh.init()
        assert wh.readable_csn() == 1
    assert hook.test_connection() == (True, "warehouse reachable, readable CSN 1")


def test_the_test_button_reports_a_missing_warehouse_and_creates_nothing(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """issue 20, item 5: a typo in the connection no longer creates an empty catalog and root that test fine."""
    typo = tmp_path / "typo"
    monkeypatch.setenv("AIRFLOW_CONN_TYPO", json.dumps({"conn_type": "airflow_txn", "extra": {
        "catalog": f"sqlite:///{typo}/catalog.db", "root": str(typo / "warehouse")}}))
    ok, message = TxnHook(conn_id="typo").test_connection()
    assert not ok and message.startswith(f"no warehouse at catalog sqlite:///{typo}/catalog.db (root {typo}/warehouse)")
    assert "run `airflow-txn init`" in message
    assert not typo.exists()


def test_the_catalog_password_comes_from_the_password_field_and_spark_conf_is_a_form_field(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_txn.cli.airflow_connections import connection_config

    catalog = "postgresql+psycopg://reader@db.example:5432/warehouse"
    monkeypatch.setenv("AIRFLOW_CONN_PG_WAREHOUSE", json.dumps({"conn_type": "airflow_txn", "password": "s3cr/et",
                                                                "extra": {"catalog": catalog, "root": "/data/wh"}}))
    with_secret = "postgresql+psycopg://reader:s3cr%2Fet@db.example:5432/warehouse"
    assert TxnHook(conn_id="pg_warehouse").config().catalog_url == with_secret
    assert connection_config("pg_warehouse").catalog_url == with_secret  # `airflow-txn --conn-id` too
    assert "s3cr" not in json.dumps(TxnHook(conn_id="pg_warehouse").extra())
    with pytest.raises(TxnError, match="holds a password and so does its password field"):
        config_from_extra({"catalog": "postgresql+psycopg://reader:old@db/wh"}, password="new")
    with pytest.raises(TxnError, match="SQLite file, which takes none"):
        config_from_extra({"catalog": "sqlite:////x/c.db"}, password="pw")
    form = connection_form()  # what the UI's connection form gets
    assert form["standard_fields"]["password"] == {"hidden": False, "title": "Catalog password", "placeholder": None}
    assert "spark_conf" in form["extra_fields"]
    form = {"extra__airflow_txn__spark_conf": '{"spark.sql.shuffle.partitions": "4"}'}  # as the form stores it
    assert TxnHook.spark_conf(_with_extra(form)) == {"spark.sql.shuffle.partitions": "4"}


def test_the_hooks_form_methods_are_the_provider_infos_form() -> None:
    """Airflow 3.1 reads the connection form from the hook's methods (3.2+ from the provider info, never calling
    them): the same fields, built from the same entries (connection_form() above checks what the UI gets)."""
    from airflow_txn.airflow import provider

    [info] = provider.get_provider_info()["connection-types"]
    behaviour = TxnHook.get_ui_field_behaviour()
    assert behaviour == {"hidden_fields": ["host", "schema", "login", "port"],
                         "relabeling": {"password": "Catalog password"},
                         "placeholders": info["ui-field-behaviour"]["placeholders"]}


def test_a_trigger_whose_asynchronous_lookup_misses_the_connection_asks_the_synchronous_one(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Airflow 3.1's dag.test() runs a trigger inline where aget_connection misses an AIRFLOW_CONN_* connection: the
    trigger watched the AIRFLOW_TXN_* warehouse instead, for ever (version_compat.aget_connection)."""
    import asyncio

    from airflow_txn.airflow.version_compat import AirflowNotFoundException

    async def missing(cls: Any, conn_id: str) -> Any:
        raise AirflowNotFoundException(conn_id)

    catalog = f"sqlite:///{tmp_path}/c.db"
    conn = {"conn_type": "airflow_txn", "extra": {"catalog": catalog}}
    monkeypatch.setenv("AIRFLOW_CONN_ASYNC_MISS", json.dumps(conn))
    monkeypatch.setattr(TxnHook, "aget_connection", classmethod(missing))
    assert asyncio.run(TxnHook(conn_id="async_miss").aconfig()).catalog_url == catalog
    monkeypatch.delenv("AIRFLOW_CONN_ASYNC_MISS")
    monkeypatch.setenv("AIRFLOW_TXN_CATALOG", f"sqlite:///{tmp_path}/env.db")  # defined nowhere: the defaults
    assert asyncio.run(TxnHook(conn_id="async_miss").aconfig()).catalog_url == f"sqlite:///{tmp_path}/env.db"


def _with_extra(extra: dict[str, Any]) -> TxnHook:
    hook = TxnHook(conn_id="unused")
    hook._extra = extra
    return hook


def test_rendered_arguments_are_coerced() -> None:
    assert coerce_csn("12") == 12 and coerce_csn(None) == 1 and coerce_csn("None") == 1
    for bad in (True, "x", 0, str(2**63), 2**64):  # issue 16, case 11: beyond the catalog's 64 bits too
        with pytest.raises(TxnError):
            coerce_csn(bad)
    assert coerce_csn(str(2**63 - 1)) == 2**63 - 1
    assert coerce_tables("['a.b', 'c.d']") == ["a.b", "c.d"] == coerce_tables("a.b, c.d")
    assert coerce_tables(["a.b", "c.d"]) == ["a.b", "c.d"]
    assert coerce_tables(None) == []
    with pytest.raises(TxnError):
        coerce_tables([1])


def test_callable_gets_only_the_keywords_it_names() -> None:
    def named(spark: Any, txn: Any, day: str) -> tuple[Any, Any, str]:
        return spark, txn, day

    def anything(spark: Any, txn: Any, **kwargs: Any) -> dict[str, Any]:
        return kwargs

    assert call_with_context(named, ["s", "t"], {"day": "d", "ti": object()}) == ("s", "t", "d")
    assert call_with_context(anything, ["s", "t"], {"day": "d", "x": 1}) == {"day": "d", "x": 1}


def test_transaction_group_needs_its_with_block() -> None:
    from airflow.sdk import DAG

    from airflow_txn.airflow import transaction_group

    with DAG("group_probe", schedule=None, start_date=dt.datetime(2024, 1, 1)):
        group = transaction_group("empty")
        with pytest.raises(RuntimeError, match="context manager"):
            _ = group.tid
        with group as txn:
            pass
    assert txn.begin is not None and txn.commit is not None
    assert txn.commit.upstream_task_ids == {"empty.begin"}  # an empty body: begin -> commit
    assert txn.outcome is not None and [t.task_id for t in txn.leaves] == ["empty.outcome"]


def test_a_bad_isolation_fails_when_the_dag_is_parsed() -> None:
    """issue 17, item 2: the operator's and the group's isolation go through Isolation.parse."""
    from airflow.sdk import DAG

    from airflow_txn.airflow import BeginTransactionOperator, transaction_group

    with DAG("isolation_probe", schedule=None, start_date=dt.datetime(2024, 1, 1)):
        with pytest.raises(InvalidArgumentError, match="isolation must be one of 'snapshot', 'serializable'"):
            BeginTransactionOperator(task_id="bad", isolation="SERIALIZABLE")
        with pytest.raises(InvalidArgumentError, match="got 'chaos'"):
            transaction_group("bad_group", isolation="chaos")
        begin = BeginTransactionOperator(task_id="good", isolation=Isolation.SERIALIZABLE)
    assert begin.isolation == "serializable" and type(begin.isolation) is str  # serialized as before


def test_parsing_the_example_dags_loads_no_spark(parse_warehouse: None) -> None:
    """A DAG processor imports the DAG files: that must not start, or even import, PySpark. (Their table Assets
    read the id of the warehouse parse_warehouse creates: run alone, the test found none.)"""
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[2]
    code = ("import runpy, sys\n"
            f"for f in ['{repo}/dags/multi_table_backfill.py', '{repo}/dags/multi_table_reader.py']:\n"
            "    runpy.run_path(f)\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'py4j')))\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=repo, capture_output=True, text=True, timeout=120,
                            check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == "[]"
