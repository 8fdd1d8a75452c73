"""airflow_txn.spark.merge (issue 32, item 4): a DataFrame merged into a table, on a local session and through
Spark Connect (`any_spark`): the source collected as Arrow, the core's MERGE doing the rest."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa
import pytest

import airflow_txn.spark as txn_spark
from airflow_txn import Warehouse
from airflow_txn.errors import SchemaMismatchError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark
DIM = pa.schema([pa.field("id", pa.int64(), nullable=False), ("day", pa.string()), ("qty", pa.uint32())])


def test_a_dataframe_is_merged_and_bad_sources_are_refused_before_anything_is_staged(any_spark: SparkSession,
                                                                                      swh: Warehouse) -> None:
    swh.create_table("s.dim", DIM, partition_by=["day"])
    with swh.begin() as t:
        t.append("s.dim", pa.Table.from_pylist([{"id": 1, "day": "a", "qty": 1}, {"id": 2, "day": "b", "qty": 2}],
                                               DIM))
    source = any_spark.createDataFrame([(2, "b", 20), (3, "c", 2**32 - 1)], "id long, day string, qty long")
    t = swh.begin()
    assert txn_spark.merge(source, t, "s.dim", on=["id", "day"]) == {"updated": 1, "inserted": 1, "deleted": 0}
    too_big = any_spark.createDataFrame([(4, "d", 2**32)], "id long, day string, qty long")  # uint32 holds less
    with pytest.raises(SchemaMismatchError, match="does not fit"):
        txn_spark.merge(too_big, t, "s.dim", on=["id", "day"])
    wrong = any_spark.createDataFrame([(4, "d", "x")], "id long, day string, qty string")
    with pytest.raises(SchemaMismatchError, match="'qty' is string"):
        txn_spark.merge(wrong, t, "s.dim", on=["id", "day"])
    gone = any_spark.createDataFrame([(1, "a")], "id long, day string")  # keys only: a delete
    assert txn_spark.merge(gone, t, "s.dim", on=["id", "day"], when_matched="delete",
                           when_not_matched="ignore")["deleted"] == 1
    t.commit()
    got = sorted((r["id"], r["day"], r["qty"]) for r in swh.read("s.dim").to_pylist())
    assert got == [(2, "b", 20), (3, "c", 2**32 - 1)]
