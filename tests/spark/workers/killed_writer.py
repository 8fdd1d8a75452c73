"""A Spark writer that hangs mid-write so the test can SIGKILL it (driver, JVM and Python workers).

Usage: python -m tests.spark.workers.killed_writer CATALOG_URL ROOT TABLE
Begins a transaction (short lease), prints its tid, then stages a DataFrame whose 100th row hangs
in a Python UDF: by then the Parquet file of the task is open in Spark's _temporary directory.
"""

from __future__ import annotations

import os
import sys
import time


def _slow(i: int) -> int:
    if i == 100:
        time.sleep(600)
    return i


def main(catalog: str, root: str, table: str) -> None:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    import airflow_txn.spark as txn_spark
    from airflow_txn import Warehouse
    from tests.helpers import SPARK_TEST_JVM

    spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.extraJavaOptions", SPARK_TEST_JVM["spark.driver.extraJavaOptions"]).getOrCreate())
    df = spark.range(0, 1000, numPartitions=1).select(F.udf(_slow, "long", useArrow=False)(F.col("id")).alias("id"))
    wh = Warehouse.open(catalog=catalog, root=root)
    t = wh.begin(label="killed mid-write", lease_seconds=5)
    print(t.tid, flush=True)
    txn_spark.write(df, t, table)
    print("the write finished: the test should have killed this process", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:4])
