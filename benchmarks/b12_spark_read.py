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
                       Parquet scan of exactly the visible parts' files, the partition values joined on)
airflow_txn, data source   the same with via="datasource" (the "airflow_txn" Python data source: one Spark
                       partition per part, read by a Python worker through pyarrow and handed to the JVM
                       as Arrow)
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
GATES = {(GROUP_BY, NATIVE): 6.0, (SUM, NATIVE): 8.0, (GROUP_BY, DATASOURCE): 25.0, (SUM, DATASOURCE): 25.0}
"""--quick's gate per (query, path): about twice what quick runs reach (2.6, 3.7, 10.4, 11.6 at 200,000 rows,
where the fixed costs NOTES name weigh most), since the 1.2 target is out of reach for the reasons NOTES give;
CI still catches a regression."""


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
        found = ["plan: broadcast join on _metadata.file_path" if "BroadcastHashJoin" in plan else "plan: no join"]
        if "_tmp_metadata_row_index" in plan:
            found.append("the scan also reads _metadata (row_index too) though the query needs only value")
        out[f"{q} | {NATIVE}"] = "; ".join(found)
        source = txn_spark.read(spark, wh, TABLE, via="datasource")
        plan = str(shape(source, F)._jdf.queryExecution().executedPlan().toString())
        columns = plan.split("BatchScan airflow_txn[", 1)[-1].split("]", 1)[0] if "BatchScan" in plan else "?"
        partitions = source.rdd.getNumPartitions()
        out[f"{q} | {DATASOURCE}"] = (f"plan: Python data-source scan, {partitions} Spark partitions (one per part), "
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
**Full run (2026-11-27, the table above; the machine's load average was 63 when it started, from other work).**
Native path: 2.79x plain for the group by, 3.07x for sum(value); data source: 8.7x and 10.0x. No path meets the
1.2 target. Where the time goes, from the split and the plans in the note column and probes on 200,000 rows:

*Native path, building the DataFrame (1.4-1.5 s against 0.16-0.17 s plain, more than the whole plain query):*
`frames.parts_frame` hands Spark every part file by name (`spark.read.parquet(*200 paths)`). With more paths than
`spark.sql.sources.parallelPartitionDiscovery.threshold` (32) Spark lists them with a distributed job: building
the scan took 2.2-2.5 s with the default threshold and 0.2-0.3 s with the threshold raised above the path count
(same 200 files, same session, a loaded machine). The catalog already knows every file, so nothing needs listing;
not changed here (airflow_txn/spark/frames.py is outside this benchmark's scope). Without that job the native path
would be roughly 1.6x (group by) and 1.3x (sum) plain, an estimate from the split.

*Native path, group by day (collect 1.40 s against 0.83 s):* the partition values come from a broadcast join of
`_metadata.file_path` with a file -> part table that the driver builds with `spark.createDataFrame` (a Python RDD,
deduplicated by an Exchange + SortAggregate before the BroadcastExchange), so every such query runs an extra job
with a Python worker; the plain read gets `day` from the directory names for free.

*Native path, sum(value) (collect 0.81 s against 0.63 s):* the join is gone from the plan, but the scan still
reads the `_metadata` struct with every field (file_path ... row_index: `_tmp_metadata_row_index` in the
FileScan), though the query needs only `value`; the plain scan reads `value` alone.

*Data source (collect 7.6-8.7 s):* one Spark partition per part (100 here), each a Python task that reads its
whole part through pyarrow (all four columns: the reader prunes no columns and pushes no filters, see `_Reader` in
datasource.py), converts it to Arrow batches and sends them to the JVM. On 2 cores that is 100 Python tasks
against the plain scan's few vectorized file splits: about 10x at either size, reported, not reachable by tuning
the benchmark.
"""
