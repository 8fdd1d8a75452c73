"""Secrets never printed (issue 30, item 5): one helper, `airflow_txn.model.secrets.mask_secrets`, masks every
form a URL or a connection string can carry a secret in, and every error that names a catalog, a storage root
or a Spark Connect server goes through it.

The error paths are real: a PostgreSQL catalog on a loopback port nothing listens on, a catalog that holds no
warehouse, a storage root that carries settings; never a mock.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_txn import Warehouse
from airflow_txn.catalog.database import safe_url
from airflow_txn.core.adapter import masked_url
from airflow_txn.core.config import WarehouseConfig
from airflow_txn.errors import CatalogUnavailableError, InvalidArgumentError, WarehouseNotFoundError
from airflow_txn.model.secrets import mask_secrets
from tests.harness.ports import free_port

SECRET = "s3cr3t-Pa55"

CARRIERS = [
    # (text holding SECRET, what must still show)
    (f"postgresql+psycopg://etl:{SECRET}@db:5432/catalog", "postgresql+psycopg://etl:***@db:5432/catalog"),
    (f"postgresql+psycopg://etl@db/catalog?password={SECRET}", "postgresql+psycopg://etl@db/catalog?password=***"),
    (f"postgresql://db/c?sslmode=require&sslpassword={SECRET}&application_name=x", "sslmode=require"),
    (f"mysql://db/c?passwd={SECRET}", "mysql://db/c?passwd=***"),
    (f"postgresql://db/c?options=-c%20search_path%3Dtxn&password={SECRET}", "options=-c%20search_path%3Dtxn"),
    (f"https://store/x?X-Amz-Security-Token={SECRET}&X-Amz-Signature={SECRET}", "https://store/x?"),
    (f"s3://bucket/wh?access_key={SECRET}&secret_access_key={SECRET}&session_token={SECRET}", "s3://bucket/wh?"),
    (f"s3://bucket/wh?secret={SECRET}&token={SECRET}&region=eu-west-1", "region=eu-west-1"),
    (f"sc://spark:15002/;user_id=etl;token={SECRET};use_ssl=true", "sc://spark:15002/;user_id=etl;token=***"),
    (f"host=db port=5432 dbname=c user=etl password={SECRET} options='-c search_path=txn'",
     "host=db port=5432 dbname=c user=etl password=*** options='-c search_path=txn'"),
    (f"host=db password='{SECRET} with spaces' user=etl", "host=db password=*** user=etl"),
    (f"host=db PASSWORD = {SECRET}", "host=db PASSWORD = ***"),
    (f'{{"endpoint_url": "http://s3", "secret_access_key": "{SECRET}"}}', '"endpoint_url": "http://s3"'),
    (f"zookeeper://etl:{SECRET}@zk1:2181,zk2:2181/txn", "zookeeper://etl:***@zk1:2181,zk2:2181/txn"),
    (f"sqlite:////tmp/c.db and then postgresql://u:{SECRET}@h/c", "sqlite:////tmp/c.db and then "),
]


@pytest.mark.parametrize(("text", "shows"), CARRIERS)
def test_every_form_of_secret_is_masked_and_the_rest_kept(text: str, shows: str) -> None:
    masked = mask_secrets(text)
    assert SECRET not in masked and "***" in masked
    assert shows in masked
    assert mask_secrets(masked) == masked  # masking twice changes nothing


def test_text_without_a_secret_is_unchanged() -> None:
    for text in ("sqlite:////tmp/wh/catalog.db", "postgresql+psycopg://etl@db:5432/c?sslmode=require",
                 "sc://spark:15002/;user_id=etl;use_ssl=true", "host=db user=etl options='-c x=y'",
                 "a token of 5 words, passwords = none"):
        assert mask_secrets(text) == text


@pytest.mark.parametrize(("text", "shows"), CARRIERS[:5])
def test_every_existing_masking_goes_through_the_helper(text: str, shows: str) -> None:
    for mask in (safe_url, masked_url):
        assert SECRET not in mask(text)


@pytest.mark.timeout(90)
def test_an_unreachable_catalog_with_the_password_in_its_query_never_shows_it(tmp_path: Path) -> None:
    port = free_port()
    url = f"postgresql+psycopg://etl@127.0.0.1:{port}/catalog?password={SECRET}&sslpassword={SECRET}"
    with pytest.raises(CatalogUnavailableError, match=rf"127\.0\.0\.1:{port}/catalog") as info:
        Warehouse.open(catalog=url, root=tmp_path / "wh", connect_timeout=1)
    assert SECRET not in str(info.value)
    assert "password=***" in str(info.value)


@pytest.mark.timeout(90)
def test_an_unreachable_catalog_given_as_libpq_keywords_never_shows_them(tmp_path: Path) -> None:
    port = free_port()
    url = f"postgresql+psycopg:///catalog?host=127.0.0.1&port={port}&user=etl&password={SECRET}"
    with pytest.raises(CatalogUnavailableError) as info:
        Warehouse.open(catalog=url, root=tmp_path / "wh", connect_timeout=1)
    assert SECRET not in str(info.value) and SECRET not in repr(info.value)


@pytest.mark.filterwarnings("ignore:Query string argument:sqlalchemy.exc.SAWarning")  # pysqlite ignores it
def test_a_missing_warehouse_never_shows_the_catalog_s_secrets(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'c.db'}?password={SECRET}"
    with Warehouse.open(catalog=url, root=tmp_path / "wh") as wh:
        assert SECRET not in repr(wh)
        with pytest.raises(WarehouseNotFoundError) as info:
            wh.tables()
    assert SECRET not in str(info.value) and "password=***" in str(info.value)


def test_a_storage_root_carrying_settings_is_refused_without_showing_them(tmp_path: Path) -> None:
    for root in (f"s3://bucket/wh?secret_access_key={SECRET}", f"s3://key:{SECRET}@bucket/wh"):
        with pytest.raises(InvalidArgumentError) as info:
            WarehouseConfig.resolve(catalog=f"sqlite:///{tmp_path / 'c.db'}", root=root).location()
        assert SECRET not in str(info.value)


def test_a_catalog_url_that_does_not_parse_never_shows_its_secret() -> None:
    for url in (f"postgresql://etl@db:port/c?password={SECRET}", f"host=db user=etl password={SECRET}"):
        with pytest.raises(InvalidArgumentError) as info:
            WarehouseConfig.resolve(catalog=url, root="/tmp/wh")
        assert SECRET not in str(info.value)


def test_a_spark_connect_server_is_named_without_any_secret() -> None:
    from airflow_txn.airflow.utils.connect_sessions import server_address  # imports no Airflow

    for url in (f"sc://spark:15002/;user_id=etl;token={SECRET}", f"sc://etl:{SECRET}@spark:15002",
                f"sc://spark:15002?token={SECRET}"):
        assert SECRET not in server_address(url) and "spark:15002" in server_address(url)


@pytest.mark.parametrize("oracle", [f"zookeeper://etl:{SECRET}@zk1:2181/txn", f"zookeeper://zk1:2181/txn?token={SECRET}",
                                    f"zookeeper://zk1:2181/txn?password={SECRET}", f"etcd://u:{SECRET}@h"])
def test_an_oracle_spec_carrying_a_secret_is_refused_without_showing_it(oracle: str) -> None:
    from airflow_txn.errors import TxnError
    from airflow_txn.oracle.registry import kind_of

    with pytest.raises(TxnError) as info:
        kind_of(oracle).parse(oracle)
    assert SECRET not in str(info.value)
