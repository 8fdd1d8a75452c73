"""Secrets never printed (issue 30, item 5): one helper, `airflow_txn.model.secrets.mask_secrets`, masks every
form a URL or a connection string can carry a secret in, and every error that names a catalog, a storage root
or a Spark Connect server goes through it.

The error paths are real: a PostgreSQL catalog on a loopback port nothing listens on, a catalog that holds no
warehouse, a storage root that carries settings; never a mock.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from airflow_txn import Warehouse, errors
from airflow_txn.catalog.database import safe_url
from airflow_txn.core.adapter import masked_url
from airflow_txn.core.config import WarehouseConfig
from airflow_txn.errors import (
    CatalogBusyError,
    CatalogReadOnlyError,
    CatalogTooNewError,
    CatalogUnavailableError,
    CatalogUpgradeRequiredError,
    InvalidArgumentError,
    MissingDependencyError,
    PublishError,
    SparkConnectUnavailableError,
    StorageError,
    TxnError,
    WarehouseNotFoundError,
)
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


# -- every error type that names a URL, walked ----------------------------------------------------------------------
# Each type of airflow_txn.errors is in one of three lists: provoked here for real with a secret in every place its
# message could show one (PROVOKED), provoked elsewhere (WALKED_ELSEWHERE: it needs pyspark), or naming no URL at
# all (NAMES_NO_URL, with what it names instead). A new error type fails test_every_error_type_is_walked until it
# is placed.
def _sqlite(tmp_path: Path, query: str = "") -> str:
    return f"sqlite:///{tmp_path / 'c.db'}{query}"


def _made(tmp_path: Path) -> str:
    url = _sqlite(tmp_path)
    with Warehouse.open(catalog=url, root=tmp_path / "wh") as wh:
        wh.init()
    return url


def _busy(tmp_path: Path) -> None:
    import sqlite3

    _made(tmp_path)
    other = sqlite3.connect(tmp_path / "c.db", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        with Warehouse.open(catalog=_sqlite(tmp_path, f"?timeout=0.2&password={SECRET}"), root=tmp_path / "wh") as wh:
            wh.begin()
    finally:
        other.execute("ROLLBACK")
        other.close()


def _read_only(tmp_path: Path) -> None:
    _made(tmp_path)
    url = f"sqlite:///file:{tmp_path / 'c.db'}?mode=ro&uri=true&password={SECRET}"
    with Warehouse.open(catalog=url, root=tmp_path / "wh") as wh:
        wh.begin()


def _too_new(tmp_path: Path) -> None:
    from tests.catalog.test_versions import future_catalog

    future_catalog(_sqlite(tmp_path), min_client=None)
    Warehouse.open(catalog=_sqlite(tmp_path, f"?password={SECRET}"), root=tmp_path / "wh")


def _too_old(tmp_path: Path) -> None:
    from tests.catalog.test_versions import catalog_at

    catalog_at(_sqlite(tmp_path), "schema_v4")
    Warehouse.open(catalog=_sqlite(tmp_path, f"?password={SECRET}"), root=tmp_path / "wh")


def _unreachable_catalog(tmp_path: Path) -> None:
    url = f"postgresql+psycopg://etl:{SECRET}@127.0.0.1:{free_port()}/catalog?password={SECRET}"
    Warehouse.open(catalog=url, root=tmp_path / "wh", connect_timeout=1)


def _missing_warehouse(tmp_path: Path) -> None:
    with Warehouse.open(catalog=_sqlite(tmp_path, f"?password={SECRET}"), root=tmp_path / "wh") as wh:
        wh.tables()


def _missing_driver(tmp_path: Path) -> None:
    Warehouse.open(catalog=f"mysql+pymysql://etl:{SECRET}@127.0.0.1/catalog?password={SECRET}", root=tmp_path / "wh")


def _bad_endpoint(tmp_path: Path) -> None:
    Warehouse.open(catalog=_sqlite(tmp_path), root="s3://bucket/wh",
                   storage_options={"endpoint_url": f"ftp://key:{SECRET}@store.example/?token={SECRET}"})


def _unreachable_store(tmp_path: Path) -> None:
    endpoint = f"http://key:{SECRET}@127.0.0.1:{free_port()}/?token={SECRET}"
    with Warehouse.open(catalog=_sqlite(tmp_path), root="s3://bucket/wh", connect_timeout=2,
                        storage_options={"endpoint_url": endpoint, "access_key_id": "AK",
                                         "secret_access_key": SECRET}) as wh:
        wh.init()


def _bad_oracle(tmp_path: Path) -> None:
    Warehouse.open(catalog=_made(tmp_path), root=tmp_path / "wh", oracle=f"zookeeper://etl:{SECRET}@zk1:2181/txn")


def _unreachable_iceberg_catalog(tmp_path: Path) -> None:
    iceberg = {"type": "sql", "uri": f"postgresql+psycopg://etl:{SECRET}@127.0.0.1:{free_port()}/x?password={SECRET}"}
    with Warehouse.open(catalog=_made(tmp_path), root=tmp_path / "wh", publish="iceberg", iceberg_catalog=iceberg,
                        connect_timeout=1) as wh:
        wh.iceberg_catalog()


PROVOKED: dict[type[Exception], Callable[[Path], None]] = {
    TxnError: _bad_oracle,
    CatalogBusyError: _busy,
    CatalogReadOnlyError: _read_only,
    CatalogTooNewError: _too_new,
    CatalogUpgradeRequiredError: _too_old,
    CatalogUnavailableError: _unreachable_catalog,
    WarehouseNotFoundError: _missing_warehouse,
    MissingDependencyError: _missing_driver,
    InvalidArgumentError: _bad_endpoint,
    StorageError: _unreachable_store,
    PublishError: _unreachable_iceberg_catalog,
}
WALKED_ELSEWHERE = {
    SparkConnectUnavailableError: "tests/airflow/test_spark_connect.py::"
                                  "test_an_unreachable_spark_connect_server_fails_the_session_within_the_bound_naming_it",
}
NAMES_NO_URL = {
    # a root, which never holds a secret (one carrying settings is refused: the test above), and the warehouse ids
    errors.RootOwnedError: "root",
    # the hosts of a ZooKeeper spec, which never holds a secret (refused when parsed: the test above)
    errors.OracleUnavailableError: "spec",
    errors.CatalogVersionError: "subclasses",  # raised only as CatalogTooNewError / CatalogUpgradeRequiredError
    errors.ConnectionNotFoundError: "connection ids",
    **dict.fromkeys((errors.SerializationError, errors.MergedAwayError, errors.StaleAttemptError,
                     errors.RetryConflictError, errors.InvalidatedKeysError, errors.TransactionClosedError,
                     errors.TransactionNotFoundError, errors.TableNotFoundError, errors.TableNotInTagError,
                     errors.TagNotFoundError, errors.TagExistsError, errors.TableExistsError,
                     errors.SchemaMismatchError, errors.UnsupportedTypeError, errors.LeaseExpiredError,
                     errors.InvalidNameError, errors.SnapshotTooOldError, errors.WaitTimeoutError,
                     errors.CheckError), "tids, tables, tags, keys, values"),
    errors.InvalidOptionError: "an option's name, the value given and the values allowed",
}


def test_every_error_type_is_walked() -> None:
    types = {t for t in vars(errors).values() if isinstance(t, type) and issubclass(t, TxnError)}
    placed = [*PROVOKED, *WALKED_ELSEWHERE, *NAMES_NO_URL]
    assert len(placed) == len(set(placed)) and set(placed) == types, set(placed) ^ types


@pytest.mark.timeout(120)
@pytest.mark.filterwarnings("ignore:Query string argument:sqlalchemy.exc.SAWarning")  # pysqlite ignores it
@pytest.mark.parametrize("error", list(PROVOKED), ids=lambda t: t.__name__)
def test_every_error_type_that_names_a_url_never_shows_its_secret(error: type[Exception], tmp_path: Path) -> None:
    with pytest.raises(error) as info:
        PROVOKED[error](tmp_path)
    assert type(info.value) is error, info.value
    shown = f"{info.value} {info.value!r} {info.value.args!r}"
    assert SECRET not in shown, shown
    if error is not PublishError:  # which names the Iceberg catalog by its name, and what the driver said
        assert "***" in shown, shown  # the URL is named, masked
