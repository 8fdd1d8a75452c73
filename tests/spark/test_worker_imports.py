"""What a Spark Python worker loads to run the data source's tasks: the reader and the writer as Spark pickles them
(cloudpickle, which finds their classes by module), unpickled and run in a fresh interpreter, load no catalog and
no SQLAlchemy (reading Parquet loads pyarrow.dataset, and pandas with it: pyarrow's own). Every worker of a session
imports what its tasks unpickle, and the whole core cost about a second of CPU there (airflow_txn.core.stored,
datasource.py's imports). No JVM: the objects are made here, the way the data source's planning makes them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_txn import Warehouse
from airflow_txn.core.adapter import open_write, plan_read
from airflow_txn.spark.datasource import AirflowTxnDataSource, warehouse_options
from airflow_txn.spark.types import to_spark_schema
from tests.helpers import EVENTS, REPO, events, make_tables

pytestmark = pytest.mark.spark

HEAVY = ("sqlalchemy", "airflow_txn.catalog", "airflow_txn.core.adapter", "airflow_txn.core.warehouse",
         "airflow_txn.core.reading")

TASK = """
import pickle, sys
reader, partition, writer, batches = pickle.load(open(sys.argv[1], "rb"))
rows = sum(batch.num_rows for batch in reader.read(partition))
message = writer.write(iter(batches))
print(rows, len(message.parts))
print(" ".join(m for m in {heavy!r} if m in sys.modules))
"""


def test_a_task_of_the_data_source_loads_no_catalog(tmp_path: Path) -> None:
    from pyspark import cloudpickle

    wh = Warehouse.open(catalog=f"sqlite:///{tmp_path / 'catalog.db'}", root=str(tmp_path / "warehouse"))
    wh.init()
    make_tables(wh)
    with wh.begin() as t:
        t.append("sales.events", events([1, 2, 3]))
    options = {**warehouse_options(wh), "path": "sales.events"}
    schema = to_spark_schema(EVENTS)
    read = AirflowTxnDataSource({**options, "read_plan": plan_read(wh, "sales.events").to_json()})
    reader = read.reader(read.schema())
    [partition] = reader.partitions()
    txn = wh.begin()
    plan = open_write(txn, "sales.events", what="worker imports")
    writer = AirflowTxnDataSource({**options, "write_plan": plan.to_json()}).writer(schema, False)
    batches = events([7, 8]).to_batches()
    pickled = tmp_path / "task.pickle"
    pickled.write_bytes(cloudpickle.dumps((reader, partition, writer, batches)))

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", TASK.format(heavy=HEAVY), str(pickled)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    counts, loaded = [*done.stdout.splitlines(), "", ""][:2]
    assert counts == "3 1", done.stdout  # the task read the part and wrote one part file
    assert loaded == "", f"a Spark task of the data source loaded {loaded}"
    txn.rollback()
    wh.close()
