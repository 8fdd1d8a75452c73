"""Copy-on-write delete and update run by Spark: only the parts holding matching rows are rewritten,
concurrent rewrites of a part conflict, and bad conditions or values are refused up front."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa
import pytest

import airflow_txn.spark as txn_spark
from airflow_txn import Warehouse
from airflow_txn.errors import SchemaMismatchError, SerializationError, TransactionClosedError
from tests.helpers import events, ids, make_tables
from tests.spark.helpers import rows_of

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark


def _three_parts(wh: Warehouse) -> dict[int, str]:
    """Part id -> path of three committed parts: ids 1-2 and 3 on day 1 (two parts), 4-5 on day 2."""
    make_tables(wh)
    with wh.begin() as t:
        t.append("sales.events", events([1, 2]))
        t.append("sales.events", events([3]))
        t.append("sales.events", events([4, 5], day="2024-01-02", value=2.0))
    return {i: p["path"] for i, p in enumerate(wh.transaction_info(t.tid)["parts"])}


def _rewritten(wh: Warehouse, tid: str) -> tuple[list[str], list[str]]:
    parts = wh.transaction_info(tid)["parts"]
    return (sorted(p["path"] for p in parts if p["role"] == "removed"),
            sorted(str(p["partition"]["day"]) for p in parts if p["role"] == "created"))


def test_delete_rewrites_only_the_parts_holding_matches(spark: SparkSession, swh: Warehouse) -> None:
    from pyspark.sql import functions as F

    paths = _three_parts(swh)
    with swh.begin() as t:
        assert txn_spark.delete(spark, t, "sales.events", F.col("id").isin(2, 5)) == 2
    removed, created = _rewritten(swh, t.tid)
    assert removed == sorted([paths[0], paths[2]]) and created == ["2024-01-01", "2024-01-02"]
    assert ids(swh.read("sales.events")) == [1, 3, 4]
    with swh.begin() as t:  # a whole part deleted: nothing is written in its place
        assert txn_spark.delete(spark, t, "sales.events", "day = '2024-01-02'") == 1
        assert txn_spark.delete(spark, t, "sales.events", "id > 100") == 0
    assert _rewritten(swh, t.tid)[1] == []
    assert ids(swh.read("sales.events")) == [1, 3]


def test_update_sets_values_and_moves_rows_between_partitions(spark: SparkSession, swh: Warehouse) -> None:
    from pyspark.sql import functions as F

    paths = _three_parts(swh)
    with swh.begin() as t:
        assert txn_spark.update(spark, t, "sales.events", "id = 3",
                                {"value": F.col("value") * 10, "day": "2024-01-02"}) == 1
        assert rows_of(txn_spark.read(spark, swh, "sales.events", txn=t).where("id = 3")) == [(3, "2024-01-02", 10.0)]
    assert _rewritten(swh, t.tid) == ([paths[1]], ["2024-01-02"])
    assert rows_of(txn_spark.read(spark, swh, "sales.events")) == [
        (1, "2024-01-01", 1.0), (2, "2024-01-01", 1.0), (3, "2024-01-02", 10.0), (4, "2024-01-02", 2.0),
        (5, "2024-01-02", 2.0)]


def test_bad_conditions_and_values_are_refused_before_any_job(spark: SparkSession, swh: Warehouse) -> None:
    from pyspark.sql import functions as F

    strict = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])
    swh.create_table("ns.strict", strict)
    with swh.begin() as t:
        t.append("ns.strict", pa.table({"id": [1, 2], "v": ["a", "b"]}, schema=strict))
    t = swh.begin()
    with pytest.raises(SchemaMismatchError, match="cannot evaluate"):
        txn_spark.delete(spark, t, "ns.strict", "nope = 1")
    with pytest.raises(SchemaMismatchError, match="not boolean"):
        txn_spark.delete(spark, t, "ns.strict", "id + 1")
    with pytest.raises(SchemaMismatchError, match="unknown column"):
        txn_spark.update(spark, t, "ns.strict", "id = 1", {"nope": 1})
    with pytest.raises(SchemaMismatchError, match="cannot be set to None"):
        txn_spark.update(spark, t, "ns.strict", "id = 1", {"id": None})
    with pytest.raises(SchemaMismatchError, match="not nullable"):  # a null computed by the job itself
        txn_spark.update(spark, t, "ns.strict", "id = 1", {"id": F.expr("CAST(NULL AS BIGINT)")})
    assert swh.transaction_info(t.tid)["parts"] == [] and t.state == "active"
    t.commit()
    assert swh.read("ns.strict").num_rows == 2


def test_concurrent_rewrites_of_one_part_conflict(spark: SparkSession, swh: Warehouse) -> None:
    _three_parts(swh)
    first, second = swh.begin(), swh.begin()
    txn_spark.delete(spark, first, "sales.events", "id = 1")
    txn_spark.delete(spark, second, "sales.events", "id = 4")  # another part: no conflict
    with pytest.raises(SerializationError):
        txn_spark.update(spark, second, "sales.events", "id = 2", {"value": 0.0})
    with pytest.raises(TransactionClosedError):  # the loser can only roll back
        txn_spark.delete(spark, second, "sales.events", "id = 5")
    second.rollback()
    first.commit()
    assert ids(swh.read("sales.events")) == [2, 3, 4, 5]
