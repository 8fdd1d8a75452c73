"""Reading a table as a DataFrame at an exact snapshot: a committed CSN (time travel), the readable
watermark, or a transaction's own view (its snapshot plus its own staged writes)."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession

from airflow_txn.catalog import part_records
from airflow_txn.core.results import PartitionSpec
from airflow_txn.core.transaction import Transaction
from airflow_txn.core.warehouse import Warehouse
from airflow_txn.errors import TxnError
from airflow_txn.spark import engine
from airflow_txn.spark.frames import parts_frame


def read(spark: SparkSession, wh: Warehouse, table: str, csn: int | None = None, txn: Transaction | None = None,
         partitions: PartitionSpec | None = None) -> DataFrame:
    """The rows of `table` visible at snapshot `csn` (None: the readable watermark), or to `txn`.

    The DataFrame scans exactly the visible parts' files, with the partition columns restored; filters
    on data columns are pushed into the Parquet reader. `partitions=[{col: value}, ...]` reads only
    those partitions (pruned on the driver). The files are read when an action runs: keep `csn`
    inside the retention window (or the transaction open) until then.
    """
    if txn is not None and csn is not None:
        raise TxnError("pass either csn (a committed snapshot) or txn (a transaction's own view), not both")
    rt = wh.runtime
    info = engine.table_for_read(rt, table, txn)
    keys = engine.partition_keys(info, partitions)
    if txn is not None:
        engine.record_read_set(txn, info, keys)
        engine.note_read(txn, info, keys)
        tid, snapshot = txn.tid, txn.snapshot_csn
    else:
        tid, snapshot = None, engine.snapshot_for(wh, csn, [info.name.qualified])
    with rt.catalog.read() as conn:
        parts = part_records.visible_parts(conn, info.id, tid, snapshot, keys)
    return parts_frame(spark, rt.storage.table_dir(info.directory), info, parts)
