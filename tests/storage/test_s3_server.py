"""The S3 test harness itself (tests.harness.seaweedfs): a real SeaweedFS server that stores Parquet
files through pyarrow's S3 filesystem, answers a missing key as a missing file, lists and deletes,
refuses anonymous clients and makes buckets on request."""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyarrow import fs as pafs

from tests.harness.seaweedfs import S3Server

pytestmark = pytest.mark.s3

TABLE = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": ["a", "b", None]})


def test_parquet_round_trip_list_and_delete(s3_server: S3Server) -> None:
    fs, bucket = s3_server.filesystem(), s3_server.bucket()
    for part in ("part-0", "part-1"):
        pq.write_table(TABLE, f"{bucket}/t/{part}.parquet", filesystem=fs)

    assert pq.read_table(f"{bucket}/t/part-0.parquet", filesystem=fs).equals(TABLE)
    listed = fs.get_file_info(pafs.FileSelector(f"{bucket}/t"))
    assert sorted(info.base_name for info in listed) == ["part-0.parquet", "part-1.parquet"]
    assert all(info.type == pafs.FileType.File and info.size > 0 for info in listed)

    fs.delete_file(f"{bucket}/t/part-0.parquet")
    listed = fs.get_file_info(pafs.FileSelector(f"{bucket}/t"))
    assert [info.base_name for info in listed] == ["part-1.parquet"]
    assert fs.get_file_info(f"{bucket}/t/part-0.parquet").type == pafs.FileType.NotFound


def test_missing_key_is_file_not_found(s3_server: S3Server) -> None:
    fs, bucket = s3_server.filesystem(), s3_server.bucket()
    with pytest.raises(FileNotFoundError):
        fs.open_input_stream(f"{bucket}/no/such/key.parquet")


def test_anonymous_clients_are_refused(s3_server: S3Server) -> None:
    fs, bucket = s3_server.filesystem(), s3_server.bucket()
    with fs.open_output_stream(f"{bucket}/private") as out:
        out.write(b"secret")
    anonymous = pafs.S3FileSystem(endpoint_override=f"127.0.0.1:{s3_server.port}", scheme="http",
                                  region="us-east-1", anonymous=True)
    attempts: dict[str, Callable[[], object]] = {
        "read": lambda: anonymous.open_input_stream(f"{bucket}/private").read(),
        "list": lambda: anonymous.get_file_info(pafs.FileSelector(bucket)),
        "write": lambda: anonymous.open_output_stream(f"{bucket}/anonymous").write(b"x"),
    }
    for attempt in attempts.values():
        with pytest.raises(OSError, match="ACCESS_DENIED"):
            attempt()
    assert fs.get_file_info(f"{bucket}/anonymous").type == pafs.FileType.NotFound


def test_buckets_are_separate(s3_server: S3Server) -> None:
    fs = s3_server.filesystem()
    first, second = s3_server.bucket(), s3_server.bucket()
    assert first != second
    with fs.open_output_stream(f"{first}/key") as out:
        out.write(b"first")
    assert fs.get_file_info(f"{second}/key").type == pafs.FileType.NotFound
    assert s3_server.bucket(second) == second  # creating an existing bucket is a no-op
    buckets = {info.base_name for info in fs.get_file_info(pafs.FileSelector("/"))}
    assert {first, second} <= buckets


def test_aws_environment_reaches_the_server(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> None:
    """A client configured by the AWS_* variables alone (endpoint, keys, region) reads what the harness wrote."""
    bucket = s3_server.bucket()
    pq.write_table(TABLE, f"{bucket}/t.parquet", filesystem=s3_server.filesystem())
    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    assert s3_server.env()["AWS_ENDPOINT_URL"] == s3_server.endpoint == f"http://127.0.0.1:{s3_server.port}"

    from_env, path = pafs.FileSystem.from_uri(f"s3://{bucket}/t.parquet")
    assert pq.read_table(path, filesystem=from_env).equals(TABLE)
