"""The engine paths and storage roots every conformance case runs on: ONE list each. A new engine path is added
by listing it here (how it writes a table's rows in a transaction, how it reads a table, what it reads the
table's types as); every case in this directory then runs on it, on every root it supports.

    core                the engine's own Arrow API (Transaction.append, Warehouse.read)
    spark-native        airflow_txn.spark.write/read via="native" on the local SparkSession (Spark's own Parquet
                        writer and reader; the root must be a path every executor reaches: local roots only)
    datasource-local    the "airflow_txn" data source (via="datasource") on the local SparkSession
    datasource-connect  the data source through a Spark Connect server (no JVM in this process)
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pytest

from airflow_txn import Warehouse
from airflow_txn.core.transaction import Transaction
from airflow_txn.model.options import Via

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

    def write(self, spark: SparkSession | None, t: Transaction, table: str, rows: pa.Table) -> int:
        """Stage `rows` (in the table's own Arrow types) in `table` through this path; the rows staged."""
        if spark is None:
            t.append(table, rows)
            return int(rows.num_rows)
        import airflow_txn.spark as txn_spark

        return txn_spark.write(spark_frame(spark, rows), t, table, via=self.via or Via.AUTO)

    def read(self, spark: SparkSession | None, wh: Warehouse, table: str) -> pa.Table:
        """`table` as this path reads it (a Spark path: in Spark's types, as Arrow)."""
        if spark is None:
            return wh.read(table)
        import airflow_txn.spark as txn_spark

        return txn_spark.read(spark, wh, table, via=self.via or Via.AUTO).toArrow()

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
    if engine_path.session is None:
        return None
    if engine_path.connect:
        monkeypatch.setenv("SPARK_CONNECT_MODE_ENABLED", "1")
    session: SparkSession = request.getfixturevalue(engine_path.session)
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


