"""One DataFrame over a list of parts: at most two Parquet scans of exactly their files, with the
partition columns restored.

Part files never store partition columns; the catalog holds each part's partition values. A scan
reads its part files at once (one file index, Spark's own split planning, filters on data columns
pushed into the Parquet reader). The parts whose partition values come back exactly from their
directory names (discovery.py: ASCII, not null, empty or hashed, a type Spark casts back exactly) are
one scan that gets them from Spark's own partition discovery (the table's schema given, `basePath` the
table's directory, each Spark write dir a root of its own): a filter on a partition column prunes
their files, and a query costs what a plain read of Hive-partitioned files costs. The other parts (a
null, `café`, a long value, a Spark write's timestamp directory) are a second scan whose rows get their
partition values from a broadcast join of the row's `_metadata.file_path` with a small table built on
the driver: file -> part id, partition values; Spark reads every file of that scan and filters after the
join. The two scans are one `unionByName`: a value discovery cannot give back costs only its own parts
their pruning. The part id a copy-on-write statement asks for is always joined on that way. The driver
writes each file's key in the form Spark reports it (Hadoop's URI of the path), so no row pays for
decoding; a row whose file is not in the table fails the query rather than losing its partition values.
The table is distinct on the file, so Spark drops the join from queries that use no partition column.
A timestamp[ns] data column is read as the long Parquet stores and turned into Spark's microseconds
(types.stored_column). Measured and rejected: one scan per partition joined by `union` (its plan grows
with the partitions: minutes for a thousand), and decoding the path in every row (six times a plain read).
"""

from __future__ import annotations

import contextlib
import re
import string
import unicodedata
from collections.abc import Sequence
from contextlib import AbstractContextManager
from pathlib import Path

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from airflow_txn.core.adapter import ColumnSource, PartView, ReadPlan, TableView
from airflow_txn.model.partitioning import partition_column
from airflow_txn.spark.discovery import discoverable_parts
from airflow_txn.spark.settings import temporary_setting
from airflow_txn.spark.types import PART_ID, read_schema, spark_value, stored_column, to_spark_schema, to_spark_type
from airflow_txn.spark.writer import column_of, spark_path

_FILE = "__airflow_txn_file"
_GLOB = re.compile(r"([{}\[\]*?\\])")
_URI_PATH = frozenset(string.ascii_letters + string.digits + "-_.!~*'():@&=+$,;/")
_URI_QUOTED_CATEGORIES = frozenset({"Zs", "Zl", "Zp", "Cc"})  # Java's isSpaceChar and isISOControl


def plan_frame(spark: SparkSession, plan: ReadPlan, with_part_id: bool = False) -> DataFrame:
    """The rows of a read plan with the read's columns in order (and the part id, when asked), parts written under
    an older version of the table's schema read as the plan's version (docs/DESIGN.md, D27).

    Parts are scanned in groups of the version they were written under, each group's files by the names and types
    of its own version (parts_frame), then projected to the read's columns as the core projects them
    (ReadPlan.projection: matched by column id, a widened column cast, an added one null or its default, a dropped
    one left out), and the groups are one unionByName. Why not one scan matching columns by Parquet field id
    (spark.sql.parquet.fieldId.read.enabled): files written before ids (a Spark write's, or a table's from before
    versions) have none, and Spark then fails the scan or (fieldId.read.ignoreMissing) reads nulls; a column added
    with a default must read that default in older parts only and null in newer ones, which one scan cannot tell
    apart; and Spark's Parquet reader widens only some types. A table under one version is one group: the read
    it always was, no projection."""
    groups = plan.by_version()
    if not groups or (len(groups) == 1 and groups[0][0] is None):
        return parts_frame(spark, plan.table, plan.parts, with_part_id)
    frames = []
    for written, parts in groups:
        frame = parts_frame(spark, plan.written_table(written).view(), parts, with_part_id)
        if written is not None:
            columns = [_projected(c) for c in plan.projection(written)]
            frame = frame.select(*columns, *([F.col(PART_ID)] if with_part_id else []))
        frames.append(frame)
    result = frames[0]
    for frame in frames[1:]:
        result = result.unionByName(frame)
    return result


def _projected(source: ColumnSource) -> Column:
    """One column of the read's schema from a frame of parts written under an older version."""
    spark_type = to_spark_type(source.field.type)
    if source.source is None:
        value = None if source.default is None else spark_value(source.default)
        return F.lit(value).cast(spark_type).alias(source.field.name)
    return column_of(source.source).cast(spark_type).alias(source.field.name)


def parts_frame(spark: SparkSession, info: TableView, parts: Sequence[PartView],
                with_part_id: bool = False) -> DataFrame:
    """The rows of `parts` (of the table `info`, all written under its version) with the table's columns in order
    (and the part id, when asked).

    The parts whose partition values Spark's discovery gives back (discovery.py) are one scan that partition
    filters prune; the others, if any, a second scan with the values joined on; the two are one union. So a
    value discovery cannot give back costs its own parts their pruning, never the whole read's."""
    extra = [T.StructField(PART_ID, T.LongType(), False)] if with_part_id else []
    if not parts:
        return spark.createDataFrame([], T.StructType([*to_spark_schema(info.schema).fields, *extra]))
    found = discoverable_parts(info, parts)
    discovered = [p for p, ok in zip(parts, found, strict=True) if ok]
    joined = [p for p, ok in zip(parts, found, strict=True) if not ok]
    frames = [_scan(spark, info, group, by_discovery, with_part_id)
              for group, by_discovery in ((discovered, True), (joined, False)) if group]
    return frames[0] if len(frames) == 1 else frames[0].unionByName(frames[1])


def _scan(spark: SparkSession, info: TableView, parts: Sequence[PartView], by_discovery: bool,
          with_part_id: bool) -> DataFrame:
    """One Parquet scan of exactly `parts`' files: the partition columns from Spark's discovery
    (`by_discovery`) or joined on by file."""
    base = info.location
    files = [(base / part.path / name, part) for part in parts for name in part.files]
    joined_on = [] if by_discovery else list(info.partition_by)
    if by_discovery:  # the partition columns from the directory names: a filter on them prunes files
        reader = (spark.read.schema(read_schema(info.schema, info.partition_by))
                  .option("basePath", spark_path(base))
                  .option("ignoreInvalidPartitionPaths", "true"))  # each Spark write dir is a root of its own
    else:
        reader = spark.read.schema(read_schema(pa.schema([f for f in info.schema if f.name not in joined_on]),
                                               info.partition_by))
    with _listed_here(spark, len(files)):
        scan = reader.parquet(*[_literal(path) for path, _ in files])
    if not joined_on and not with_part_id:
        return scan.select(*[stored_column(f, info.partition_by) for f in info.schema])
    mapping = spark.createDataFrame(
        [(key, part.id, *_values(part, info, joined_on)) for path, part in files for key in file_keys(path)],
        T.StructType([T.StructField(_FILE, T.StringType(), False), T.StructField(PART_ID, T.LongType(), False),
                      *[T.StructField(c, to_spark_type(info.schema.field(c).type), True) for c in joined_on]]),
    )
    keyed = scan.select("*", F.col("_metadata.file_path").alias(_FILE))
    joined = keyed.join(F.broadcast(mapping.dropDuplicates([_FILE])), on=_FILE, how="left")
    unmatched = F.raise_error(F.concat(F.lit("airflow_txn: a row from a file outside the parts read: "), F.col(_FILE)))

    def restored(name: str) -> Column:  # a join that found no part fails the query, never yields nulls
        return F.when(F.col(PART_ID).isNull(), unmatched).otherwise(column_of(name)).alias(name)

    columns = [restored(f.name) if f.name in joined_on else stored_column(f, info.partition_by) for f in info.schema]
    return joined.select(*columns, restored(PART_ID)) if with_part_id else joined.select(*columns)


_LISTING_THRESHOLD = "spark.sql.sources.parallelPartitionDiscovery.threshold"


def _listed_here(spark: SparkSession, paths: int) -> AbstractContextManager[None]:
    """Spark lists the given files on the driver however many there are. Past the threshold (32 paths) Spark
    runs a distributed listing job for them: 1.4 s instead of 0.17 s for 200 local part files (B12). The
    files are known and local; the setting is put back after the scan is built."""
    before = spark.conf.get(_LISTING_THRESHOLD)
    if before is not None and paths < int(before):
        return contextlib.nullcontext()
    return temporary_setting(spark, _LISTING_THRESHOLD, str(paths + 1))


def _values(part: PartView, info: TableView, columns: Sequence[str]) -> list[object]:
    """The partition values of `part` as Python values of their Spark types (spark_value)."""
    partition = part.partition
    return [spark_value(partition_column(partition.get(c), info.schema.field(c).type, 1)[0]) for c in columns]


def _literal(path: Path) -> str:
    """A file path Spark reads as exactly that file: Spark globs every path it is given, so the glob
    characters a partition directory may hold (Spark leaves `}` unescaped) are escaped."""
    return _GLOB.sub(r"\\\1", spark_path(path))


def file_keys(path: Path) -> tuple[str, str]:
    """`_metadata.file_path` of a local file as Spark reports it: `file:` + the path quoted the way
    java.net.URI quotes a path (ASCII outside the legal set and non-ASCII spaces and controls as
    UTF-8 %XX; other non-ASCII kept). Both spellings of an empty authority are listed."""
    quoted = "".join(c if c in _URI_PATH or (ord(c) > 127 and unicodedata.category(c) not in _URI_QUOTED_CATEGORIES)
                     else "".join(f"%{b:02X}" for b in c.encode("utf-8", "surrogatepass")) for c in str(path))
    return "file:" + quoted, "file://" + quoted
