"""B5: rollback of a transaction holding 1,000 staged parts, and the same with 10x the data per part.

Each repetition stages 1,000 parts (a table partitioned by `k`, 1,000 distinct values, staged by 10
appends of 100 partitions each; set-up, not timed), then times `t.rollback()`: the decision
(state active -> rolled_back) and RollbackCSN stamped on every created part, metadata only (DESIGN
invariant 5); the files are left for vacuum. The small and the large transaction alternate. Before
the clock starts, `os.sync()` lets the kernel finish writing the staged files back to disk (on two
cores, flushing 10x the data would otherwise be measured as part of the next thing that runs).
Targets: <= 50 ms each, and flat in data size: large / small <= 1.2.
"""

from __future__ import annotations

import os
from typing import Any

import pyarrow as pa

from airflow_txn import Warehouse
from benchmarks import _bench, _peers

ROW = "B5"
PARTS = 1000
TARGET_MS = 50.0
TARGET_FLAT = 1.2
TABLE = "b5.events"
SMALL, LARGE = 100, 1000  # rows per part


def staged(rows_per_part: int, batch: int) -> pa.Table:
    """`rows_per_part` rows for each of 100 partitions starting at 100 * batch."""
    n = 100 * rows_per_part
    return pa.table({
        "k": pa.array([100 * batch + i % 100 for i in range(n)], pa.int64()),
        "id": pa.array(range(n), pa.int64()),
        "payload": pa.array([f"row-{i:08d}" for i in range(n)]),
    })


def run(quick: bool) -> list[dict[str, Any]]:
    reps = 3 if quick else 11
    data = {size: [staged(size, b) for b in range(PARTS // 100)] for size in (SMALL, LARGE)}
    with _bench.scratch("b5-") as base:
        wh = _peers.warehouse(base)
        try:
            wh.create_table(TABLE, data[SMALL][0].schema, partition_by=["k"])
            contenders = {f"{PARTS:,} parts x {size:,} rows": _rollback(wh, batches) for size, batches in data.items()}
            samples = _bench.interleave(contenders, reps=reps, warmup=0 if quick else 1)
        finally:
            wh.close()
    small, large = samples.values()
    (small_name, large_name) = contenders
    measure = f"rollback of {PARTS:,} staged parts"
    return [
        _bench.result(ROW, measure, f"{_bench.OURS}, {small_name}", small, target=TARGET_MS, target_on="median_ms"),
        _bench.result(ROW, measure, f"{_bench.OURS}, {large_name}", large, target=TARGET_MS, target_on="median_ms"),
        _bench.result(ROW, f"{measure}: flat in data size", f"{_bench.OURS}, 10x the data per part", large,
                      ratio=_bench.ratio(large, small), ratio_of=f"({large_name}) / ({small_name})",
                      target=TARGET_FLAT),
    ]


def _rollback(wh: Warehouse, batches: list[pa.Table]) -> Any:
    def one() -> float:
        t = wh.begin(label="b5")
        for batch in batches:
            t.append(TABLE, batch)
        os.sync()  # the staged files' write-back is not the rollback's: let it finish off the clock
        seconds = _bench.timed(t.rollback)
        assert t.state == "rolled_back"
        return seconds

    return one


NOTES = """\
Rollback is metadata only (invariant 5) and needs four catalog transactions whatever the size of
the transaction: the decision (a compare-and-swap of the state, row-locked), the list of tables
with pending parts, per table one `UPDATE ... SET creation_csn = RollbackCSN WHERE table_id = ?
AND creation_tid = ? AND creation_csn IS NULL` (found through the `creation_tid` index) plus the
release of removal locks, and `cleanup_done`. Its cost is O(parts): rewriting 1,000 part rows and
their index entries, the bulk of the time; no file is opened, so the size of the data does not
enter (the ratio of the two medians is noise around 1). The files are deleted later by vacuum.
"""
