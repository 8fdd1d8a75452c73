"""B12: a Spark read query of a day-partitioned table through airflow_txn vs a plain read of Hive-partitioned files.

(Issue 19 calls it "B10 read"; B10 was taken by the S3 commit row.) One table (id long, day string,
value double, name string) partitioned by `day` (20 days), built from 5 appends, each its own
transaction (txn + commit), so the table is 100 parts (5 x 20 partitions), each of Spark's files of that
append and day. The plain copy holds the same rows written the same way: 5 x
`df.write.mode("append").partitionBy("day").parquet(dir)`, so both sides have as many files. Spark
local[2] on the local disk; nothing cached. Two queries, each timed from building the DataFrame (the
catalog look-up, or Spark's listing and partition discovery) to the end of `collect()`:

group by day   `df.groupBy("day").agg(count("*"), sum("value"))`: the partition column is needed
sum(value)     `df.agg(sum("value"))`: no partition column

Contenders, interleaved (repetition r of all six before r+1 of any, the order rotating):
airflow_txn            `airflow_txn.spark.read(spark, wh, table, via="native")` (frames.parts_frame: one
                       Parquet scan of exactly the visible parts' files, `day` from Spark's own partition
                       discovery, since every value here comes back exactly from its directory name)
airflow_txn, data source   the same with via="datasource" (the "airflow_txn" Python data source: the parts
                       packed into Spark partitions as Spark packs a native scan's files, read by Python
                       workers through pyarrow and handed to the JVM as Arrow)
plain                  `spark.read.parquet(dir)` (Spark's own partition discovery)

Full: 2,000,000 rows, 3 repetitions; quick: 200,000 rows, 3. Every contender's answers are checked equal
before timing (that run is the warm-up). Target: airflow_txn / plain <= 1.2 for both queries on both paths.
"""

from __future__ import annotations

import shutil
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks import _bench

ROW = "B12"
TARGET = 1.2
DAYS = 20
APPENDS = 5
TABLE = "bench.events"
NATIVE = _bench.OURS
DATASOURCE = "airflow_txn, data source (via=\"datasource\")"
PLAIN = "plain spark.read.parquet"
GROUP_BY = "group by day: count(*), sum(value)"
SUM = "sum(value), no partition column"
GATES = {(GROUP_BY, NATIVE): 2.4, (SUM, NATIVE): 2.4, (GROUP_BY, DATASOURCE): 25.0, (SUM, DATASOURCE): 25.0}
"""--quick's gate per (query, path). Native: twice the target (quick runs reach 0.9-1.0 since the partition
columns come from Spark's discovery; tests/spark/test_partition_discovery.py checks the plan itself). Data
source: about twice what quick runs reached (10.4, 11.6 at 200,000 rows, where the fixed costs NOTES name weigh
most), since the 1.2 target is out of reach for the reasons NOTES give; CI still catches a regression."""


def run(quick: bool) -> list[dict[str, Any]]:
    rows, reps = (200_000, 3) if quick else (2_000_000, 3)
    queries = (GROUP_BY, SUM)
    contenders = (NATIVE, DATASOURCE, PLAIN)
    why = _bench.missing("pyspark", extra="spark") or (None if shutil.which("java") else "java not found")
    if why:
        return [_bench.not_run(ROW, q, name, why, target=None if name == PLAIN else TARGET)
                for q in queries for name in contenders]
    from benchmarks import spark_write

    spark = spark_write._spark()
    try:
        with _bench.scratch("b12-") as base:
            wh, plain_dir, facts = _build(spark, base, rows)
            try:
                fns = _contenders(spark, wh, plain_dir)
                expected = {q: _answer(fns[(q, PLAIN)][1]()) for q in queries}
                for (q, name), (_, query) in fns.items():
                    got = _answer(query())
                    if got != expected[q]:
                        raise AssertionError(f"{name} answers {q} differently: {got[:3]}... vs {expected[q][:3]}...")
                facts.update(_plans(spark, wh))
                samples = _bench.interleave({f"{q} | {name}": timed for (q, name), (timed, _) in fns.items()},
                                            reps=reps, warmup=0)  # the answers' check above was the warm-up
            finally:
                wh.close()
    finally:
        spark.stop()
    return _rows(samples, rows, facts)


def _frame(spark: Any, start: int, count: int) -> Any:
    from pyspark.sql import functions as F

    return spark.range(start, start + count, numPartitions=2).select(
        F.col("id"),
        F.date_format(F.date_add(F.lit("2024-01-01").cast("date"), (F.col("id") % DAYS).cast("int")),
                      "yyyy-MM-dd").alias("day"),
        (F.col("id") * 0.5).alias("value"),
        F.concat(F.lit("customer-"), (F.col("id") % 100_000).cast("string")).alias("name"),
    )


def _build(spark: Any, base: Path, rows: int) -> tuple[Any, Path, dict[str, Any]]:
    """The table (APPENDS transactions of rows / APPENDS rows each) and the plain copy of the same appends."""
    import airflow_txn
    import airflow_txn.spark as txn_spark

    wh = airflow_txn.Warehouse.open(catalog=f"sqlite:///{base / 'catalog.db'}", root=str(base / "wh"))
    plain_dir = base / "plain"
    each = rows // APPENDS
    for i in range(APPENDS):
        df = _frame(spark, i * each, each)
        if i == 0:
            wh.create_table(TABLE, txn_spark.to_arrow_schema(df.schema), partition_by=["day"])
        with wh.begin(label=f"b12-append-{i}") as t:
            txn_spark.write(df, t, TABLE, via="native")
        df.write.mode("append").partitionBy("day").parquet(str(plain_dir))
    from airflow_txn.core.adapter import plan_read

    plan = plan_read(wh, TABLE)
    facts = {"parts": len(plan.parts), "files": sum(len(p.files) for p in plan.parts),
             "plain files": sum(1 for p in plain_dir.rglob("*.parquet"))}
    return wh, plain_dir, facts


Query = Callable[[], list[Any]]
SPLITS: dict[tuple[str, str], list[tuple[float, float]]] = {}
"""(seconds building the DataFrame, seconds of collect()) per timed run, by (query, contender)."""


def _contenders(spark: Any, wh: Any, plain_dir: Path) -> dict[tuple[str, str], tuple[Callable[[], float], Query]]:
    """{(query, contender): (timed run, the query's rows)}: each builds its DataFrame afresh (the catalog
    look-up or Spark's listing is part of a read) and collects the answer; the timed run records its split
    (build, collect) in SPLITS."""
    from pyspark.sql import functions as F

    import airflow_txn.spark as txn_spark

    frames: dict[str, Callable[[], Any]] = {
        NATIVE: lambda: txn_spark.read(spark, wh, TABLE, via="native"),
        DATASOURCE: lambda: txn_spark.read(spark, wh, TABLE, via="datasource"),
        PLAIN: lambda: spark.read.parquet(str(plain_dir)),
    }
    SPLITS.clear()
    out: dict[tuple[str, str], tuple[Callable[[], float], Query]] = {}
    for q, shape in SHAPES.items():
        for name, frame in frames.items():
            def query(shape: Callable[[Any, Any], Any] = shape, frame: Callable[[], Any] = frame) -> list[Any]:
                return list(shape(frame(), F).collect())

            def timed(shape: Callable[[Any, Any], Any] = shape, frame: Callable[[], Any] = frame,
                      key: tuple[str, str] = (q, name)) -> float:
                with _bench.Timer() as build:
                    df = shape(frame(), F)
                with _bench.Timer() as collect:
                    df.collect()
                SPLITS.setdefault(key, []).append((build.seconds, collect.seconds))
                return build.seconds + collect.seconds

            out[(q, name)] = (timed, query)
    return out


SHAPES: dict[str, Callable[[Any, Any], Any]] = {
    GROUP_BY: lambda df, F: df.groupBy("day").agg(F.count("*").alias("n"), F.sum("value").alias("total")),
    SUM: lambda df, F: df.agg(F.sum("value").alias("total")),
}
"""The two queries, on a DataFrame `df` (F: pyspark.sql.functions)."""


def _answer(rows: list[Any]) -> list[tuple[Any, ...]]:
    """Rows comparable across contenders: floats rounded, a day as text (plain partition discovery infers a
    date; the table declares a string)."""
    return sorted(tuple(round(v, 3) if isinstance(v, float) else v if isinstance(v, int) else str(v) for v in row)
                  for row in rows)


def _plans(spark: Any, wh: Any) -> dict[str, str]:
    """{"query | contender": what Spark's physical plan does} for the airflow_txn queries: whether the native
    path joins the partition values on (and reads the file metadata), how many Spark partitions the data
    source's Python scan has."""
    from pyspark.sql import functions as F

    import airflow_txn.spark as txn_spark

    out: dict[str, str] = {}
    for q, shape in SHAPES.items():
        native = shape(txn_spark.read(spark, wh, TABLE, via="native"), F)
        plan = str(native._jdf.queryExecution().executedPlan().toString())
        found = ["plan: broadcast join on _metadata.file_path" if "BroadcastHashJoin" in plan
                 else "plan: no join" + ("; day from Spark's partition discovery" if "_metadata" not in plan else "")]
        if "_tmp_metadata_row_index" in plan:
            found.append("the scan also reads _metadata (row_index too) though the query needs only value")
        out[f"{q} | {NATIVE}"] = "; ".join(found)
        source = txn_spark.read(spark, wh, TABLE, via="datasource")
        plan = str(shape(source, F)._jdf.queryExecution().executedPlan().toString())
        columns = plan.split("BatchScan airflow_txn[", 1)[-1].split("]", 1)[0] if "BatchScan" in plan else "?"
        partitions = source.rdd.getNumPartitions()
        out[f"{q} | {DATASOURCE}"] = (f"plan: Python data-source scan, {partitions} Spark partitions, "
                                      f"columns read: {columns}")
    return out


def _split(q: str, name: str) -> str:
    found = SPLITS.get((q, name), [])
    if not found:
        return ""
    build = statistics.median(b for b, _ in found) * 1000
    collect = statistics.median(c for _, c in found) * 1000
    return f"median split: build the DataFrame {build:.0f} ms, collect {collect:.0f} ms"


def _rows(samples: dict[str, list[float]], rows: int, facts: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    layout = (f"{facts['parts']} parts in {facts['files']} files; plain: {facts['plain files']} files")
    for q in (GROUP_BY, SUM):
        measure = f"{q}, {rows:,} rows, {DAYS} days"
        plain = samples[f"{q} | {PLAIN}"]
        for name in (NATIVE, DATASOURCE):
            mine = samples[f"{q} | {name}"]
            out.append(_bench.result(ROW, measure, name, mine, ratio=_bench.ratio(mine, plain),
                                     ratio_of="airflow_txn / plain", target=TARGET, gate=GATES[(q, name)],
                                     note=f"{_split(q, name)}; {facts.get(f'{q} | {name}', '')}"))
        out.append(_bench.result(ROW, measure, PLAIN, plain, note=f"{_split(q, PLAIN)}; {layout}"))
    return out


NOTES = """\
**Before/after the read planner (issue 31; 2026-11-29, quick size: 200,000 rows, 3 repetitions, side by side in
one session: main before the issue's work (00d04b6) and after it, alternating, two rounds each; load average
10-16 from other jobs).** Ratio to plain `spark.read.parquet`, round 1 / round 2: native group by before 1.44 /
1.08, after 1.06 / 1.19; native sum before 0.99 / 1.22, after 0.90 / 1.06; data source group by before 0.90 /
0.80, after 0.77 / 0.73; data source sum before 0.99 / 1.04, after 1.01 / 0.79. No path is slower after (within
this noise); the data-source rows moved toward (here below) the 1.2 target, as planning now takes 2 catalog round
trips instead of 4. The full-size rows below predate it.

**Full run (2026-11-27 15:35 UTC, the table above; load average 4 from other work on this 2-core machine, 3
interleaved repetitions).** Native path: **1.01x plain for the group by, 1.10x for sum(value): the 1.2 target is
met on the native path** (it was 2.79x and 3.07x in the run of 12:17 UTC). Data source: 1.52x and 1.94x, not met.

*Native path: the partition column from Spark's own partition discovery.* `frames.parts_frame` now reads the
parts' files with the table's schema and `basePath` = the table's directory when every partition value comes back
exactly from its `col=value` directory name (airflow_txn/spark/discovery.py; docs/DESIGN.md, D12): here every
`day` is ASCII, so the plan has no join and no `_metadata` column, and `day` costs what it costs the plain read.
Before (commit cd6ef5c, the listing job already gone), `day` came from a broadcast join of `_metadata.file_path`
with a driver-built file -> part table (a Python RDD, deduplicated before the BroadcastExchange): an extra job per
query, and the scan read the whole `_metadata` struct even for sum(value).

*Before and after, same machine, full size, runs alternated* (old code from an export of cd6ef5c, the same
`run.py --only B12`): old 2.81x (group by) and 1.56x (sum) at load 8; new 0.88x / 1.13x and 1.25x / 1.02x in two
runs at load 8, 1.01x / 1.10x in the table's run at load 4. Three repetitions move a ratio by 0.2-0.3 under load,
so a probe of the native and plain contenders only, 15 interleaved repetitions at 2,000,000 rows (load 5-7):
**1.14x for the group by (977 ms against 856 ms), 0.92x for sum(value) (633 ms against 686 ms)**. What is left
of the group by's gap: building the DataFrame (190 ms against 114 ms: the catalog look-up and Spark's status of
200 files given by name, against listing the plain directory) and about 95 ms of collect, not found: `day` being a
string here and a date in the plain read (its partition discovery infers dates) does not explain it (a second
probe, 11 repetitions: plain with `day` a string by the schema 500 ms, plain 494 ms, native 596 ms).

*Native path, when discovery does not apply:* a table with a null, an empty, a hashed (over 96 characters
encoded) or a non-ASCII partition value in the core's layout, or a Spark write's timestamp directory (in the
writer's session time zone), still gets its partition values by the join, as every table did before (the old
code's runs above: 2.81x at full size, 1.82x in a --quick run at 200,000 rows, for the group by). A filter on a
partition column prunes no file there.

*Data source (collect 0.8 s in the table, 2.2-2.9 s at load 8):* parts are now packed into Spark tasks as Spark
packs a native scan's files (the plan's partitions in the note column); each task reads its parts through pyarrow
(all four columns: the reader prunes no columns and pushes no filters, see `_Reader` in datasource.py, DESIGN D12)
and sends Arrow batches to the JVM. Not investigated further here.
"""
