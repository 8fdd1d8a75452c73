"""The engine paths and storage roots every conformance case runs on: ONE list each. A new engine path is added
by listing it here (how it writes a table's rows in a transaction, deletes and updates rows, merges a source into
a table, reads a table or a transaction's own view, what it reads the table's types as); every case in this
directory then runs on it, on every root it supports, and the histories of test_histories.py run statements
through it mixed with the others.

    core                the engine's own Arrow API (Transaction.append, Warehouse.read)
    spark-native        airflow_txn.spark.write/read via="native" on the local SparkSession (Spark's own Parquet
                        writer and reader; the root must be a path every executor reaches: local roots only)
    datasource-local    the "airflow_txn" data source (via="datasource") on the local SparkSession
    datasource-connect  the data source through a Spark Connect server (no JVM in this process)
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from airflow_txn import Warehouse
from airflow_txn.core.transaction import Transaction
from airflow_txn.model.options import Via
from airflow_txn.model.results import MergeCounts, PartitionSpec

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tests.harness.seaweedfs import S3Server


@dataclass(frozen=True)
class EnginePath:
    name: str
    session: str | None
    """The fixture giving the path's Spark session (None: no Spark)."""
    via: Via | None = None
    local_roots_only: bool = False
    connect: bool = False
    """A Spark Connect session: the process is put in Connect mode for the test (as SparkSession.builder.remote()
    leaves it), so pyspark.sql.functions make Connect columns."""

    def write(self, spark: SparkSession | None, t: Transaction, table: str, rows: pa.Table, mode: str = "append",
              partitions: PartitionSpec | None = None) -> int:
        """Stage `rows` (in the table's own Arrow types) in `table` through this path, under the handle's key (if
        any): an append, or an overwrite of the table or of the listed `partitions`; the rows staged."""
        if spark is None:
            return t.overwrite(table, rows, partitions) if mode == "overwrite" else t.append(table, rows)
        import airflow_txn.spark as txn_spark

        return txn_spark.write(spark_frame(spark, rows), t, table, mode=mode, partitions=partitions,
                               via=self.via or Via.AUTO)

    def read(self, spark: SparkSession | None, wh: Warehouse, table: str, txn: Transaction | None = None) -> pa.Table:
        """`table` as this path reads it (a Spark path: in Spark's types, as Arrow): the latest snapshot, or `txn`'s
        own view (through a keyed handle: a keyed read, which a retry of what it saw withdraws)."""
        if spark is None:
            return txn.read(table) if txn is not None else wh.read(table)
        import airflow_txn.spark as txn_spark

        return txn_spark.read(spark, wh, table, txn=txn, via=self.via or Via.AUTO).toArrow()

    def delete(self, spark: SparkSession | None, t: Transaction, table: str, column: str,
               values: Sequence[Any]) -> int:
        """Delete the rows whose `column` is one of `values` through this path (Spark: copy-on-write)."""
        if spark is None:
            return t.delete(table, pc.field(column).isin(list(values)))
        from pyspark.sql import functions as F

        import airflow_txn.spark as txn_spark

        return txn_spark.delete(spark, t, table, F.col(column).isin(list(values)), via=self.via or Via.AUTO)

    def update(self, spark: SparkSession | None, t: Transaction, table: str, column: str, values: Sequence[Any],
               add: Mapping[str, float]) -> int:
        """Add `add[c]` to column c of the rows whose `column` is one of `values`, through this path."""
        if spark is None:
            return t.update(table, pc.field(column).isin(list(values)),
                            {name: pc.field(name) + amount for name, amount in add.items()})
        from pyspark.sql import functions as F

        import airflow_txn.spark as txn_spark

        return txn_spark.update(spark, t, table, F.col(column).isin(list(values)),
                                {name: F.col(name) + amount for name, amount in add.items()}, via=self.via or Via.AUTO)

    def merge(self, spark: SparkSession | None, t: Transaction, table: str, source: pa.Table, on: Sequence[str],
              **clauses: Any) -> MergeCounts:
        """MERGE `source` (in the table's own Arrow types: every column, or the keys and the columns it sets) into
        `table` by the key columns `on` through this path (Spark: airflow_txn.spark.merge of a DataFrame in Spark's
        types, executed by Spark through the path's write path), `clauses` as Transaction.merge takes them (a Spark
        path: when_matched's values as Spark Columns or Python values); {updated, inserted, deleted}."""
        if spark is None:
            return t.merge(table, source, on, **clauses)
        import airflow_txn.spark as txn_spark

        return txn_spark.merge(spark_frame(spark, source), t, table, on=on, via=self.via or Via.AUTO, **clauses)

    def reads_as(self, schema: pa.Schema) -> pa.Schema:
        """The Arrow form of the types this path reads a table of `schema` in (docs/TYPES.md)."""
        if self.session is None:
            return schema
        from airflow_txn.spark.types import to_arrow_schema, to_spark_schema

        return to_arrow_schema(to_spark_schema(schema))


PATHS = [
    EnginePath("core", None),
    EnginePath("spark-native", "spark", via=Via.NATIVE, local_roots_only=True),
    EnginePath("datasource-local", "spark", via=Via.DATASOURCE),
    EnginePath("datasource-connect", "connect_spark", via=Via.DATASOURCE, connect=True),
]
ROOTS = ["local", "s3"]


def combinations(roots: Sequence[str] | None = None) -> list[Any]:
    """pytest params (path, root) for every path on every root it supports (of `roots`, default ROOTS), marked
    spark / s3 for scripts/test.sh's phases."""
    params = []
    for path in PATHS:
        for root in roots or ROOTS:
            if root != "local" and path.local_roots_only:
                continue  # the native path reads and writes through Hadoop's local filesystem
            marks = [*([pytest.mark.spark] if path.session else []), *([pytest.mark.s3] if root == "s3" else [])]
            params.append(pytest.param(path, root, marks=marks, id=f"{path.name}-{root}"))
    return params


def spark_frame(spark: SparkSession, rows: pa.Table) -> Any:
    """A DataFrame of `rows` in Spark's types for the table's (what a Spark user has: an unsigned integer as the
    wider signed type, a timestamp in microseconds, ...), built from Arrow."""
    from airflow_txn.spark.types import to_spark_schema

    schema = to_spark_schema(rows.schema)
    return spark.createDataFrame(rows.cast(spark_arrow(rows.schema)), schema=schema)


def spark_arrow(schema: pa.Schema) -> pa.Schema:
    from airflow_txn.spark.types import to_arrow_schema, to_spark_schema

    spark_schema = to_arrow_schema(to_spark_schema(schema))
    return pa.schema([f.with_nullable(schema.field(f.name).nullable) for f in spark_schema])


@pytest.fixture
def engine_session(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch,
                   engine_path: EnginePath) -> SparkSession | None:
    return session_of(engine_path, request, monkeypatch)


def session_of(path: EnginePath, request: pytest.FixtureRequest,
               monkeypatch: pytest.MonkeyPatch) -> SparkSession | None:
    """The path's Spark session (None: no Spark), the process put in Connect mode for a Connect path and taken out
    of it for any other (a test running statements through several paths calls this before each)."""
    if path.connect:
        monkeypatch.setenv("SPARK_CONNECT_MODE_ENABLED", "1")
    else:
        monkeypatch.delenv("SPARK_CONNECT_MODE_ENABLED", raising=False)
    if path.session is None:
        return None
    session: SparkSession = request.getfixturevalue(path.session)
    return session


def open_warehouse(request: pytest.FixtureRequest, root: str, tmp_path: Path,
                   monkeypatch: pytest.MonkeyPatch) -> Iterator[Warehouse]:
    """A warehouse on a SQLite catalog and the `root` kind of root: a local directory, or a fresh prefix on the
    session's S3 server with its settings passed explicitly (the Spark workers started before the test, so only
    options reach them, not this process's environment)."""
    if root == "local":
        wh = Warehouse.open(catalog=f"sqlite:///{tmp_path / 'c.db'}", root=str(tmp_path / "warehouse"))
    else:
        s3: S3Server = request.getfixturevalue("s3_server")
        bucket: str = request.getfixturevalue("s3_bucket")
        for name, value in s3.env().items():
            monkeypatch.setenv(name, value)
        options = {"endpoint_url": s3.endpoint, "region": "us-east-1", "access_key_id": s3.access_key,
                   "secret_access_key": s3.secret_key}
        wh = Warehouse.open(catalog=f"sqlite:///{tmp_path / 'c.db'}", root=f"s3://{bucket}/c_{uuid.uuid4().hex[:12]}",
                            storage_options=options)
    wh.init()
    yield wh
    wh.close()


