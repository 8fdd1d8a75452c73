"""Reading a table as a DataFrame at an exact snapshot: a committed CSN (time travel), the readable
watermark, a tag (a named snapshot), or a transaction's own view (its snapshot plus its own staged writes)."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession

from airflow_txn.core.adapter import plan_read
from airflow_txn.core.transaction import Transaction
from airflow_txn.core.warehouse import Warehouse
from airflow_txn.model.options import Via, ViaName
from airflow_txn.model.results import PartitionSpec
from airflow_txn.spark import via as via_module
from airflow_txn.spark.frames import plan_frame


def read(spark: SparkSession, wh: Warehouse, table: str, csn: int | None = None, txn: Transaction | None = None,
         partitions: PartitionSpec | None = None, via: Via | ViaName = Via.AUTO, tag: str | None = None) -> DataFrame:
    """The rows of `table` visible at snapshot `csn` (None: the readable watermark), at tag `tag` (a named
    snapshot: Warehouse.tag), or to `txn`.

    The DataFrame scans exactly the visible parts' files, with the partition columns restored; filters
    on data columns are pushed into the Parquet reader. The table's schema is the one at that snapshot (time
    travel reads old schemas); parts written under an older version of it read as that one, by column id
    (docs/CONCEPTS.md, "Changing tables"). `partitions=[{col: value}, ...]` reads only
    those partitions (pruned on the driver). The files are read when an action runs: keep `csn`
    inside the retention window (the transaction open, the tag tagged) until then. `via`: as for
    airflow_txn.spark.write ("datasource" reads through the "airflow_txn" data source: any root, Spark Connect).
    """
    if via_module.choose(spark, wh, via) is via_module.DATASOURCE:
        return via_module.read(spark, wh, table, csn, txn, partitions, tag=tag)
    plan = plan_read(wh, table, csn, txn, partitions, tag=tag)
    return plan_frame(spark, plan)
