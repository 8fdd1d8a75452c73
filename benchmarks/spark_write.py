"""Benchmark: `airflow_txn.spark.write` + commit against a plain `df.write.parquet` of the same DataFrame.

    .venv/bin/python benchmarks/spark_write.py [--rows 2000000] [--reps 11] [--out docs/benchmarks/spark_write.md]

The DataFrame (id, day, value, name; 8 distinct days) is cached in memory first, so both sides time
the write alone. Two layouts: unpartitioned, and partitioned by day (Spark's partitionBy on both
sides). Per repetition the two contenders run back to back in alternating order (interleaved), after
one warm-up run of each. The transactional side is timed from begin to the end of commit on an
embedded warehouse (SQLite catalog, local storage root); the plain side writes a fresh directory.
Reported: every timing, the medians, the ratio of the medians (target <= 1.05), the median of the
paired per-repetition ratios, and the median split of the transactional side into begin / Spark job /
driver bookkeeping / commit. `run()` also times the data-source write (via="datasource") and, given an
S3 root with its storage options (B4 passes one on a SeaweedFS server), the data source writing there.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def _spark() -> Any:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # the data source's workers import airflow_txn
    if str(REPO) not in sys.path:  # run as a script: benchmarks/ is first on sys.path, not the checkout
        sys.path.insert(0, str(REPO))
    from benchmarks import _bench

    _bench.workers_import_this_checkout()  # ... from this checkout (before the JVM starts: it passes it on)
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("airflow_txn-benchmark")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2").config("spark.driver.memory", "2g")
             .config("spark.driver.host", "127.0.0.1").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    found = spark.sparkContext.parallelize([0], 1).map(lambda _: __import__("airflow_txn").__file__).collect()[0]
    if not str(found).startswith(str(REPO)):
        raise RuntimeError(f"Spark's Python workers import airflow_txn from {found}, not from {REPO} (a JVM started "
                           "before PYTHONPATH was set?): the data source's numbers would measure other code")
    return spark


def _frame(spark: Any, rows: int) -> Any:
    from pyspark.sql import functions as F

    df = spark.range(0, rows, numPartitions=4).select(
        F.col("id"),
        F.date_format(F.date_add(F.lit("2024-01-01").cast("date"), (F.col("id") % 8).cast("int")),
                      "yyyy-MM-dd").alias("day"),
        (F.col("id") * 0.5).alias("value"),
        F.concat(F.lit("customer-"), (F.col("id") % 100_000).cast("string")).alias("name"),
    )
    df.cache()
    df.count()
    return df


def _timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


class Contenders:
    """The ways of writing the same DataFrame, for one layout: plain, native + commit, data source + commit
    (and, given `s3` = {"root": "s3://bucket/...", "storage_options": {...}}, the data source to that root)."""

    def __init__(self, df: Any, work: Path, partition_by: list[str], s3: dict[str, Any] | None = None) -> None:
        import airflow_txn
        from airflow_txn.spark import to_arrow_schema

        self.df, self.work, self.partition_by = df, work, partition_by
        self.wh = airflow_txn.Warehouse.open(catalog=f"sqlite:///{work / 'catalog.db'}", root=str(work / "wh"))
        self.table = "bench.events_" + ("by_day" if partition_by else "flat")
        self.wh.create_table(self.table, to_arrow_schema(df.schema), partition_by=partition_by)
        self.runs = 0
        self.split: list[dict[str, float]] = []
        self.datasource_table = self.table + "_ds"
        self.wh.create_table(self.datasource_table, to_arrow_schema(df.schema), partition_by=partition_by)
        self.s3_wh: Any = None
        if s3 is not None:  # the data source writing to an object store: catalog here, parts in the bucket
            self.s3_wh = airflow_txn.Warehouse.open(catalog=f"sqlite:///{work / 'catalog-s3.db'}",
                                                    root=f"{s3['root']}/{work.name}",
                                                    storage_options=s3["storage_options"])
            self.s3_wh.create_table(self.datasource_table, to_arrow_schema(df.schema), partition_by=partition_by)

    def plain(self) -> float:
        self.runs += 1
        target = self.work / f"plain-{self.runs}"
        writer = self.df.write.mode("overwrite")
        if self.partition_by:
            writer = writer.partitionBy(*self.partition_by)
        elapsed = _timed(lambda: writer.parquet(str(target)))
        shutil.rmtree(target)
        return elapsed

    def transactional(self) -> float:
        import airflow_txn.spark as txn_spark
        from airflow_txn.spark import writer

        job = 0.0
        run_job = writer._run_job

        def timed_job(*args: Any) -> None:
            nonlocal job
            job = _timed(lambda: run_job(*args))

        writer._run_job = timed_job  # the split only; the total is timed around everything
        try:
            start = time.perf_counter()
            t = self.wh.begin(label="benchmark")
            begun = time.perf_counter()
            txn_spark.write(self.df, t, self.table)
            written = time.perf_counter()
            t.commit()
            end = time.perf_counter()
        finally:
            writer._run_job = run_job
        self.split.append({"begin": begun - start, "spark job": job, "bookkeeping": written - begun - job,
                           "commit": end - written})
        return end - start


    def datasource(self) -> float:
        """The same write through the airflow_txn data source (via="datasource": Python workers write the
        part files through pyarrow.fs, the driver registers them), + commit."""
        import airflow_txn.spark as txn_spark

        start = time.perf_counter()
        t = self.wh.begin(label="benchmark-datasource")
        txn_spark.write(self.df, t, self.datasource_table, via="datasource")
        t.commit()
        return time.perf_counter() - start

    def datasource_s3(self) -> float:
        """The data-source write + commit with the warehouse root on the S3 server: every task PUTs its part
        files to the bucket through pyarrow.fs, the catalog stays a local SQLite file."""
        import airflow_txn.spark as txn_spark

        start = time.perf_counter()
        t = self.s3_wh.begin(label="benchmark-datasource-s3")
        txn_spark.write(self.df, t, self.datasource_table, via="datasource")
        t.commit()
        return time.perf_counter() - start

    def close(self) -> None:
        self.wh.close()
        if self.s3_wh is not None:
            self.s3_wh.close()


def run(rows: int, reps: int, s3: dict[str, Any] | None = None) -> dict[str, Any]:
    """{layout: {contender: [seconds, ...], "split": {...}}}; with `s3` (Contenders) also "datasource_s3"."""
    spark = _spark()
    df = _frame(spark, rows)
    results: dict[str, Any] = {}
    work = Path(tempfile.mkdtemp(prefix="airflow_txn-bench-"))
    try:
        for name, partition_by in (("unpartitioned", []), ("partitioned by day (8 partitions)", ["day"])):
            c = Contenders(df, work / name.split()[0], partition_by, s3)
            fns: dict[str, Callable[[], float]] = {"plain": c.plain, "txn": c.transactional,
                                                   "datasource": c.datasource}
            if s3 is not None:
                fns["datasource_s3"] = c.datasource_s3
            for fn in fns.values():  # warm-up
                fn()
            c.split.clear()
            times: dict[str, list[float]] = {key: [] for key in fns}
            for rep in range(reps):
                order = list(fns)[rep % len(fns):] + list(fns)[:rep % len(fns)]  # who goes first rotates
                for key in order:
                    times[key].append(fns[key]())
                print(f"{name} rep {rep + 1}: " + "  ".join(f"{k} {v[-1]:.3f}s" for k, v in times.items()),
                      flush=True)
            split = {k: statistics.median(s[k] for s in c.split) for k in c.split[0]}
            results[name] = {**times, "split": split}
            c.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
        spark.stop()
    return results


def _versions() -> dict[str, str]:
    import pyarrow
    import pyspark
    import sqlalchemy

    java = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False).stderr.splitlines()
    return {"python": platform.python_version(), "pyspark": pyspark.__version__, "pyarrow": pyarrow.__version__,
            "sqlalchemy": sqlalchemy.__version__, "java": java[0] if java else "?",
            "os": f"{platform.system()} {platform.release()}", "cpus": str(os.cpu_count())}


def report(results: dict[str, Any], rows: int, reps: int, command: str) -> str:
    lines = ["# Benchmark: Spark write + commit vs plain `df.write.parquet`", "",
             f"Command: `{command}`", "",
             "Versions: " + ", ".join(f"{k} {v}" for k, v in _versions().items()), "",
             f"{rows:,} rows (id long, day string, value double, name string), cached; Spark `local[2]`; "
             f"embedded warehouse (SQLite catalog, local root); {reps} interleaved repetitions after one warm-up "
             "each. The transactional time runs from `begin` to the end of `commit`.", "",
             "| layout | plain median (s) | write + commit median (s) | ratio of medians | target (<= 1.05) "
             "| median of paired ratios |",
             "|---|---|---|---|---|---|"]
    for name, r in results.items():
        ratio = statistics.median(r["txn"]) / statistics.median(r["plain"])
        paired = statistics.median(t / p for t, p in zip(r["txn"], r["plain"], strict=True))
        lines.append(f"| {name} | {statistics.median(r['plain']):.3f} | {statistics.median(r['txn']):.3f} | "
                     f"{ratio:.3f} | {'met' if ratio <= 1.05 else 'MISSED'} | {paired:.3f} |")
    lines += ["", "Median split of the transactional side (s); the fixed cost is begin + bookkeeping + commit, "
              "everything but the Spark job, as a share of the median plain write:", "",
              "| layout | begin | Spark job | driver bookkeeping | commit | fixed cost | share |",
              "|---|---|---|---|---|---|---|"]
    for name, r in results.items():
        s = r["split"]
        fixed = s["begin"] + s["bookkeeping"] + s["commit"]
        lines.append(f"| {name} | {s['begin']:.3f} | {s['spark job']:.3f} | {s['bookkeeping']:.3f} | "
                     f"{s['commit']:.3f} | {fixed:.3f} | {100 * fixed / statistics.median(r['plain']):.1f}% |")
    lines += ["", "Where the fixed cost goes: `begin` and `commit` are catalog transactions (SQLite with fsync); the "
              "driver bookkeeping is the schema check, the guard projection (only when a column needs one: a "
              "string partition column, or a non-nullable column the DataFrame may hold nulls in; Spark analyses "
              "the extra projection), the write dir and its sidecar, the lease keeper, listing the write dir and "
              "reading the Parquet footers, and the registration transaction. None of it grows with the rows "
              "written, only with files and parts, so the ratio falls as jobs grow. Repetitions on this shared "
              "2-CPU machine vary by tens of percent (other test suites run concurrently), which is why single "
              "ratios, and even the ratio of medians, can come out below 1. The median of the paired ratios "
              "(each repetition's two runs back to back) cancels most of that drift; the split above is the "
              "steadiest measure of the overhead.", "", "Every timing (s), in run order:", ""]
    for name, r in results.items():
        lines.append(f"- {name}: plain {', '.join(f'{x:.3f}' for x in r['plain'])}; "
                     f"write + commit {', '.join(f'{x:.3f}' for x in r['txn'])}")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--reps", type=int, default=11)
    parser.add_argument("--out", default=str(REPO / "docs" / "benchmarks" / "spark_write.md"))
    args = parser.parse_args()
    command = "python " + " ".join([os.path.relpath(sys.argv[0], REPO), *sys.argv[1:]])
    text = report(run(args.rows, args.reps), args.rows, args.reps, command)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
