"""B9: splitting the rows of one staging call by partition, as the number of partitions grows.

`split_by_partition` (airflow_txn/model/partitioning.py) runs on every append, overwrite and update of a
partitioned table before anything is written. Timed: the split of 200,000 rows (an int64 partition
key, an id and a short string) into 250 and into 2,000 partitions, both sizes interleaved, next to
the implementation it replaced (one filter over all rows per partition, kept here as the "before"
contender). Target: flat in the number of partitions, (2,000 partitions) / (250 partitions) <= 1.5.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from airflow_txn.model.partitioning import split_by_partition, value_to_text
from benchmarks import _bench

ROW = "B9"
TARGET_FLAT = 1.5
BEFORE = "one filter per partition (before issue 16)"


def rows(count: int, partitions: int) -> pa.Table:
    return pa.table({
        "k": pa.array([i % partitions for i in range(count)], pa.int64()),
        "id": pa.array(range(count), pa.int64()),
        "payload": pa.array([f"row-{i:08d}" for i in range(count)]),
    })


def filter_per_partition(data: pa.Table, partition_by: Sequence[str]) -> list[tuple[dict[str, Any], pa.Table]]:
    """The split before issue 16: distinct keys by a group-by, then one filter of every row per key."""
    keys = [f"k{i}" for i in range(len(partition_by))]
    grouped = data.select(list(partition_by)).rename_columns(keys).group_by(keys).aggregate([]).to_pylist()
    out = []
    for row in grouped:
        mask = None
        for col, key in zip(partition_by, keys, strict=True):
            value = row[key]
            cond = pc.is_null(data[col]) if value is None else pc.equal(data[col], pa.scalar(value, data[col].type))
            cond = pc.fill_null(cond, False)
            mask = cond if mask is None else pc.and_(mask, cond)
        out.append(({col: value_to_text(row[k]) for col, k in zip(partition_by, keys, strict=True)},
                    data.filter(mask)))
    return out


def _timed(split: Callable[[pa.Table, Sequence[str]], list[Any]], data: pa.Table, expected: int) -> Callable[[], float]:
    def one() -> float:
        with _bench.Timer() as timer:
            pieces = split(data, ["k"])
        assert len(pieces) == expected
        return timer.seconds

    return one


def run(quick: bool) -> list[dict[str, Any]]:
    count, sizes, reps = (20_000, (25, 200), 5) if quick else (200_000, (250, 2_000), 11)
    small, large = sizes
    data = {size: rows(count, size) for size in sizes}
    contenders = {f"{size:,} partitions": _timed(split_by_partition, data[size], size) for size in sizes}
    contenders |= {f"{BEFORE}, {size:,} partitions": _timed(filter_per_partition, data[size], size) for size in sizes}
    samples = _bench.interleave(contenders, reps=reps, warmup=1)
    measure = f"split {count:,} rows by partition"
    ours_small, ours_large = samples[f"{small:,} partitions"], samples[f"{large:,} partitions"]
    before_large = samples[f"{BEFORE}, {large:,} partitions"]
    return [
        _bench.result(ROW, measure, f"{_bench.OURS}, {small:,} partitions", ours_small),
        _bench.result(ROW, measure, f"{_bench.OURS}, {large:,} partitions", ours_large),
        _bench.result(ROW, measure, f"{BEFORE}, {small:,} partitions", samples[f"{BEFORE}, {small:,} partitions"]),
        _bench.result(ROW, measure, f"{BEFORE}, {large:,} partitions", before_large,
                      ratio=_bench.ratio(before_large, ours_large), ratio_of="this / airflow_txn, same partitions"),
        _bench.result(ROW, f"{measure}: flat in partitions", f"{_bench.OURS}, {large:,} vs {small:,} partitions",
                      ours_large, ratio=_bench.ratio(ours_large, ours_small),
                      ratio_of=f"({large:,} partitions) / ({small:,} partitions)", target=TARGET_FLAT),
    ]


NOTES = """\
The split is one pass whatever the number of partitions: a single-threaded group-by on the partition
columns collects each combination's row numbers (groups in the order of their first row, numbers in
input order), one `take` puts every row in that order, and each partition is a zero-copy slice of the
result. The old split filtered all rows once per partition, O(rows x partitions): 2.66 s for 200,000
rows into 2,000 partitions on the machine of issue 16. A call with a single partition returns the
input itself.
"""
