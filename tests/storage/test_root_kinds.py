"""The two kinds of storage root (issue 30, item 2): `open_storage(location)` is a LocalRoot for a local directory
and an ObjectStoreRoot for anything else, chosen once from the location; each kind defines every method the
base class leaves to it; a local writer refuses a partition path taken by a file instead of trying forever."""

from __future__ import annotations

import inspect
import pickle
from pathlib import Path

import pytest

from airflow_txn.errors import StorageError
from airflow_txn.storage.local_root import LocalRoot
from airflow_txn.storage.location import resolve
from airflow_txn.storage.object_root import ObjectStoreRoot
from airflow_txn.storage.root import Storage
from airflow_txn.storage.roots import open_storage

TID = "1700000000000-1-0123456789abcdef"


def test_a_local_location_makes_a_local_root(tmp_path: Path) -> None:
    for given in (tmp_path, str(tmp_path), f"file://{tmp_path}", resolve(str(tmp_path), {})):
        storage = open_storage(given)
        assert type(storage) is LocalRoot
        assert storage.local == tmp_path and storage.uri == str(tmp_path)


def test_an_object_store_location_makes_an_object_store_root() -> None:
    # the client is made without a request: nothing listens on that port
    where = resolve("s3://bucket/prefix", {"endpoint_url": "http://127.0.0.1:9", "region": "us-east-1"},
                    connect_timeout=1)
    storage = open_storage(where)
    assert type(storage) is ObjectStoreRoot
    assert storage.local is None and storage.uri == "s3://bucket/prefix"
    assert storage.path("sales/events", "day=1/f.parquet") == "bucket/prefix/sales/events/day=1/f.parquet"
    with pytest.raises(StorageError, match="is an object store"):
        storage.table_dir("sales/events")
    with pytest.raises(StorageError, match="is an object store"):
        storage.new_write_dir("sales/events", {}, {"tid": TID})


def test_the_base_is_no_root_by_itself(tmp_path: Path) -> None:
    """Only open_storage picks a kind (storage/roots.py, above the base and both kinds: no import cycle)."""
    with pytest.raises(TypeError, match="open_storage"):
        Storage(tmp_path)


def test_each_kind_defines_what_the_base_leaves_to_it() -> None:
    left = sorted(name for name, member in vars(Storage).items()
                  if inspect.isfunction(member) and "raise NotImplementedError" in inspect.getsource(member))
    assert "delete_part" in left and "write_root_file" in left and "_write_new_file" in left
    for kind in (LocalRoot, ObjectStoreRoot):
        assert [name for name in left if name not in vars(kind)] == [], kind.__name__


def test_a_local_root_survives_pickling(tmp_path: Path) -> None:
    copy = pickle.loads(pickle.dumps(open_storage(tmp_path)))
    assert type(copy) is LocalRoot and copy.local == tmp_path


def test_a_file_where_a_partition_directory_belongs_fails_the_write(tmp_path: Path) -> None:
    storage = open_storage(tmp_path)
    (tmp_path / "sales" / "events").mkdir(parents=True)
    (tmp_path / "sales" / "events" / "day=1").write_bytes(b"not a directory")

    def write(sink: object) -> int:
        raise AssertionError("never opened")

    with pytest.raises(StorageError, match="Not a directory"):
        storage.write_part_file("sales/events", {"day": "1"}, TID, write)
    with pytest.raises(StorageError, match="Not a directory"):
        storage.new_write_dir("sales/events", {"day": "1"}, {"tid": TID})
    assert (tmp_path / "sales" / "events" / "day=1").read_bytes() == b"not a directory"


def test_column_ranges_come_from_the_footers_and_leave_out_what_they_cannot_bound(tmp_path: Path) -> None:
    """Storage.column_ranges (MERGE's pruning): over every file and row group of a part; a column is left out when
    a row group lacks statistics (only nulls, or not written), when the file stores another type or lacks it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = open_storage(str(tmp_path))
    (tmp_path / "t" / "w").mkdir(parents=True)
    pq.write_table(pa.table({"a": pa.array([5, 3, 9], pa.int64()), "n": pa.array([None, None, None], pa.int64()),
                             "s": ["m", "b", "q"], "i": pa.array([1, 2, 3], pa.int32())}),
                   tmp_path / "t" / "w" / "1.parquet", row_group_size=2)
    pq.write_table(pa.table({"a": pa.array([12, 1], pa.int64()), "n": pa.array([1, 2], pa.int64()),
                             "s": ["z", "c"], "i": pa.array([4, 5], pa.int32())}),
                   tmp_path / "t" / "w" / "2.parquet", write_statistics=["a", "n", "i"])
    types = {"a": pa.int64(), "n": pa.int64(), "s": pa.string(), "i": pa.int64(), "gone": pa.int64()}
    [ranges] = root.column_ranges("t", [("w", ["1.parquet", "2.parquet"])], types)
    assert {name: (low.as_py(), high.as_py()) for name, (low, high) in ranges.items()} == {"a": (1, 12)}
    [only_first] = root.column_ranges("t", [("w", ["1.parquet"])], {"s": pa.string()})
    assert (only_first["s"][0].as_py(), only_first["s"][1].as_py()) == ("b", "q")
    with pytest.raises(StorageError, match="footer"):
        root.column_ranges("t", [("w", ["missing.parquet"])], types)
