"""SparkTransactionOperator attached to a running Spark Connect server (no JVM in the task's process): the
example backfill DAG with the warehouse root on a real S3 server (SeaweedFS), through dag.test(); and how the
Spark provider's connections become Spark settings."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from airflow_txn import Warehouse
from airflow_txn.catalog.txn_records import COMMITTED
from tests.airflow.helpers import BACKFILL_TABLES, counts, run_dag, task_states, transactions_of
from tests.airflow.test_backfill import expected
from tests.helpers import storage_files

if TYPE_CHECKING:
    from tests.harness.seaweedfs import S3Server

pytestmark = pytest.mark.airflow


@pytest.fixture(scope="session")
def connect_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from tests.harness.spark_connect import SparkConnectUnavailable, server

    try:
        with server(tmp_path_factory.mktemp("spark-connect")) as connect:
            yield connect.url
    except SparkConnectUnavailable as exc:
        pytest.fail(f"the Spark Connect server cannot start: {exc}")


@pytest.mark.s3
def test_the_backfill_dag_runs_through_spark_connect_with_the_root_on_s3(
        dagbag: Any, connect_url: str, s3_server: S3Server, s3_bucket: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    options = {"endpoint_url": s3_server.endpoint, "region": "us-east-1", "access_key_id": s3_server.access_key,
               "secret_access_key": s3_server.secret_key}
    catalog, root = f"sqlite:///{tmp_path / 'catalog.db'}", f"s3://{s3_bucket}/t_{uuid.uuid4().hex[:12]}"
    monkeypatch.setenv("AIRFLOW_CONN_AIRFLOW_TXN_DEFAULT", json.dumps({"conn_type": "airflow_txn", "extra": {
        "catalog": catalog, "root": root, "storage_options": options, "spark_conf": {"spark.remote": connect_url}}}))
    monkeypatch.setenv("SPARK_CONNECT_MODE_ENABLED", "1")  # the operator sets it (as pyspark does): undone after
    for name, value in s3_server.env().items():  # this process's own looks at the bucket (storage_files)
        monkeypatch.setenv(name, value)
    run = run_dag(dagbag, "multi_table_backfill", {"start": "2024-03-01", "days": 2})
    states = task_states(run)
    assert str(run.state) == "success", states
    with Warehouse.open(catalog=catalog, root=root, storage_options=options) as wh:
        [txn] = transactions_of(wh, "multi_table_backfill")
        assert txn["state"] == COMMITTED
        assert counts(wh, txn["commit_csn"]) == expected(2)
        files = storage_files(root)
        assert files and all(Path(f).name.startswith("p-") for f in files), files  # plain objects, no write dirs
        assert {f.split("/")[1] for f in files} == {t.split(".")[1] for t in BACKFILL_TABLES}


def test_the_tasks_of_one_transaction_share_one_server_session_left_open(
        connect_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A new server session starts the server's Python workers again (about 6 s before a task's first data-source
    write): a transaction's tasks attach to ONE session, and a task leaves it open when it ends."""
    from airflow_txn.airflow.operators.spark import spark_session
    from airflow_txn.airflow.utils.connect_sessions import leave_open

    monkeypatch.setenv("SPARK_CONNECT_MODE_ENABLED", "1")
    first = spark_session({}, remote=connect_url, tid="1-1-a")
    first.createDataFrame([(1,)], "id long").createOrReplaceTempView("left_by_the_first_task")
    session_id = first.session_id
    leave_open(first)
    second = spark_session({}, remote=connect_url, tid="1-1-a")
    assert second.session_id == session_id
    assert second.table("left_by_the_first_task").count() == 1  # the server kept the session
    second.stop()  # releases it on the server, as an idle timeout would
    third = spark_session({}, remote=connect_url, tid="1-1-a")  # the closed session is replaced, not an error
    assert third.session_id != session_id and third.range(3).count() == 3
    leave_open(third)
    other = spark_session({}, remote=connect_url, tid="2-2-b")
    assert other.session_id not in (session_id, third.session_id)
    leave_open(other)


@pytest.mark.parametrize(("url", "expected"), [
    ("sc://h:15002", "sc://h:15002/;session_id=S"),
    ("sc://h:15002/;user_id=etl;use_ssl=true", "sc://h:15002/;user_id=etl;use_ssl=true;session_id=S"),
    ("sc://h:15002/;session_id=mine", "sc://h:15002/;session_id=mine"),  # the user's own id is kept
])
def test_a_connect_url_gets_the_transaction_s_session_id(url: str, expected: str) -> None:
    from airflow_txn.airflow.utils.connect_sessions import session_id_for, with_session_id

    assert with_session_id(url, "S") == expected
    assert session_id_for("sc://h:15002", "1-1-a") == session_id_for("sc://h:15002/;user_id=etl", "1-1-a")
    assert session_id_for("sc://h:15002", "1-1-a") != session_id_for("sc://h:15002", "2-2-a")


@pytest.mark.parametrize(("conn", "conf"), [
    (("spark_connect", "spark-connect.internal", 15002, None, None, {}),
     {"spark.remote": "sc://spark-connect.internal:15002"}),
    (("spark_connect", "sc://10.0.0.5", None, "etl", "s3cr3t", {"use_ssl": True}),
     {"spark.remote": "sc://10.0.0.5:15002/;user_id=etl;token=s3cr3t;use_ssl=true"}),
    (("spark_connect", "host:443", None, None, None, {}), {"spark.remote": "sc://host:443"}),
    (("spark", "spark://master", 7077, None, None, {}), {"spark.master": "spark://master:7077"}),
    (("spark", "yarn", None, None, None, {}), {"spark.master": "yarn"}),
])
def test_the_spark_providers_connections_become_spark_settings(conn: tuple[Any, ...], conf: dict[str, str]) -> None:
    from airflow_txn.airflow.operators.spark import spark_target_of

    assert spark_target_of(*conn) == conf


def test_a_connection_of_another_type_is_refused() -> None:
    from airflow_txn.airflow.operators.spark import spark_target_of

    with pytest.raises(ValueError, match="not a Spark connection"):
        spark_target_of("postgres", "db", 5432, None, None, {})
    with pytest.raises(ValueError, match="needs a host"):
        spark_target_of("spark_connect", None, None, None, None, {})
