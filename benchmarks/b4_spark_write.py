"""B4: Spark write + commit of one DataFrame vs a plain `df.write.parquet` of it.

A thin wrapper over benchmarks/spark_write.py (its own report: docs/benchmarks/spark_write.md): a
cached DataFrame (id, day, value, name) on Spark local[2], unpartitioned and partitioned by day,
written by `airflow_txn.spark.write` + commit (from begin to the end of commit) and by a plain
`df.write.parquet`, and by the same write through the airflow_txn data source (`via="datasource"`: the
path an object-store root or Spark Connect takes), and by the data source with the warehouse root on an
S3 server (SeaweedFS, tests/harness/seaweedfs.py, started for the row outside the timed part; root
`s3://<bucket>/wh`, the endpoint and credentials as storage_options; the catalog stays a local SQLite
file), the four rotating. Plain df.write.parquet cannot write to S3 here (no hadoop-aws jar on the
classpath, and Maven is unreachable), so the S3 row's ratio is against the plain write to the local
disk: it shows what the object store costs on top of the data source. Full: 2,000,000 rows x 11
repetitions; quick: 200,000 rows x 2. Target: write + commit / plain <= 1.05 (Spark's native writer, the
path local and shared-filesystem roots take); the data source's ratios are reported. Without a SeaweedFS
server the S3 row says "not run" and the others still run.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from benchmarks import _bench

ROW = "B4"
TARGET = 1.05
PLAIN = "plain df.write.parquet"
DATASOURCE = "airflow_txn, data source (via=\"datasource\")"
DATASOURCE_S3 = "airflow_txn, data source to S3 (SeaweedFS)"


def run(quick: bool) -> list[dict[str, Any]]:
    rows, reps = (200_000, 2) if quick else (2_000_000, 11)
    why = _bench.missing("pyspark", extra="spark") or (None if shutil.which("java") else "java not found")
    if why:
        return [_bench.not_run(ROW, "write + commit", name, why, target=TARGET if name == _bench.OURS else None)
                for name in (_bench.OURS, PLAIN)]
    from benchmarks import spark_write

    with _bench.scratch("b4-") as base, _s3_root(base) as (s3, why_not_s3):
        results = spark_write.run(rows, reps, s3)
    out: list[dict[str, Any]] = []
    for layout, r in results.items():
        measure = f"write {rows:,} rows + commit, {layout}"
        split = ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in r["split"].items())
        out.append(_bench.result(ROW, measure, _bench.OURS, r["txn"], ratio=_bench.ratio(r["txn"], r["plain"]),
                                 ratio_of="airflow_txn / plain", target=TARGET, note=f"median split: {split}"))
        out.append(_bench.result(ROW, measure, DATASOURCE, r["datasource"],
                                 ratio=_bench.ratio(r["datasource"], r["plain"]), ratio_of="this / plain",
                                 note="Python workers write the part files through pyarrow.fs"))
        if "datasource_s3" in r:
            out.append(_bench.result(ROW, measure, DATASOURCE_S3, r["datasource_s3"],
                                     ratio=_bench.ratio(r["datasource_s3"], r["plain"]), ratio_of="this / plain",
                                     note="root s3://<bucket>/wh on SeaweedFS (one PUT per part file); ratio "
                                          "against the plain write to the LOCAL disk (plain cannot write to S3 "
                                          "here: no hadoop-aws jar)"))
        else:
            out.append(_bench.not_run(ROW, measure, DATASOURCE_S3, why_not_s3 or "no S3 server"))
        out.append(_bench.result(ROW, measure, PLAIN, r["plain"]))
    return out


@contextmanager
def _s3_root(base: Path) -> Iterator[tuple[dict[str, Any] | None, str | None]]:
    """({"root": "s3://<bucket>/wh", "storage_options": {...}}, None) on a SeaweedFS server running for the
    block (as B10 starts it), or (None, why) when it cannot start: the other contenders run anyway."""
    try:
        from tests.harness.seaweedfs import SeaweedFSUnavailable, server
    except ImportError as exc:  # an installed package without the checkout's tests/
        yield None, f"needs the checkout's tests/harness: {exc}"
        return
    with ExitStack() as stack:
        try:
            s3 = stack.enter_context(server(base / "seaweedfs", grace=1.0))
        except SeaweedFSUnavailable as exc:
            why = f"SeaweedFS unavailable: {str(exc).splitlines()[0]}"
        else:
            options = {"endpoint_url": s3.endpoint, "region": "us-east-1", "access_key_id": s3.access_key,
                       "secret_access_key": s3.secret_key}
            yield {"root": f"s3://{s3.bucket()}/wh", "storage_options": options}, None
            return
        yield None, why


NOTES = """\
**Before/after the write plans (issue 31; 2026-11-29, quick size: 200,000 rows x 2, side by side in one session:
main before the issue's work (00d04b6) and after it, alternating, two rounds each; load average 10-16 from
other jobs, so only the pairing means anything).** Ratio to plain `df.write.parquet`, round 1 / round 2:
native unpartitioned before 1.07 / 0.93, after 0.76 / 1.00; native by day before 1.08 / 1.04, after 0.87 /
1.05; data source unpartitioned before 1.17 / 0.85, after 0.71 / 0.95; data source by day before 0.67 / 0.37,
after 0.37 / 0.40; data source to S3 before 1.28 / 1.02 and 0.98 / 0.46, after 0.92 / 0.99 and 0.42 / 0.47. No
path is slower after (within this noise); the plans add one catalog round trip at most per statement and remove
the data source's repeated statement opening.

**The data source (2026-11-27, the full run below):** 1.71x plain unpartitioned, 0.70x partitioned by day (an
earlier full run the same day: 2.17x and 1.01x). Its tasks move every row from the JVM to a Python worker as Arrow
and encode the Parquet there (pyarrow), which costs about what Spark's whole native write does when there is
nothing else to do; partitioned, it skips the sort by the partition column that Spark's native writer makes, and
comes out even or ahead. It is the path for object-store roots and Spark Connect (D12); local and
shared-filesystem roots keep the native writer (the `airflow_txn` row, 0.98x and 1.02x), which is why `via="auto"`
takes it there.

**The data source to S3 (issue 19):** the same write with the root on the SeaweedFS server. Plain Spark has no way
there on this machine (its S3A connector, hadoop-aws, is not on the classpath and Maven is unreachable), so this
row's ratio is against the plain write to the local disk, and what it adds over the local data-source row is the
object store: every task PUTs one object per part file (pyarrow.fs, no rename), the driver registers them in the
catalog (a local SQLite file) and commits. Full run: 2.58 s against 2.32 s for the data source on the local disk
(1.11x), unpartitioned; 3.02 s against 2.23 s (1.35x) partitioned by day, where every task writes one object per
day it holds, so more and smaller PUTs. The ratio to plain (1.89x and 0.95x) is the data source's own cost times
that.

The transactional side adds a fixed cost (begin, the schema check, the write dir and its sidecar,
listing the write dir and reading the Parquet footers, registration, commit: the split in the
note column) that does not grow with the rows written, only with files and parts; at 2,000,000
rows it is a few percent of the write, so the ratio sits around the 1.05 target and moves by
several percent between runs on a shared 2-CPU machine (the earlier dedicated run in
docs/benchmarks/spark_write.md measured 0.99 and 1.01). The quick mode's 200,000 rows make the
fixed cost a larger share: its ratio is higher by construction and only gated at twice the target.
"""
