"""B4: Spark write + commit of one DataFrame vs a plain `df.write.parquet` of it.

A thin wrapper over benchmarks/spark_write.py (its own report: docs/benchmarks/spark_write.md): a
cached DataFrame (id, day, value, name) on Spark local[2], unpartitioned and partitioned by day,
written by `airflow_txn.spark.write` + commit (from begin to the end of commit) and by a plain
`df.write.parquet`, and by the same write through the airflow_txn data source (`via="datasource"`: the
path an object-store root or Spark Connect takes), the three rotating. Full: 2,000,000 rows x 11
repetitions; quick: 200,000 rows x 2. Target: write + commit / plain <= 1.05 (Spark's native writer, the
path local and shared-filesystem roots take); the data source's ratio is reported.
"""

from __future__ import annotations

import shutil
from typing import Any

from benchmarks import _bench

ROW = "B4"
TARGET = 1.05
PLAIN = "plain df.write.parquet"
DATASOURCE = "airflow_txn, data source (via=\"datasource\")"


def run(quick: bool) -> list[dict[str, Any]]:
    rows, reps = (200_000, 2) if quick else (2_000_000, 11)
    why = _bench.missing("pyspark", extra="spark") or (None if shutil.which("java") else "java not found")
    if why:
        return [_bench.not_run(ROW, "write + commit", name, why, target=TARGET if name == _bench.OURS else None)
                for name in (_bench.OURS, PLAIN)]
    from benchmarks import spark_write

    results = spark_write.run(rows, reps)
    out: list[dict[str, Any]] = []
    for layout, r in results.items():
        measure = f"write {rows:,} rows + commit, {layout}"
        split = ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in r["split"].items())
        out.append(_bench.result(ROW, measure, _bench.OURS, r["txn"], ratio=_bench.ratio(r["txn"], r["plain"]),
                                 ratio_of="airflow_txn / plain", target=TARGET, note=f"median split: {split}"))
        out.append(_bench.result(ROW, measure, DATASOURCE, r["datasource"],
                                 ratio=_bench.ratio(r["datasource"], r["plain"]), ratio_of="this / plain",
                                 note="Python workers write the part files through pyarrow.fs"))
        out.append(_bench.result(ROW, measure, PLAIN, r["plain"]))
    return out


NOTES = """\
**The data source (2026-11-27, the full run below):** 2.17x plain unpartitioned, 1.01x partitioned by day.
Its tasks move every row from the JVM to a Python worker as Arrow and encode the Parquet there (pyarrow),
which costs about what Spark's whole native write does when there is nothing else to do; partitioned, it
skips the sort by the partition column that Spark's native writer makes, and comes out even. It is the
path for object-store roots and Spark Connect (D12); local and shared-filesystem roots keep the native
writer (the `airflow_txn` row, 1.03x), which is why `via="auto"` takes it there. Not measured yet: the data
source writing to the S3 server (B4 runs Spark local[2] on the local disk only).

The transactional side adds a fixed cost (begin, the schema check, the write dir and its sidecar,
listing the write dir and reading the Parquet footers, registration, commit: the split in the
note column) that does not grow with the rows written, only with files and parts; at 2,000,000
rows it is a few percent of the write, so the ratio sits around the 1.05 target and moves by
several percent between runs on a shared 2-CPU machine (the earlier dedicated run in
docs/benchmarks/spark_write.md measured 0.99 and 1.01). The quick mode's 200,000 rows make the
fixed cost a larger share: its ratio is higher by construction and only gated at twice the target.
"""
