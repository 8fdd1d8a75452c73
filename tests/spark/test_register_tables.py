"""airflow_txn.spark.register_tables: `spark.table("ns.table")` and Spark SQL by name read one consistent snapshot of
the warehouse (a CSN, a tag, else the watermark), through the local SparkSession and through Spark Connect
(`any_spark`); planning errors are raised typed by register_tables itself, before anything is registered."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

import airflow_txn.spark as txn_spark
from airflow_txn import Warehouse
from airflow_txn.errors import (
    InvalidArgumentError,
    InvalidNameError,
    SnapshotTooOldError,
    TableNotFoundError,
    TagNotFoundError,
)
from tests.helpers import accounts, events, make_tables

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tests.harness.seaweedfs import S3Server

pytestmark = pytest.mark.spark
JOIN = ("SELECT e.id, e.value, a.balance FROM sales.events e JOIN sales.accounts a ON e.id = a.id ORDER BY e.id")


@pytest.fixture
def rwh(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Warehouse]:
    """A warehouse on a local root, or (parametrized "s3") on the session's S3 server with its settings passed
    explicitly (they reach the Spark workers through the views' options only)."""
    if getattr(request, "param", "local") == "local":
        wh = Warehouse.open(catalog=f"sqlite:///{tmp_path / 'c.db'}", root=str(tmp_path / "warehouse"))
    else:
        s3: S3Server = request.getfixturevalue("s3_server")
        bucket: str = request.getfixturevalue("s3_bucket")
        options = {"endpoint_url": s3.endpoint, "region": "us-east-1", "access_key_id": s3.access_key,
                   "secret_access_key": s3.secret_key}
        wh = Warehouse.open(catalog=f"sqlite:///{tmp_path / 'c.db'}", root=f"s3://{bucket}/r_{uuid.uuid4().hex[:12]}",
                            storage_options=options)
    wh.init()
    make_tables(wh)
    yield wh
    wh.close()


def _commit(wh: Warehouse, event_ids: list[int], balances: dict[int, int]) -> int:
    """Both tables written in ONE transaction; its CSN."""
    t = wh.begin()
    t.append("sales.events", events(event_ids))
    t.append("sales.accounts", accounts(balances))
    return t.commit()


def _ids(spark: SparkSession, name: str) -> list[int]:
    return sorted(r["id"] for r in spark.table(name).collect())


@pytest.mark.parametrize("rwh", ["local", pytest.param("s3", marks=pytest.mark.s3)], indirect=True)
def test_tables_by_name_read_the_registered_csn(any_spark: SparkSession, rwh: Warehouse) -> None:
    first = _commit(rwh, [1, 2], {1: 10, 2: 20})
    assert txn_spark.register_tables(any_spark, rwh, csn=first) == {"sales.events": first, "sales.accounts": first}
    _commit(rwh, [3], {3: 30})  # a later commit to both tables: the registration still reads `first`
    assert _ids(any_spark, "sales.events") == [1, 2]
    assert _ids(any_spark, "sales.accounts") == [1, 2]
    assert [tuple(r) for r in any_spark.sql(JOIN).collect()] == [(1, 1.0, 10), (2, 1.0, 20)]

    latest = txn_spark.register_tables(any_spark, rwh)  # again: the readable watermark, replacing the first
    assert set(latest.values()) == {rwh.readable_csn()}
    assert [r["id"] for r in any_spark.sql(JOIN).collect()] == [1, 2, 3]
    assert any_spark.sql("SELECT count(*) AS n FROM sales.events WHERE id > 1").collect()[0]["n"] == 2


def test_a_tag_and_a_subset(any_spark: SparkSession, rwh: Warehouse) -> None:
    first = _commit(rwh, [1], {1: 10})
    rwh.tag("month-end", first)
    _commit(rwh, [2], {2: 20})
    assert txn_spark.register_tables(any_spark, rwh, tag="month-end") == {"sales.events": first,
                                                                          "sales.accounts": first}
    assert _ids(any_spark, "sales.events") == [1]
    assert txn_spark.register_tables(any_spark, rwh, tables=["sales.accounts"]) == {"sales.accounts":
                                                                                    rwh.readable_csn()}
    assert _ids(any_spark, "sales.accounts") == [1, 2]
    assert _ids(any_spark, "sales.events") == [1]  # not named: left as registered


def test_planning_errors_are_raised_by_register_tables(any_spark: SparkSession, rwh: Warehouse) -> None:
    first = _commit(rwh, [1], {1: 10})
    txn_spark.register_tables(any_spark, rwh, csn=first)
    _commit(rwh, [9], {9: 90})
    rwh.vacuum(retention_seconds=0)  # `first` is below the horizon now (appends only: its files stay)
    with pytest.raises(TableNotFoundError, match=r"sales\.nope"):
        txn_spark.register_tables(any_spark, rwh, tables=["sales.events", "sales.nope"])
    with pytest.raises(TagNotFoundError, match="no-such-tag"):
        txn_spark.register_tables(any_spark, rwh, tag="no-such-tag")
    with pytest.raises(InvalidArgumentError, match="not both"):
        txn_spark.register_tables(any_spark, rwh, csn=first, tag="no-such-tag")
    with pytest.raises(InvalidArgumentError, match="list of table names"):
        txn_spark.register_tables(any_spark, rwh, tables="sales.events")  # type: ignore[arg-type]
    with pytest.raises(SnapshotTooOldError):
        txn_spark.register_tables(any_spark, rwh, csn=first)
    assert _ids(any_spark, "sales.accounts") == [1]  # nothing was replaced by the failed calls


def test_a_table_that_is_not_ours_is_never_replaced(spark: SparkSession, rwh: Warehouse) -> None:
    _commit(rwh, [1], {1: 10})
    spark.sql("CREATE DATABASE IF NOT EXISTS sales")
    spark.sql("DROP TABLE IF EXISTS sales.accounts")
    spark.sql("CREATE TABLE sales.accounts (id BIGINT) USING parquet")
    try:
        with pytest.raises(InvalidNameError, match="not one register_tables made"):
            txn_spark.register_tables(spark, rwh, tables=["sales.accounts"])
    finally:
        spark.sql("DROP TABLE sales.accounts")


def test_option_values_are_quoted_as_spark_reads_them(spark: SparkSession) -> None:
    """The view's options (a catalog password among them) reach the data source exactly, whatever they hold."""
    from airflow_txn.spark.tables import _literal

    for text in ["plain", "it's", "back\\slash", "\\'", '{"a": "b\\"c"}', "new\nline", "`tick`"]:
        assert spark.sql(f"SELECT {_literal(text)} AS v").collect()[0]["v"] == text
