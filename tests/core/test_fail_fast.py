"""A catalog server or object store that does not answer fails the call within the configured `connect_timeout`
with a typed error naming its address (never a password or a secret), instead of the drivers' own minutes.

Two kinds of dead server, both real sockets: a loopback port nothing listens on (refused at once), and one that
accepts connections but never answers (a hung server: only a timeout ends the wait). The pytest timeout of each
test is the guard that the wait is bounded; nothing here measures time.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_txn import Warehouse
from airflow_txn.catalog import Catalog
from airflow_txn.catalog.database import libpq_timeouts
from airflow_txn.core.config import DEFAULT_CONNECT_TIMEOUT, ENV_CONNECT_TIMEOUT, WarehouseConfig
from airflow_txn.errors import CatalogUnavailableError, InvalidArgumentError, StorageError
from airflow_txn.storage.roots import open_storage
from tests.harness import ports
from tests.harness.ports import free_port

SECRET = "s3cr3t-Pa55"


@pytest.fixture(params=["refused", "silent"])
def dead_port(request: pytest.FixtureRequest) -> Iterator[int]:
    """A loopback port whose server is gone or hung (tests/harness/ports.py)."""
    with ports.dead_port(request.param) as port:
        yield port


@pytest.mark.timeout(90)
def test_an_unreachable_postgresql_catalog_fails_within_the_bound_naming_it_without_the_password(
        dead_port: int, tmp_path: Path) -> None:
    url = f"postgresql+psycopg://airflow_txn:{SECRET}@127.0.0.1:{dead_port}/catalog"
    catalog = Catalog(url, connect_timeout=4)
    try:
        with pytest.raises(CatalogUnavailableError, match=rf"127\.0\.0\.1:{dead_port}/catalog") as info:
            catalog.exists()
    finally:
        catalog.dispose()
    assert SECRET not in str(info.value) and "***" in str(info.value)
    with pytest.raises(CatalogUnavailableError, match=rf"127\.0\.0\.1:{dead_port}") as info:
        Warehouse.open(catalog=url, root=tmp_path / "wh", connect_timeout=4)  # opening probes the catalog
    assert SECRET not in str(info.value)


@pytest.mark.timeout(90)
def test_the_default_bound_applies_without_a_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_CONNECT_TIMEOUT, raising=False)
    port = free_port()
    catalog = Catalog(f"postgresql+psycopg://u:{SECRET}@127.0.0.1:{port}/c")
    assert catalog.connect_timeout == DEFAULT_CONNECT_TIMEOUT
    with pytest.raises(CatalogUnavailableError, match=f"127.0.0.1:{port}"):
        catalog.exists()
    catalog.dispose()


def test_the_bound_comes_from_the_argument_then_the_environment_then_the_default(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(ENV_CONNECT_TIMEOUT, raising=False)
    where = {"catalog": f"sqlite:///{tmp_path / 'c.db'}", "root": tmp_path / "wh"}
    assert WarehouseConfig.resolve(**where).connect_timeout == DEFAULT_CONNECT_TIMEOUT < 60
    monkeypatch.setenv(ENV_CONNECT_TIMEOUT, "7.5")
    assert WarehouseConfig.resolve(**where).connect_timeout == 7.5
    assert Catalog(where["catalog"]).connect_timeout == 7.5
    assert WarehouseConfig.resolve(**where, connect_timeout=3).connect_timeout == 3
    for bad in ("soon", "0", "-1", "nan", "inf", "3601"):
        with pytest.raises(InvalidArgumentError, match="connect_timeout must be a number of seconds"):
            WarehouseConfig.resolve(**where, connect_timeout=bad)
    monkeypatch.setenv(ENV_CONNECT_TIMEOUT, "never")
    with pytest.raises(InvalidArgumentError, match=rf"\${ENV_CONNECT_TIMEOUT} must be a number of seconds"):
        WarehouseConfig.resolve(**where)


def test_the_catalog_url_s_own_libpq_timeouts_win() -> None:
    assert libpq_timeouts("postgresql+psycopg://u@h/c", 20)["connect_timeout"] == 10  # half: a second attempt fits
    mine = libpq_timeouts("postgresql+psycopg://u@h/c?connect_timeout=3&tcp_user_timeout=500", 20)
    assert "connect_timeout" not in mine and "tcp_user_timeout" not in mine and mine["keepalives_idle"] == 10
    assert libpq_timeouts("sqlite:///c.db", 20) == {} == libpq_timeouts("postgresql+pg8000://u@h/c", 20)


@pytest.mark.s3
@pytest.mark.timeout(90)
def test_an_unreachable_object_store_fails_within_the_bound_naming_its_endpoint_never_the_secret(
        dead_port: int, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    endpoint = f"http://127.0.0.1:{dead_port}"
    options = {"endpoint_url": endpoint, "region": "us-east-1", "access_key_id": "key", "secret_access_key": SECRET}
    config = WarehouseConfig.resolve(catalog=f"sqlite:///{tmp_path / 'c.db'}", root="s3://bucket/wh",
                                     storage_options=options, connect_timeout=3)
    with pytest.raises(StorageError, match=rf"s3://bucket/wh.*endpoint {endpoint}.*not reachable") as info:
        open_storage(config.location()).ensure()
    assert SECRET not in str(info.value)
    wh = Warehouse.open(catalog=f"sqlite:///{tmp_path / 'c.db'}", root="s3://bucket/wh", storage_options=options,
                        connect_timeout=3)
    with wh, pytest.raises(StorageError, match=f"endpoint {endpoint}"):
        wh.init()  # the first write checks the root, before it creates the catalog
    assert not (tmp_path / "c.db").exists()
