"""Through Spark Connect on a root the Spark Connect server shares (a local or shared filesystem): writes with the
native path, copy-on-write delete and update, and Spark compaction, as on a local session. The server here
runs on this machine, so it reaches the test's local root at the same path."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

import airflow_txn.spark as txn_spark
from airflow_txn import Warehouse
from tests.helpers import EVENTS, make_tables
from tests.spark.helpers import frame, rows_of

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark


def test_write_overwrite_delete_update_and_compact_through_spark_connect(
        connect_spark: SparkSession, swh: Warehouse, monkeypatch: pytest.MonkeyPatch) -> None:
    # what pyspark's builder (and SparkTransactionOperator) sets for a remote session: pyspark.sql.functions
    # then build Connect columns; undone after the test, so the classic session's tests stay classic
    monkeypatch.setenv("SPARK_CONNECT_MODE_ENABLED", "1")
    make_tables(swh)
    for batch in range(3):  # three parts per day, for compaction to merge
        with swh.begin() as t:
            rows = [(10 * batch + i, f"2024-01-0{1 + i % 2}", float(i)) for i in range(4)]
            assert txn_spark.write(frame(connect_spark, EVENTS, rows), t, "sales.events", via="native") == 4
    with swh.begin() as t:
        assert txn_spark.write(frame(connect_spark, EVENTS, [(99, "2024-01-02", 9.0)]), t, "sales.events",
                               mode="overwrite", partitions=[{"day": "2024-01-02"}], via="native") == 1
        assert txn_spark.delete(connect_spark, t, "sales.events", "id = 20") == 1
        assert txn_spark.update(connect_spark, t, "sales.events", "id = 10", {"value": "7.5"}) == 1
    expected = [(0, "2024-01-01", 0.0), (2, "2024-01-01", 2.0), (10, "2024-01-01", 7.5), (12, "2024-01-01", 2.0),
                (22, "2024-01-01", 2.0), (99, "2024-01-02", 9.0)]
    assert rows_of(txn_spark.read(connect_spark, swh, "sales.events", via="native")) == sorted(expected, key=repr)
    result = txn_spark.compact(connect_spark, swh, "sales.events")
    assert result["merged"] >= 1 and result["parts_after"] < result["parts_before"]
    assert sorted(tuple(r.values()) for r in swh.read("sales.events").to_pylist()) == expected
