"""A warehouse whose storage root is on a real S3-compatible server (SeaweedFS): where its settings come from,
what a missing bucket or a wrong secret does (a clear error, nothing created, no secret shown), what
`airflow-txn doctor` checks, and the objects one transaction leaves (one per part, nothing else)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from pyarrow import fs as pafs

from airflow_txn import Warehouse
from airflow_txn.cli.doctor import run as doctor
from airflow_txn.core.ownership import MARKER
from airflow_txn.errors import StorageError
from tests.harness.seaweedfs import S3Server
from tests.helpers import accounts, events, ids, make_tables

pytestmark = pytest.mark.s3

AWS_VARIABLES = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                 "AWS_SESSION_TOKEN", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AIRFLOW_TXN_STORAGE_OPTIONS")


@pytest.fixture
def no_aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No AWS settings at all in the environment (nor a ~/.aws of the machine's user)."""
    for name in AWS_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def options(s3: S3Server, **changes: str) -> dict[str, str]:
    return {"endpoint_url": s3.endpoint, "region": "us-east-1", "access_key_id": s3.access_key,
            "secret_access_key": s3.secret_key, **changes}


def test_settings_from_storage_options_alone(s3_server: S3Server, s3_bucket: str, no_aws_env: None,
                                             tmp_path: Path) -> None:
    root = f"s3://{s3_bucket}/opts"
    with Warehouse.open(catalog=f"sqlite:///{tmp_path / 'c.db'}", root=root,
                        storage_options=options(s3_server)) as wh:
        make_tables(wh)
        with wh.begin() as t:
            t.append("sales.events", events([1, 2], day="2024-01-01"))
            t.append("sales.accounts", accounts({1: 10}))
        assert ids(wh.read("sales.events")) == [1, 2]
        assert repr(wh) == f"Warehouse(root='{root}', oracle='sql')"
    listed = s3_server.filesystem().get_file_info(pafs.FileSelector(f"{s3_bucket}/opts", recursive=True))
    objects = sorted(i.path for i in listed if i.type == pafs.FileType.File)
    parts = [o for o in objects if o != f"{s3_bucket}/opts/{MARKER}"]
    assert len(parts) == 2 and all(o.endswith(".parquet") for o in parts)  # one object per part, nothing else
    assert len(objects) == 3  # and the root's ownership marker


def test_the_environment_variables_alone_and_json_options_from_the_environment(
        s3_server: S3Server, s3_bucket: str, no_aws_env: None, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_TXN_STORAGE_OPTIONS", json.dumps(options(s3_server)))
    with Warehouse.open(catalog=f"sqlite:///{tmp_path / 'a.db'}", root=f"s3://{s3_bucket}/json") as wh:
        make_tables(wh)
        with wh.begin() as t:
            t.append("sales.accounts", accounts({1: 10}))
        assert wh.read("sales.accounts").num_rows == 1
    monkeypatch.delenv("AIRFLOW_TXN_STORAGE_OPTIONS")
    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    with Warehouse.open(catalog=f"sqlite:///{tmp_path / 'a.db'}", root=f"s3://{s3_bucket}/json") as wh:
        assert wh.read("sales.accounts").num_rows == 1  # the same objects, reached through AWS_* alone


def test_a_missing_bucket_is_a_clear_error_before_the_catalog_is_created(
        s3_server: S3Server, no_aws_env: None, tmp_path: Path) -> None:
    catalog = tmp_path / "c.db"
    wh = Warehouse.open(catalog=f"sqlite:///{catalog}", root="s3://no-such-bucket/wh",
                        storage_options=options(s3_server))  # opening creates and checks nothing (DESIGN D17)
    with wh, pytest.raises(StorageError, match=r"bucket 'no-such-bucket' does not exist.*create it first"):
        wh.init()  # the first write checks the root before it creates the catalog
    assert not catalog.exists()


def test_a_wrong_secret_is_refused_and_never_shown(s3_server: S3Server, s3_bucket: str, no_aws_env: None,
                                                   tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    secret = "not-the-secret-0123456789"
    with pytest.raises(StorageError) as raised:
        wh = Warehouse.open(catalog=f"sqlite:///{tmp_path / 'c.db'}", root=f"s3://{s3_bucket}/wh",
                            storage_options=options(s3_server, secret_access_key=secret))
        with wh:  # some servers only refuse at the first write
            make_tables(wh)
            with wh.begin() as t:
                t.append("sales.accounts", accounts({1: 10}))
    assert secret not in str(raised.value) and secret not in caplog.text


def test_doctor_checks_an_object_store_root(s3_server: S3Server, s3_bucket: str, no_aws_env: None,
                                            tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    catalog = f"sqlite:///{tmp_path / 'c.db'}"
    with Warehouse.open(catalog=catalog, root=f"s3://{s3_bucket}/doc", storage_options=options(s3_server)) as wh:
        wh.init()
    monkeypatch.setenv("AIRFLOW_TXN_STORAGE_OPTIONS", json.dumps(options(s3_server)))
    report = doctor(catalog, f"s3://{s3_bucket}/doc", None)
    checks = {c["name"]: c for c in report["checks"]}
    assert report["ok"], report
    assert checks["storage root"]["status"] == "ok"
    assert "credentials from storage_options" in checks["storage root"]["detail"]
    assert checks["write probe"]["status"] == "ok"
    assert s3_server.secret_key not in json.dumps(report)
    leftover = s3_server.filesystem().get_file_info(pafs.FileSelector(f"{s3_bucket}/doc"))
    assert not [i.path for i in leftover if ".airflow_txn-doctor" in i.path]  # the probe is gone

    missing = doctor(catalog, "s3://no-such-bucket/doc", None)
    checks = {c["name"]: c for c in missing["checks"]}
    assert not missing["ok"] and checks["storage root"]["status"] == "fail"
    assert "no-such-bucket" in checks["storage root"]["detail"]
