"""SparkTransactionOperator attached to a running Spark Connect server (no JVM in the task's process): the
example backfill DAG with the warehouse root on a real S3 server (SeaweedFS), through dag.test(); and how the
Spark provider's connections become Spark settings; and a dead or hung server fails the session (and the
Spark tasks) within `connect_timeout` with SparkConnectUnavailableError naming it, not after pyspark's ten minutes
of retries (refused and silent loopback ports; the pytest timeouts guard the bound, nothing measures time)."""

from __future__ import annotations

import contextlib
import json
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from airflow_txn import Warehouse
from airflow_txn.catalog.txn_records import COMMITTED
from tests.airflow.helpers import BACKFILL_TABLES, counts, run_dag, task_states, transactions_of
from tests.airflow.test_backfill import expected
from tests.helpers import SPARK_TEST_JVM, storage_files

if TYPE_CHECKING:
    from tests.harness.seaweedfs import S3Server

pytestmark = pytest.mark.airflow


@pytest.fixture(scope="session")
def connect_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from tests.harness.spark_connect import SparkConnectUnavailable, server

    try:
        with server(tmp_path_factory.mktemp("spark-connect"), conf=SPARK_TEST_JVM) as connect:
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
        connect_url: str, wh: Warehouse, catalog_url: str, root: Path | str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A new server session starts the server's Python workers again (about 6 s before a task's first data-source
    write): a transaction's tasks attach to ONE session, and a task leaves it open when it ends."""
    from airflow_txn.airflow.operators.spark import spark_session
    from airflow_txn.airflow.utils.connect_sessions import leave_open

    monkeypatch.setenv("SPARK_CONNECT_MODE_ENABLED", "1")
    txn = wh.begin()
    first = spark_session({}, remote=connect_url, txn=txn)
    first.createDataFrame([(1,)], "id long").createOrReplaceTempView("left_by_the_first_task")
    session_id = first.session_id
    leave_open(first)
    with Warehouse.open(catalog=catalog_url, root=root) as elsewhere:  # the next task, in another process
        second = spark_session({}, remote=connect_url, txn=elsewhere.attach(txn.tid))
    assert second.session_id == session_id
    assert second.table("left_by_the_first_task").count() == 1  # the server kept the session
    second.stop()  # releases it on the server, as an idle timeout would
    third = spark_session({}, remote=connect_url, txn=txn)  # the closed session is replaced, not an error
    assert third.session_id != session_id and third.range(3).count() == 3
    leave_open(third)
    fourth = spark_session({}, remote=connect_url, txn=txn)  # ... and the replacement kept for the next task
    assert fourth.session_id == third.session_id
    leave_open(fourth)
    other = spark_session({}, remote=connect_url, txn=wh.begin())
    assert other.session_id not in (session_id, third.session_id)
    leave_open(other)


@pytest.mark.parametrize(("url", "expected"), [
    ("sc://h:15002", "sc://h:15002/;session_id=S"),
    ("sc://h:15002/;user_id=etl;use_ssl=true", "sc://h:15002/;user_id=etl;use_ssl=true;session_id=S"),
    ("sc://h:15002/;session_id=mine", "sc://h:15002/;session_id=mine"),  # the user's own id is kept
])
def test_a_connect_url_gets_the_transaction_s_session_id(url: str, expected: str) -> None:
    from airflow_txn.airflow.utils.connect_sessions import with_session_id

    assert with_session_id(url, "S") == expected


def test_a_transaction_s_session_id_is_random_and_kept_with_it(wh: Warehouse, catalog_url: str,
                                                                root: Path | str) -> None:
    """Issue 30, item 7: the id was uuid5(server, tid), and tids are shown everywhere: anyone knowing one could
    join the session. It is random now, kept with the transaction (first task wins), never shown."""
    from airflow_txn.airflow.utils import connect_sessions
    from airflow_txn.airflow.utils.connect_sessions import session_id_for

    txn = wh.begin()
    first = session_id_for("sc://h:15002", txn)
    old_derivation = uuid.uuid5(uuid.UUID("5d6b6f0e-4f0e-4a37-9c55-2f2b3c7f7a10"), f"sc://h:15002|{txn.tid}")
    assert first != str(old_derivation) and uuid.UUID(first).version == 4
    assert session_id_for("sc://h:15002/;user_id=etl;token=t", txn) == first  # the server's id, whatever the URL
    with Warehouse.open(catalog=catalog_url, root=root) as other:  # another task's process: the same id
        assert session_id_for("sc://h:15002", other.attach(txn.tid)) == first
    assert session_id_for("sc://other:15002", txn) != first  # one per (transaction, server)
    assert session_id_for("sc://h:15002", wh.begin()) != first
    replaced = session_id_for("sc://h:15002", txn, replacing=first)  # the server closed it: a new one, kept
    assert replaced != first and session_id_for("sc://h:15002", txn) == replaced
    assert session_id_for("sc://h:15002", txn, replacing=first) == replaced  # a second task finds it replaced
    assert first not in json.dumps(wh.transaction_info(txn.tid), default=str)
    assert replaced not in json.dumps(wh.transactions(), default=str)
    # a bare tid: a random id of this process only (another process knowing the tid gets another)
    bare = session_id_for("sc://h:15002", "1-1-a")
    assert session_id_for("sc://h:15002", "1-1-a") == bare
    connect_sessions._PROCESS_SESSIONS.clear()  # as in a new process
    assert session_id_for("sc://h:15002", "1-1-a") != bare
    txn.commit()
    assert session_id_for("sc://h:15002", txn) not in (first, replaced)  # an ended transaction keeps nothing


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


RETRIES_EXCEEDED = "ignore:.*RETRIES_EXCEEDED:UserWarning"
"""pyspark's client warns when it gives up retrying (a warning is an error in this suite)."""


@pytest.fixture(params=["refused", "silent"])
def dead_connect_port(request: pytest.FixtureRequest) -> Iterator[int]:
    """A loopback port whose Spark Connect server is gone or hung (tests/harness/ports.py)."""
    from tests.harness.ports import dead_port

    with dead_port(request.param) as port:
        yield port


@pytest.mark.timeout(90)
@pytest.mark.filterwarnings(RETRIES_EXCEEDED)
@pytest.mark.parametrize("tid", [None, "1-1-a"])
def test_an_unreachable_spark_connect_server_fails_the_session_within_the_bound_naming_it(
        dead_connect_port: int, tid: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """pyspark's own client retries an unreachable server for about ten minutes; the task's session gives up
    after connect_timeout with a typed error naming the server, never the URL's token."""
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    from airflow_txn.airflow.operators.spark import task_spark_session
    from airflow_txn.errors import SparkConnectUnavailableError

    monkeypatch.setenv("SPARK_CONNECT_MODE_ENABLED", "1")
    url = f"sc://127.0.0.1:{dead_connect_port}/;user_id=etl;token=s3cr3t-t0ken"
    says = rf"server sc://127\.0\.0\.1:{dead_connect_port} did not answer within connect_timeout \(4 s\)"
    with (pytest.raises(SparkConnectUnavailableError, match=says) as info,
          task_spark_session({}, "dag.task", remote=url, tid=tid, connect_timeout=4)):
        pytest.fail("no session on a dead server")
    assert "s3cr3t-t0ken" not in str(info.value)
    assert ConnectSession.getActiveSession() is None  # forgotten: the next task's session connects anew


@pytest.mark.timeout(90)
@pytest.mark.filterwarnings(RETRIES_EXCEEDED)
def test_the_default_bound_applies_to_spark_connect_without_a_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_txn.airflow.operators.spark import spark_session
    from airflow_txn.core.config import ENV_CONNECT_TIMEOUT
    from airflow_txn.errors import SparkConnectUnavailableError
    from tests.harness.ports import free_port

    monkeypatch.setenv("SPARK_CONNECT_MODE_ENABLED", "1")
    monkeypatch.delenv(ENV_CONNECT_TIMEOUT, raising=False)
    port = free_port()
    with pytest.raises(SparkConnectUnavailableError, match=rf"sc://127\.0\.0\.1:{port} .*\(20 s\)"):
        spark_session({}, remote=f"sc://127.0.0.1:{port}")


def test_connect_timeout_comes_from_the_connection_extra_then_the_airflow_config(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_txn.airflow.hooks.txn import config_from_extra
    from airflow_txn.core.config import DEFAULT_CONNECT_TIMEOUT, ENV_CONNECT_TIMEOUT
    from airflow_txn.errors import InvalidArgumentError

    monkeypatch.delenv(ENV_CONNECT_TIMEOUT, raising=False)
    monkeypatch.delenv("AIRFLOW__AIRFLOW_TXN__CONNECT_TIMEOUT", raising=False)
    assert config_from_extra({}).connect_timeout == DEFAULT_CONNECT_TIMEOUT
    monkeypatch.setenv("AIRFLOW__AIRFLOW_TXN__CONNECT_TIMEOUT", "12")
    assert config_from_extra({}).connect_timeout == 12
    assert config_from_extra({"connect_timeout": 5}).connect_timeout == 5
    with pytest.raises(InvalidArgumentError, match="connect_timeout must be a number of seconds > 0"):
        config_from_extra({"connect_timeout": 0})
    with pytest.raises(InvalidArgumentError, match="connect_timeout must be a number of seconds"):
        config_from_extra({"connect_timeout": "later"})


@pytest.mark.timeout(300)
@pytest.mark.filterwarnings(RETRIES_EXCEEDED)
def test_a_dead_spark_connect_server_fails_the_spark_tasks_within_the_connection_s_bound(
        dagbag: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The operators take `connect_timeout` from the airflow_txn connection: the Spark tasks fail (and retry)
    within it, the run fails and its transaction is rolled back."""
    from airflow_txn.catalog.txn_records import ROLLED_BACK
    from tests.harness.ports import free_port

    port = free_port()
    catalog, root = f"sqlite:///{tmp_path / 'catalog.db'}", tmp_path / "wh"
    monkeypatch.setenv("AIRFLOW_CONN_AIRFLOW_TXN_DEFAULT", json.dumps({"conn_type": "airflow_txn", "extra": {
        "catalog": catalog, "root": str(root), "connect_timeout": 3,
        "spark_conf": {"spark.remote": f"sc://127.0.0.1:{port}/;token=s3cr3t-t0ken"}}}))
    monkeypatch.setenv("SPARK_CONNECT_MODE_ENABLED", "1")
    run = run_dag(dagbag, "multi_table_backfill", {"start": "2024-03-01", "days": 1})
    states = task_states(run)
    assert str(run.state) == "failed", states
    loads = {task: state for task, state in states.items() if ".load_" in task}
    assert loads and all(state[0] == "failed" for state in loads.values()), states
    assert max(tries for _state, tries in loads.values()) == 2, states  # failed fast, then retried (and failed)
    with Warehouse.open(catalog=catalog, root=root) as wh:
        [txn] = transactions_of(wh, "multi_table_backfill")
    assert txn["state"] == ROLLED_BACK and "failed with no retries left" in txn["failed_reason"]


@pytest.mark.timeout(300)
@pytest.mark.filterwarnings(RETRIES_EXCEEDED)
def test_a_server_lost_during_the_task_fails_it_with_the_typed_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A server stopped while the task works: its next call fails within connect_timeout, typed and naming the
    server, and the session is forgotten without waiting on the dead server to release it."""
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    from airflow_txn.airflow.operators.spark import task_spark_session
    from airflow_txn.errors import SparkConnectUnavailableError
    from tests.harness.spark_connect import SparkConnectUnavailable, server

    monkeypatch.setenv("SPARK_CONNECT_MODE_ENABLED", "1")
    running = contextlib.ExitStack()
    try:
        connect = running.enter_context(server(tmp_path / "stopped-mid-task", conf=SPARK_TEST_JVM))
    except SparkConnectUnavailable as exc:
        pytest.fail(f"the Spark Connect server cannot start: {exc}")
    with running, pytest.raises(SparkConnectUnavailableError, match=f"server {connect.url} did not answer"), \
            task_spark_session({}, "dag.task", remote=connect.url, connect_timeout=5) as spark:
        assert spark.range(3).count() == 3
        running.close()  # the server stops
        _wait_until_closed(connect.url)
        spark.range(4).count()
    assert ConnectSession.getActiveSession() is None


def _wait_until_closed(url: str) -> None:
    """Until nothing listens at the server's port any more (stop-connect-server.sh returns while it exits)."""
    host, _, port = url.removeprefix("sc://").partition(":")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            socket.create_connection((host, int(port)), timeout=1).close()
        except OSError:
            return
        time.sleep(0.1)  # polling a condition
    pytest.fail(f"the Spark Connect server at {url} still listens")
