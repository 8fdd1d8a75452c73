"""Unit tests without a SparkSession: the Arrow <-> Spark type mapping, Spark's partition directory
names decoded to canonical partition text, and the lazy, helpful import of the Spark layer."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from airflow_txn.errors import SchemaMismatchError, StorageError
from airflow_txn.model.partitioning import value_to_text
from tests.helpers import import_error_without

pytestmark = pytest.mark.spark

ROUND_TRIP = [pa.bool_(), pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.float32(), pa.float64(), pa.string(),
              pa.binary(), pa.date32(), pa.timestamp("us", tz="UTC"), pa.timestamp("us"), pa.decimal128(12, 3),
              pa.list_(pa.int64()), pa.map_(pa.string(), pa.float64()),
              pa.struct([("a", pa.int32()), pa.field("b", pa.string(), nullable=False)])]


@pytest.mark.parametrize("arrow_type", ROUND_TRIP, ids=str)
def test_types_round_trip(arrow_type: pa.DataType) -> None:
    from airflow_txn.spark.types import same_storage, to_arrow_type, to_spark_type

    assert to_arrow_type(to_spark_type(arrow_type)) == arrow_type
    assert same_storage(to_spark_type(arrow_type), arrow_type)


def _spark_reads() -> list[tuple[pa.DataType, object]]:
    from pyspark.sql import types as T

    return [(pa.uint8(), T.ShortType()), (pa.uint16(), T.IntegerType()), (pa.uint32(), T.LongType()),
            (pa.uint64(), T.DecimalType(20, 0)), (pa.date64(), T.DateType()),
            (pa.timestamp("ns"), T.TimestampNTZType()), (pa.timestamp("ns", "UTC"), T.TimestampType()),
            (pa.timestamp("ns", "Asia/Tokyo"), T.TimestampType()), (pa.timestamp("s"), T.TimestampNTZType()),
            (pa.large_string(), T.StringType()), (pa.large_binary(), T.BinaryType()),
            (pa.large_list(pa.int8()), T.ArrayType(T.ByteType()))]


def test_spark_reads_each_type_as_its_own_parquet_reader_does_and_writes_back_in_its_own_types() -> None:
    """Issue 31: uint8/16/32/64, date64 and timestamp[ns] had "no Spark equivalent"; Spark's Parquet reader reads
    them (unsigned widened, date64 as a date, a timestamp in microseconds). A Spark write of the Spark type is
    accepted (writable: the writers check each value fits); the values are not stored unchanged (not
    same_storage), so Spark's compaction, which rewrites files as they are, still leaves such tables alone."""
    from airflow_txn.spark.types import same_storage, to_spark_type, writable

    for arrow_type, spark_type in _spark_reads():
        assert to_spark_type(arrow_type) == spark_type, arrow_type
        assert writable(to_spark_type(arrow_type), arrow_type), arrow_type
    for arrow_type in (pa.uint8(), pa.uint64(), pa.date64(), pa.timestamp("ns"), pa.timestamp("ms", "UTC")):
        assert not same_storage(to_spark_type(arrow_type), arrow_type), arrow_type
    from pyspark.sql import types as T

    assert not writable(T.TimestampNTZType(), pa.timestamp("ns", "UTC"))  # a local time is not an instant
    assert not writable(T.IntegerType(), pa.uint8())


def test_what_spark_cannot_store_is_refused_by_name() -> None:
    from pyspark.sql import types as T

    from airflow_txn.spark.types import same_storage, to_arrow_schema, to_spark_schema

    with pytest.raises(SchemaMismatchError, match=r"column 'h'.*halffloat"):
        to_spark_schema(pa.schema([("h", pa.float16())]))
    with pytest.raises(SchemaMismatchError, match="time64"):
        to_spark_schema(pa.schema([("t", pa.time64("us"))]))
    with pytest.raises(SchemaMismatchError, match=r"column 'i'.*interval"):
        to_arrow_schema(T.StructType([T.StructField("i", T.DayTimeIntervalType())]))
    # Spark writes microseconds, in UTC: a millisecond column would lose them, a zone name changes nothing
    assert not same_storage(T.TimestampType(), pa.timestamp("ms", tz="UTC"))
    assert same_storage(T.TimestampType(), pa.timestamp("us", tz="Europe/Paris"))
    assert same_storage(T.StringType(), pa.large_string())
    assert not same_storage(T.LongType(), pa.int32())


SCHEMA = pa.schema([("s", pa.string()), ("n", pa.int16()), ("d", pa.date32()), ("b", pa.bool_()),
                    ("ts", pa.timestamp("us", tz="UTC")), ("ntz", pa.timestamp("us")), ("v", pa.int64())])
COLUMNS = ["s", "n", "d", "b", "ts", "ntz"]


def test_spark_directory_names_decode_to_canonical_text() -> None:
    from airflow_txn.spark.layout import HIVE_NULL, decode_partition

    names = ["s=a%2Fb%3Dc %25}", "n=-7", "d=2024-02-29", "b=true", "ts=2024-03-01 10%3A00%3A00.5",
             "ntz=2024-03-01 10%3A00%3A00"]
    plus_two = dt.timezone(dt.timedelta(hours=2))
    assert decode_partition(names, SCHEMA, COLUMNS, plus_two) == {
        "s": "a/b=c %}", "n": "-7", "d": "2024-02-29", "b": "true", "ts": "2024-03-01T08:00:00.500000+00:00",
        "ntz": "2024-03-01T10:00:00"}
    ts = dt.datetime(2024, 3, 1, 8, 0, 0, 500000, tzinfo=dt.UTC)
    assert value_to_text(pa.scalar(ts, SCHEMA.field("ts").type).as_py()) == "2024-03-01T08:00:00.500000+00:00"
    assert set(decode_partition([f"{c}={HIVE_NULL}" for c in COLUMNS], SCHEMA, COLUMNS, dt.UTC).values()) == {None}
    with pytest.raises(StorageError, match="unexpected directory"):
        decode_partition(["x=1", *names[1:]], SCHEMA, COLUMNS, dt.UTC)
    with pytest.raises(SchemaMismatchError):
        decode_partition(["s=a", "n=seven", *names[2:]], SCHEMA, COLUMNS, dt.UTC)


def test_only_fixed_offset_session_zones_write_zoned_timestamp_partitions() -> None:
    from airflow_txn.spark.layout import check_zone, fixed_zone

    assert fixed_zone("UTC") == fixed_zone("Etc/UTC") == fixed_zone("+00:00") == dt.UTC
    assert fixed_zone("-05:30") == dt.timezone(-dt.timedelta(hours=5, minutes=30))
    assert fixed_zone("GMT+2") == dt.timezone(dt.timedelta(hours=2))
    assert fixed_zone("America/New_York") is None
    assert check_zone("America/New_York", SCHEMA, ["s", "ntz"]) is None  # no zoned timestamp partition
    with pytest.raises(SchemaMismatchError, match="timeZone to UTC"):
        check_zone("America/New_York", SCHEMA, ["ts"])


def test_importing_the_layer_is_lazy_and_names_the_extra_when_pyspark_is_missing() -> None:
    setup = "import airflow_txn.spark as s\nassert 'pyspark' not in sys.modules, 'importing the package loaded pyspark'"
    assert "pip install 'airflow-txn[spark]'" in import_error_without("pyspark", setup, "s.write")


def test_many_small_parts_are_read_by_a_few_tasks_and_large_ones_alone() -> None:
    """One Python task per part made most of a data-source read of 100 small parts (B12): parts are packed as
    Spark packs a native scan's files (largest first, up to min(128 MiB, total / parallelism), 4 MiB per open)."""
    from airflow_txn.core.adapter import PartView
    from airflow_txn.spark.datasource import read_splits

    def part(i: int, size: int) -> PartView:
        return PartView(id=i, partition_key="", path="", files=(f"p-{i}.parquet",), row_count=1, size_bytes=size,
                        locked_by=None)

    small = [part(i, 200_000) for i in range(100)]
    splits = read_splits(small, parallelism=2)
    assert 2 <= len(splits) <= 5
    assert sorted(p.id for s in splits for p in s) == list(range(100))  # every part once
    large = [part(i, 200 * 1024 * 1024) for i in range(3)]
    assert [len(s) for s in read_splits(large + small[:2], parallelism=2)] == [1, 1, 1, 2]
    assert read_splits([], parallelism=2) == []
