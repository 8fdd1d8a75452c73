"""WarehouseConfig.resolve: explicit arguments, then AIRFLOW_TXN_* variables, then the embedded defaults under
AIRFLOW_TXN_HOME; the catalog and the storage root of the defaults always name the same, absolute home."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_txn import Warehouse
from airflow_txn.core.config import ENV_CATALOG, ENV_HOME, ENV_MANIFESTS, ENV_ORACLE, ENV_ROOT, WarehouseConfig
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
    assert config.root == tmp_path / "demo-home" / "warehouse"


def test_a_home_under_the_user_directory_is_expanded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv(ENV_HOME, "~/txn")
    config = WarehouseConfig.resolve()
    assert config.catalog_url == f"sqlite:///{tmp_path / 'txn' / 'catalog.db'}"
    assert config.root == tmp_path / "txn" / "warehouse"


def test_without_a_home_the_defaults_live_under_the_user_directory(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    config = WarehouseConfig.resolve()
    assert config.catalog_url == f"sqlite:///{tmp_path / '.airflow_txn' / 'catalog.db'}"
    assert config.root == tmp_path / ".airflow_txn" / "warehouse"
    assert (config.oracle, config.manifests) == ("sql", "off")


def test_arguments_win_over_variables_and_variables_over_the_home(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_HOME, str(tmp_path / "home"))
    monkeypatch.setenv(ENV_CATALOG, "sqlite:////from/env.db")
    monkeypatch.setenv(ENV_ROOT, str(tmp_path / "env-root"))
    from_env = WarehouseConfig.resolve()
    assert (from_env.catalog_url, from_env.root) == ("sqlite:////from/env.db", tmp_path / "env-root")
    given = WarehouseConfig.resolve(catalog="sqlite:////given.db", root=tmp_path / "given", oracle="sql")
    assert (given.catalog_url, given.root) == ("sqlite:////given.db", tmp_path / "given")


@pytest.mark.parametrize(("kwargs", "says"), [
    ({"oracle": "etcd://x"}, "unknown oracle 'etcd://x'"),
    ({"catalog": "/tmp/catalog.db"}, "is not a SQLAlchemy URL"),
    ({"manifests": "always"}, "manifests must be one of"),
])
def test_bad_settings_are_refused_with_what_to_use(kwargs: dict[str, str], says: str) -> None:
    with pytest.raises(TxnError, match=says):
        WarehouseConfig.resolve(**kwargs)


@pytest.mark.parametrize("root", ["s3://bucket/wh", "gs://bucket/wh", "abfs://container@account/wh",
                                  "hdfs://namenode:8020/wh", "S3://bucket/wh"])
def test_an_object_store_root_is_refused_not_taken_as_a_relative_path(
        root: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`root="s3://bucket/wh"` used to become the LOCAL directory ./s3:/bucket/wh, silently. A scheme this
    release cannot store to is an error naming it, before a catalog or a directory is created."""
    monkeypatch.chdir(tmp_path)
    catalog = f"sqlite:///{tmp_path / 'catalog.db'}"
    with pytest.raises(InvalidArgumentError, match=r"storage root .*://.* scheme") as raised:
        WarehouseConfig.resolve(catalog=catalog, root=root)
    assert root.split("://")[0] in str(raised.value)
    monkeypatch.setenv(ENV_ROOT, root)
    with pytest.raises(InvalidArgumentError):
        Warehouse.open(catalog=catalog)
    assert list(tmp_path.iterdir()) == []  # no catalog file, no s3: directory


def test_a_file_uri_root_is_the_local_path(tmp_path: Path) -> None:
    config = WarehouseConfig.resolve(catalog="sqlite://", root=f"file://{tmp_path}/wh%20data")
    assert config.root == tmp_path / "wh data"
    with pytest.raises(InvalidArgumentError, match="file://"):
        WarehouseConfig.resolve(catalog="sqlite://", root="file://otherhost/wh")
