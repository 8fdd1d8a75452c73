"""The airflow_txn connection's links to other connections (issue 29, item 5): `catalog_conn_id` (a postgres or
sqlite connection the catalog URL is built from) and `aws_conn_id` (an Amazon connection the S3 credentials,
endpoint and region come from, refreshed as botocore refreshes them), against a real SeaweedFS S3 server with
the credentials given only through the `aws` connection; one Warehouse per configuration per process; a
missing driver or provider is a typed error naming the extra to install."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pytest

from airflow_txn import Warehouse
from airflow_txn.errors import ConnectionNotFoundError, StorageError, TxnError

if TYPE_CHECKING:
    from tests.harness.seaweedfs import S3Server

pytestmark = pytest.mark.airflow

REPO = Path(__file__).resolve().parents[2]
ROWS = pa.table({"id": pa.array([1, 2, 3], pa.int64())})
AWS_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL",
                 "AWS_ENDPOINT_URL_S3", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE",
                 "AIRFLOW_TXN_STORAGE_OPTIONS")


def set_conn(monkeypatch: pytest.MonkeyPatch, conn_id: str, **fields: Any) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(fields))


def test_catalog_conn_id_builds_the_url_from_a_postgres_or_sqlite_connection(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from airflow_txn.airflow.hooks.txn import TxnHook

    set_conn(monkeypatch, "pg_catalog", conn_type="postgres", host="db.example", port=5433, schema="warehouse",
             login="txn", password="s3cr:t@", extra={"sslmode": "require", "cursor": "dictcursor"})
    set_conn(monkeypatch, "wh_pg", conn_type="airflow_txn", extra={"catalog_conn_id": "pg_catalog",
                                                                  "root": str(tmp_path / "root")})
    url = TxnHook(conn_id="wh_pg").config().catalog_url
    assert url == "postgresql+psycopg://txn:s3cr%3At%40@db.example:5433/warehouse?sslmode=require"

    set_conn(monkeypatch, "lite_catalog", conn_type="sqlite", host=str(tmp_path / "c.db"))
    set_conn(monkeypatch, "wh_lite", conn_type="airflow_txn", extra={"catalog_conn_id": "lite_catalog",
                                                                    "root": str(tmp_path / "root")})
    hook = TxnHook(conn_id="wh_lite")
    assert hook.config().catalog_url == f"sqlite:///{tmp_path / 'c.db'}"
    hook.get_conn().init()
    assert hook.test_connection() == (True, "warehouse reachable, readable CSN 1")

    for extra, message in (
            ({"catalog_conn_id": "nowhere"}, "catalog_conn_id names connection 'nowhere', which is not defined"),
            ({"catalog_conn_id": "lite_catalog", "catalog": "sqlite:////x.db"}, "both catalog and catalog_conn_id"),
    ):
        set_conn(monkeypatch, "wh_bad", conn_type="airflow_txn", extra=extra)
        with pytest.raises(TxnError, match=message):
            TxnHook(conn_id="wh_bad").config()
    set_conn(monkeypatch, "wh_pw", conn_type="airflow_txn", password="x", extra={"catalog_conn_id": "pg_catalog"})
    with pytest.raises(TxnError, match="the catalog's password is that connection's"):
        TxnHook(conn_id="wh_pw").config()
    set_conn(monkeypatch, "http_catalog", conn_type="http", host="example.com")
    set_conn(monkeypatch, "wh_http", conn_type="airflow_txn", extra={"catalog_conn_id": "http_catalog"})
    with pytest.raises(TxnError, match=r"of type 'http'; a catalog connection is one of \['postgres', 'sqlite'\]"):
        TxnHook(conn_id="wh_http").config()


def test_one_warehouse_per_configuration_per_process_shared_by_threads(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from airflow_txn.airflow.hooks.txn import TxnHook, close_warehouses

    extra = {"catalog": f"sqlite:///{tmp_path / 'c.db'}", "root": str(tmp_path / "root")}
    set_conn(monkeypatch, "one", conn_type="airflow_txn", extra=extra)
    set_conn(monkeypatch, "same_place", conn_type="airflow_txn", extra=extra)
    set_conn(monkeypatch, "elsewhere", conn_type="airflow_txn", extra={**extra, "root": str(tmp_path / "other")})
    got: list[Warehouse] = []
    threads = [threading.Thread(target=lambda: got.append(TxnHook(conn_id="one").get_conn())) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(wh) for wh in got}) == 1
    [wh] = set(got)
    with TxnHook(conn_id="same_place").warehouse() as again:  # another connection, the same configuration
        assert again is wh
        again.init()
    assert TxnHook(conn_id="elsewhere").get_conn() is not wh
    assert wh.readable_csn() == 1  # leaving warehouse() closed nothing
    close_warehouses()
    assert TxnHook(conn_id="one").get_conn() is not wh


@pytest.fixture
def aws_only(s3_server: S3Server, s3_bucket: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    """An `aws` connection `txn_s3` holding the server's credentials, endpoint and region, and nothing of them
    anywhere else (no AWS_* variable, no ~/.aws file): returns a fresh s3:// root."""
    import uuid

    from airflow_txn.airflow.hooks import aws

    for name in AWS_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    set_conn(monkeypatch, "txn_s3", conn_type="aws", login=s3_server.access_key, password=s3_server.secret_key,
             extra={"endpoint_url": s3_server.endpoint, "region_name": "us-east-1"})
    monkeypatch.setattr(aws, "_CREDENTIALS", {})  # resolved once per process: this test's connection
    return f"s3://{s3_bucket}/t_{uuid.uuid4().hex[:12]}"


@pytest.mark.s3
def test_aws_conn_id_reaches_an_s3_root_with_the_aws_connections_credentials_only(
        aws_only: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from airflow_txn.airflow.hooks.txn import TxnHook

    set_conn(monkeypatch, "wh_s3", conn_type="airflow_txn", extra={
        "catalog": f"sqlite:///{tmp_path / 'c.db'}", "root": aws_only, "aws_conn_id": "txn_s3"})
    hook = TxnHook(conn_id="wh_s3")
    options = hook.config().storage_options
    assert options["endpoint_url"].startswith("http://127.0.0.1:") and options["region"] == "us-east-1"
    assert "airflow-txn-test-secret" not in repr(hook.config())  # never shown
    wh = hook.get_conn()
    wh.create_table("shop.orders", ROWS.schema)
    with wh.begin() as txn:
        txn.append("shop.orders", ROWS)
    assert wh.read("shop.orders").sort_by("id").equals(ROWS)
    assert hook.test_connection()[0]

    # without the aws connection the same root is unreachable: the credentials came from it alone
    set_conn(monkeypatch, "wh_plain", conn_type="airflow_txn", extra={
        "catalog": f"sqlite:///{tmp_path / 'c.db'}", "root": aws_only,
        "storage_options": {"endpoint_url": options["endpoint_url"], "region": "us-east-1"}})
    with pytest.raises(StorageError, match=r"ACCESS_DENIED|credentials"):
        TxnHook(conn_id="wh_plain").get_conn().read("shop.orders")

    for extra, error in (
            ({"root": str(tmp_path / "local"), "aws_conn_id": "txn_s3"}, "is not an s3:// root"),
            ({"root": aws_only, "aws_conn_id": "txn_s3", "storage_options": {"access_key_id": "a",
                                                                           "secret_access_key": "b"}},
             r"also \['access_key_id', 'secret_access_key'\] in storage_options"),
    ):
        set_conn(monkeypatch, "wh_bad", conn_type="airflow_txn", extra={"catalog": "sqlite:////x.db", **extra})
        with pytest.raises(TxnError, match=error):
            TxnHook(conn_id="wh_bad").config()
    set_conn(monkeypatch, "wh_nowhere", conn_type="airflow_txn", extra={"root": aws_only, "aws_conn_id": "nope"})
    with pytest.raises(ConnectionNotFoundError, match="aws_conn_id names connection 'nope'") as caught:
        TxnHook(conn_id="wh_nowhere").config()
    assert caught.value.conn_id == "nope"


@pytest.mark.s3
def test_refreshing_credentials_rebuild_the_filesystem_and_the_warehouse_keeps_working(
        aws_only: str, s3_server: S3Server, tmp_path: Path) -> None:
    """botocore's RefreshableCredentials (what a role, web identity or SSO gives) renew themselves when read
    within 10 minutes of expiry; the filesystem takes each new value before its next request."""
    from botocore.credentials import RefreshableCredentials

    from airflow_txn.airflow.hooks import aws
    from airflow_txn.airflow.hooks.txn import open_warehouse
    from airflow_txn.core.config import WarehouseConfig
    from tests.harness.seaweedfs import ROTATED_KEY

    keys = [(s3_server.access_key, s3_server.secret_key), ROTATED_KEY]  # two keys of one identity, in turn
    issued: list[str] = []

    def renew() -> dict[str, str]:
        key, secret = keys[len(issued) % 2]
        issued.append(key)
        soon = dt.datetime.now(dt.UTC) + dt.timedelta(minutes=5)  # inside botocore's mandatory refresh window
        return {"access_key": key, "secret_key": secret, "token": "", "expiry_time": soon.isoformat()}

    creds = aws.AwsCredentials("renewing", RefreshableCredentials.create_from_metadata(
        renew(), refresh_using=renew, method="test"), s3_server.endpoint, "us-east-1")
    config = WarehouseConfig.resolve(f"sqlite:///{tmp_path / 'c.db'}", aws_only,
                                     storage_options=creds.storage_options({}))
    aws._CREDENTIALS["renewing"] = creds
    with open_warehouse(config, "renewing") as wh:
        wh.create_table("shop.orders", ROWS.schema)
        for _ in range(2):
            with wh.begin() as txn:
                txn.append("shop.orders", ROWS)
        assert wh.read("shop.orders").num_rows == 6
        rebuilds = wh.runtime.storage.fs.handler.rebuilds
    assert len(issued) >= 3  # botocore renewed them as they were read
    assert rebuilds >= 2  # each renewal reached the filesystem: a new S3FileSystem with the new value


MISSING = """
import sys
sys.modules[sys.argv[1]] = None  # as if not installed
import json, os
from airflow_txn.airflow.hooks.txn import TxnHook
try:
    TxnHook(conn_id="wh").get_conn()
except Exception as exc:
    print("RESULT " + json.dumps([type(exc).__name__, str(exc)]))
"""


@pytest.mark.parametrize(("module", "extra", "message"), [
    ("psycopg", {"catalog": "postgresql+psycopg://u@127.0.0.1:1/db", "root": "/tmp/x"},
     "needs the database driver 'psycopg', which is not installed: pip install 'airflow-txn[postgres]'"),
    ("airflow.providers.amazon.aws.hooks.base_aws",
     {"catalog": "sqlite:////tmp/x.db", "root": "s3://b/p", "aws_conn_id": "a"},
     "needs Airflow's Amazon provider, which is not installed: pip install 'airflow-txn[amazon]'"),
], ids=["psycopg", "amazon"])
def test_a_missing_driver_or_provider_names_the_extra_to_install(
        module: str, extra: dict[str, str], message: str, tmp_path: Path) -> None:
    import os

    env = {**os.environ, "AIRFLOW_CONN_WH": json.dumps({"conn_type": "airflow_txn", "extra": extra}),
           "AIRFLOW_CONN_A": json.dumps({"conn_type": "aws"})}
    result = subprocess.run([sys.executable, "-c", MISSING, module], cwd=REPO, env=env, capture_output=True,
                            text=True, timeout=120, check=False)
    [line] = [x for x in result.stdout.splitlines() if x.startswith("RESULT ")] or [result.stderr[-2000:]]
    kind, text = json.loads(line.removeprefix("RESULT "))
    assert kind == "MissingDependencyError" and message in text, text


def test_a_missing_connection_is_said_in_the_log_where_the_defaults_apply(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A task or trigger whose connection is not defined (a typo in its id) takes the warehouse of the
    `[airflow_txn]` options and AIRFLOW_TXN_* variables (the public contract), and says so as a WARNING naming
    the connection and the catalog, so the typo shows in the task's or the triggerer's log; a DAG file being
    parsed refuses instead (test_parsing.py)."""
    import asyncio

    from airflow_txn.airflow.hooks.txn import TxnHook

    catalog = f"sqlite:///{tmp_path / 'named.db'}"
    monkeypatch.setenv("AIRFLOW_TXN_CATALOG", catalog)
    capsys.readouterr()
    assert TxnHook(conn_id="no_such_conn").config().catalog_url == catalog
    assert asyncio.run(TxnHook(conn_id="no_such_conn").aconfig()).catalog_url == catalog
    logged = capsys.readouterr().out.splitlines()  # Airflow's structlog writes to stdout
    warned = [line for line in logged if "warning" in line and "'no_such_conn' is not defined" in line]
    assert len(warned) == 2 and all("named.db" in line for line in warned), logged
