"""WarehouseConfig.resolve: explicit arguments, then AIRFLOW_TXN_* variables, then the embedded defaults under
AIRFLOW_TXN_HOME; the catalog and the storage root of the defaults always name the same, absolute home."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_txn import Warehouse
from airflow_txn.core.config import (
    ENV_CATALOG,
    ENV_HOME,
    ENV_MANIFESTS,
    ENV_ORACLE,
    ENV_ROOT,
    ENV_STORAGE_OPTIONS,
    WarehouseConfig,
)
from airflow_txn.errors import InvalidArgumentError, TxnError


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (ENV_CATALOG, ENV_ROOT, ENV_ORACLE, ENV_HOME, ENV_MANIFESTS):
        monkeypatch.delenv(name, raising=False)


def test_a_relative_home_gives_an_absolute_catalog_and_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`export AIRFLOW_TXN_HOME=.airflow_txn_demo` (the README's) must not leave a relative catalog URL behind:
    the catalog and the root are the same home, resolved once against the working directory."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(ENV_HOME, "demo-home")
    config = WarehouseConfig.resolve()
    assert config.catalog_url == f"sqlite:///{tmp_path / 'demo-home' / 'catalog.db'}"
    assert config.root == str(tmp_path / "demo-home" / "warehouse")


def test_a_home_under_the_user_directory_is_expanded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv(ENV_HOME, "~/txn")
    config = WarehouseConfig.resolve()
    assert config.catalog_url == f"sqlite:///{tmp_path / 'txn' / 'catalog.db'}"
    assert config.root == str(tmp_path / "txn" / "warehouse")


def test_without_a_home_the_defaults_live_under_the_user_directory(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    config = WarehouseConfig.resolve()
    assert config.catalog_url == f"sqlite:///{tmp_path / '.airflow_txn' / 'catalog.db'}"
    assert config.root == str(tmp_path / ".airflow_txn" / "warehouse")
    assert (config.oracle, config.manifests) == ("sql", "off")


def test_arguments_win_over_variables_and_variables_over_the_home(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_HOME, str(tmp_path / "home"))
    monkeypatch.setenv(ENV_CATALOG, "sqlite:////from/env.db")
    monkeypatch.setenv(ENV_ROOT, str(tmp_path / "env-root"))
    from_env = WarehouseConfig.resolve()
    assert (from_env.catalog_url, from_env.root) == ("sqlite:////from/env.db", str(tmp_path / "env-root"))
    given = WarehouseConfig.resolve(catalog="sqlite:////given.db", root=tmp_path / "given", oracle="sql")
    assert (given.catalog_url, given.root) == ("sqlite:////given.db", str(tmp_path / "given"))


@pytest.mark.parametrize(("kwargs", "says"), [
    ({"oracle": "etcd://x"}, "unknown oracle 'etcd://x'"),
    ({"catalog": "/tmp/catalog.db"}, "is not a SQLAlchemy URL"),
    ({"manifests": "always"}, "manifests must be one of"),
])
def test_bad_settings_are_refused_with_what_to_use(kwargs: dict[str, str], says: str) -> None:
    with pytest.raises(TxnError, match=says):
        WarehouseConfig.resolve(**kwargs)


def test_a_catalog_url_whose_port_is_no_number_is_a_typed_error_that_never_shows_its_password() -> None:
    from airflow_txn.errors import InvalidArgumentError

    with pytest.raises(InvalidArgumentError, match="not a valid SQLAlchemy URL") as raised:
        WarehouseConfig.resolve(catalog="postgresql+psycopg://user:s3cret@db:notaport/wh")
    assert "s3cret" not in str(raised.value)  # it was a bare ValueError from the port before


@pytest.mark.parametrize(("root", "kept"), [
    ("s3://bucket/wh", "s3://bucket/wh"), ("S3://bucket/wh/", "s3://bucket/wh"), ("gs://bucket/wh", "gs://bucket/wh"),
    ("abfs://container@account/wh", "abfs://container@account/wh"),
    ("hdfs://namenode:8020/wh", "hdfs://namenode:8020/wh"),
])
def test_an_object_store_root_is_a_uri_never_a_relative_path(
        root: str, kept: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`root="s3://bucket/wh"` once became the LOCAL directory ./s3:/bucket/wh, silently."""
    monkeypatch.chdir(tmp_path)
    assert WarehouseConfig.resolve(catalog="sqlite://", root=root).root == kept
    assert list(tmp_path.iterdir()) == []  # no s3: directory


@pytest.mark.parametrize(("root", "says"), [
    ("ftp://host/wh", "the ftp:// scheme is not supported"),
    ("s3a://bucket/wh", "the s3a:// scheme is not supported"),
    ("s3:///wh", "name a bucket"),
    ("s3://bucket/wh?endpoint_override=x", "settings go in storage_options"),
    ("s3://KEY:SECRET@bucket/wh", "credentials go in storage_options"),
])
def test_a_root_that_cannot_be_stored_to_is_refused_before_anything_is_created(
        root: str, says: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    catalog = f"sqlite:///{tmp_path / 'catalog.db'}"
    with pytest.raises(InvalidArgumentError, match=says) as raised:
        WarehouseConfig.resolve(catalog=catalog, root=root)
    assert "SECRET" not in str(raised.value)
    monkeypatch.setenv(ENV_ROOT, root)
    with pytest.raises(InvalidArgumentError):
        Warehouse.open(catalog=catalog)
    assert list(tmp_path.iterdir()) == []  # no catalog file, no local directory


@pytest.mark.parametrize(("options", "says"), [
    ('{"endpoint": "http://x"}', r"unknown storage option\(s\) \['endpoint'\]"),
    ("not json", "must be a JSON object"),
    ('["a"]', "must be a JSON object, got a list"),
    ('{"access_key_id": "AKIA"}', "access_key_id and secret_access_key go together"),
    ('{"endpoint_url": "ftp://x"}', "is not an http"),
    ('{"force_virtual_addressing": "maybe"}', "must be true or false"),
])
def test_bad_storage_options_are_refused_naming_the_option_never_a_secret(
        options: str, says: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_STORAGE_OPTIONS, options)
    with pytest.raises(InvalidArgumentError, match=says):
        WarehouseConfig.resolve(catalog="sqlite://", root="s3://bucket/wh").location()
    with pytest.raises(InvalidArgumentError, match="storage_options apply to an s3:// root"):
        WarehouseConfig.resolve(catalog="sqlite://", root=str(tmp_path), storage_options={"region": "x"}).location()


def test_storage_options_never_show_in_a_repr_or_a_description(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    config = WarehouseConfig.resolve(catalog="sqlite://", root="s3://bucket/wh", storage_options={
        "endpoint_url": "http://127.0.0.1:9", "access_key_id": "AKIAEXAMPLE", "secret_access_key": "TOPSECRET"})
    where = config.location()
    shown = " ".join([repr(config), repr(where), where.describe(), str(where.filesystem)])
    assert "TOPSECRET" not in shown and "AKIAEXAMPLE" not in shown
    assert "credentials from storage_options" in where.describe() and "http://127.0.0.1:9" in where.describe()
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAFROMENV")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:8")
    from_env = WarehouseConfig.resolve(catalog="sqlite://", root="s3://bucket/wh").location()
    assert "credentials from AWS_ACCESS_KEY_ID" in from_env.describe() and "127.0.0.1:8" in from_env.describe()
    assert "AKIAFROMENV" not in from_env.describe()


def test_a_file_uri_root_is_the_local_path(tmp_path: Path) -> None:
    config = WarehouseConfig.resolve(catalog="sqlite://", root=f"file://{tmp_path}/wh%20data")
    assert config.root == str(tmp_path / "wh data")
    with pytest.raises(InvalidArgumentError, match="file://"):
        WarehouseConfig.resolve(catalog="sqlite://", root="file://otherhost/wh")
