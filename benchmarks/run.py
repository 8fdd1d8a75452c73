"""Run the benchmark rows side by side with the peers and write docs/BENCHMARKS.md.

    .venv/bin/python benchmarks/run.py                 # every row, full size: docs/benchmarks/results.json
                                                       #   and docs/BENCHMARKS.md
    .venv/bin/python benchmarks/run.py --only B1,B2    # some rows; the others keep their last results
    .venv/bin/python benchmarks/run.py --quick         # CI: small sizes, results in build/benchmarks/ (ignored
                                                       #   by git); exits 1 only if a ratio is worse than
                                                       #   twice its target

Each row is a module benchmarks/b<N>_*.py exposing `run(quick: bool) -> list[dict]` (rows built with
benchmarks/_bench.py), a docstring saying what it measures and, optionally, NOTES (Markdown: findings,
before/after of engine fixes). A row whose module or dependencies are missing, or that fails, shows
as "not run (reason)"; a row that fails also makes the exit code non-zero. Peers need the `bench`
extra: pip install -e '.[bench]'.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib
import json
import os
import platform
import subprocess
import sys
import time
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # `python benchmarks/run.py` puts benchmarks/ first, not the repo
    sys.path.insert(0, str(REPO))

from benchmarks import _bench  # noqa: E402

# id, module, title
ROWS: list[tuple[str, str, str]] = [
    ("B1", "b1_commit_latency", "Commit latency: 3 tables x 1,000-row append, SQLite catalog"),
    ("B2", "b2_commit_vs_history", "Commit cost vs history: commits 901-1000 / commits 1-100"),
    ("B3", "b3_part_lookup", "Visible-part lookup at a latest, mid and early snapshot, 10,000,000 parts (--b3-parts)"),
    ("B4", "b4_spark_write", "Spark write + commit vs plain df.write.parquet"),
    ("B5", "b5_rollback", "Rollback of a transaction with 1,000 staged parts"),
    ("B6", "b6_throughput", "Commit throughput, 8 writers"),
    ("B7", "b7_sensor", "Sensor latency: commit to downstream start"),
    ("B8", "b8_time_travel", "Read of a snapshot 1,000 commits in the past vs the latest"),
    ("B9", "b9_split_partitions", "Split of 200,000 rows by partition: 250 vs 2,000 partitions"),
    ("B10", "b10_s3_commit", "Commit latency on an S3-compatible store (SeaweedFS): 3 tables x 1,000 rows, "
     "with object requests counted"),
    ("B11", "b11_airflow_dag", "Per-task cost in Airflow: a 30-task backfill DAG run with dag.test(), "
     "transactional vs plain Spark writes"),
    ("B12", "b12_spark_read", "Spark read of a day-partitioned table (2,000,000 rows, 100 parts) vs plain "
     "spark.read.parquet"),
    ("B13", "b13_merge", "MERGE of 1 % updated + 0.5 % new rows into a 10,000,000-row table partitioned by day "
     "(keys in 5 % of the days) vs delta-rs"),
    ("B14", "b14_publish", "Publishing to Iceberg and Delta: what it costs a commit, and the lag until other engines "
     "see it"),
    ("B15", "b15_changing_tables", "Changing tables: a column added to 3 tables of 1,000 parts; a read across 5 schema "
     "versions"),
    ("B16", "b16_year", "A year of DAG runs through the engine (fast-forwarded clock): catalog rows, bytes and "
     "costs at the stop day"),
]
RESULTS = REPO / "docs" / "benchmarks" / "results.json"
PAGE = REPO / "docs" / "BENCHMARKS.md"
QUICK_DIR = REPO / "build" / "benchmarks"
"""Where --quick writes its results and page: ignored by git, so a test run leaves the checkout clean."""


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    wanted = _select(args.only)
    os.environ[_bench.WORKDIR_ENV] = str(Path(args.workdir).resolve())
    if args.b3_parts:
        os.environ["AIRFLOW_TXN_B3_PARTS"] = str(args.b3_parts)  # b3_part_lookup.PARTS_ENV
    out, page = outputs(args)
    run = {"command": _command(argv), "quick": args.quick, "started": _now(), "machine": _machine(),
           "versions": _versions(), "rows": {}}
    failed: list[str] = []
    earlier = _earlier_rows(out) if args.only and not args.quick else {}
    for row_id, module_name, title in ROWS:
        if row_id not in wanted:
            run["rows"][row_id] = _refreshed(earlier[row_id], module_name) if row_id in earlier else \
                _unselected(row_id, module_name, title, args.only)
            continue
        print(f"== {row_id}: {title}", flush=True)
        entry = _run_row(row_id, module_name, title, args.quick)
        entry["command"] = run["command"]
        if entry["error"]:
            failed.append(f"{row_id} failed: {entry['error'].splitlines()[-1]}")
        run["rows"][row_id] = entry
        for r in entry["results"]:
            print("   " + _line(r), flush=True)
    run["finished"] = _now()
    run["machine"]["load_after"] = _load()
    regressions = _regressions(run) if args.quick else []
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(run, indent=1) + "\n")
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(render(run))
    print(f"results: {out}\npage: {page}")
    for problem in failed + regressions:
        print("FAIL " + problem, file=sys.stderr)
    return 1 if failed or regressions else 0


def outputs(args: argparse.Namespace) -> tuple[Path, Path]:
    """(results JSON, generated page): --out / --md if given, else the tracked files for a full run and
    build/benchmarks/ for --quick."""
    scratch = QUICK_DIR if args.quick else None
    out = Path(args.out) if args.out else (scratch / "results.json" if scratch else RESULTS)
    page = Path(args.md) if args.md else (scratch / "BENCHMARKS.md" if scratch else PAGE)
    return out, page


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default="", help="comma-separated row ids, e.g. B1,B2 (default: all)")
    parser.add_argument("--quick", action="store_true",
                        help="small sizes (CI, under 3 minutes); fail only if a ratio is worse than twice its target")
    parser.add_argument("--out", default=None, help=f"results JSON (default {RESULTS.relative_to(REPO)}; "
                        "--quick: build/benchmarks/results.json)")
    parser.add_argument("--md", default=None, help=f"generated page (default {PAGE.relative_to(REPO)}; "
                        "--quick: build/benchmarks/BENCHMARKS.md)")
    parser.add_argument("--b3-parts", type=int, default=None,
                        help="B3's size: part rows in its catalogs (default 10,000,000, --quick too: filling the two "
                        "catalogs takes about 3.5 minutes), e.g. 1000000")
    parser.add_argument("--workdir", default=str(_bench.workdir()),
                        help="where contenders write their files (default <repo>/.bench-tmp, on the disk)")
    return parser.parse_args(argv)


def _select(only: str) -> set[str]:
    known = {row_id for row_id, _, _ in ROWS}
    wanted = {p.strip().upper() for p in only.split(",") if p.strip()} or known
    unknown = wanted - known
    if unknown:
        raise SystemExit(f"unknown row(s) {', '.join(sorted(unknown))}; known: {', '.join(sorted(known))}")
    return wanted


def _earlier_rows(out: Path) -> dict[str, Any]:
    """With --only, the rows not selected keep the results of the run that last measured them (each row
    says which command and when), so one row can be re-run without losing the others."""
    try:
        earlier = json.loads(out.read_text())
    except (OSError, ValueError):
        return {}
    if earlier.get("quick"):
        return {}
    rows = earlier.get("rows", {})
    for entry in rows.values():
        entry.setdefault("command", earlier.get("command"))
    return {row_id: entry for row_id, entry in rows.items() if entry.get("started")}


def _refreshed(entry: dict[str, Any], module_name: str) -> dict[str, Any]:
    """An earlier row's results with the module's current description and notes."""
    with contextlib.suppress(Exception):
        module = importlib.import_module(f"benchmarks.{module_name}")
        entry["doc"] = (module.__doc__ or "").strip()
        entry["notes"] = str(getattr(module, "NOTES", "")).strip()
    return entry


def _unselected(row_id: str, module_name: str, title: str, only: str) -> dict[str, Any]:
    return {"title": title, "module": f"benchmarks/{module_name}.py", "doc": "", "notes": "", "seconds": 0.0,
            "error": None, "load_before": "-", "started": None, "command": None,
            "results": [_bench.not_run(row_id, title, "all contenders",
                                       f"not measured yet: the runs behind this page selected --only {only}")]}


def _run_row(row_id: str, module_name: str, title: str, quick: bool) -> dict[str, Any]:
    entry: dict[str, Any] = {"title": title, "module": f"benchmarks/{module_name}.py", "doc": "", "notes": "",
                             "seconds": 0.0, "results": [], "error": None, "load_before": _load(),
                             "file_create": _fs_probe(), "started": _now()}
    module: ModuleType | None = None
    try:
        module = importlib.import_module(f"benchmarks.{module_name}")
    except ModuleNotFoundError as exc:
        missing_name = exc.name or "?"
        reason = (f"benchmarks/{module_name}.py does not exist yet" if missing_name.endswith(module_name)
                  else f"needs {missing_name}: pip install -e '.[bench]'")
        entry["results"] = [_bench.not_run(row_id, title, "all contenders", reason)]
        return entry
    entry["doc"] = (module.__doc__ or "").strip()
    entry["notes"] = str(getattr(module, "NOTES", "")).strip()
    started = time.perf_counter()
    try:
        entry["results"] = list(module.run(quick))
    except Exception as exc:
        entry["error"] = traceback.format_exc()
        entry["results"] = [_bench.not_run(row_id, title, "all contenders", f"failed: {type(exc).__name__}: {exc}")]
    entry["seconds"] = round(time.perf_counter() - started, 1)
    return entry


def _regressions(run: dict[str, Any]) -> list[str]:
    """--quick gate: a ratio past its gate, twice its target unless the row says otherwise (absolute
    targets in ms are reported, not gated: CI machines differ)."""
    out = []
    for row_id, entry in run["rows"].items():
        for r in entry["results"]:
            gate = r.get("gate")
            if gate is not None and r.get("ratio") is not None and r["ratio"] > gate:
                out.append(f"{row_id} {r['measure']} / {r['contender']}: ratio {r['ratio']:.3f} is past its "
                           f"gate {gate:g} (target {r['target']:g})")
    return out


# -- the page ---------------------------------------------------------------------------------------
def render(run: dict[str, Any]) -> str:
    m, v = run["machine"], run["versions"]
    lines = [
        "# Benchmarks: airflow_txn side by side with delta-rs and pyiceberg", "",
        "Generated by `benchmarks/run.py`; do not edit by hand (explanations live in each row's module).", "",
        f"- Command: `{run['command']}`" + (" (quick mode: small sizes, for CI)" if run["quick"] else "")
        + ("; rows it did not select keep their last results, each saying when and how it ran" if "--only" in
           run["command"] and not run["quick"] else ""),
        f"- Run: {run['started']} to {run['finished']}",
        f"- Machine: {m['cpu']}, {m['cores']} cores, {m['ram_gb']} GB RAM, {m['os']}; load average "
        f"{m['load_before']} before, {m['load_after']} after",
        "- Versions: " + ", ".join(f"{k} {val}" for k, val in v.items()), "",
        "Method: every contender runs in the same process on the same machine, on files under one scratch "
        "directory. Repetitions are interleaved (repetition r of every contender before repetition r+1 of any, "
        "the order rotating), so background load hits every contender alike; each contender times only what it "
        "measures. Reported: median and p95 (nearest rank) in milliseconds, n repetitions, and ratios of "
        "medians. `met` compares the ratio (or, where the target is in ms, the median) with the target. "
        "A contender that could not run says why.", "",
        "## Summary", "", "| row | what | check | value | target | met |", "|---|---|---|---|---|---|",
    ]
    for row_id, entry in run["rows"].items():
        checks = [r for r in entry["results"] if r.get("target") is not None]
        if not checks:
            status = entry["results"][0]["status"] if entry["results"] else "no results"
            lines.append(f"| {row_id} | {entry['title']} | | {status} | | |")
        for r in checks:
            lines.append(f"| {row_id} | {entry['title']} | {_check_name(r)} | {_value(r)} | {_target(r)} | "
                         f"{_met(r)} |")
    for row_id, entry in run["rows"].items():
        lines += ["", f"## {row_id}: {entry['title']}", ""]
        if entry["doc"]:
            lines += [_doc_text(entry["doc"]), ""]
        lines += _tables(entry["results"])
        series = [r for r in entry["results"] if r.get("series")]
        if series:
            lines += [""] + [f"- {r['contender']}, {r['series']['label']}: "
                             f"{', '.join(f'{x:g}' for x in r['series']['values'])}" for r in series]
        if entry.get("started"):
            lines += ["", f"Module `{entry['module']}`; run {entry['started']} by `{entry.get('command')}`, took "
                      f"{entry['seconds']} s (when it started: load average {entry['load_before']}; creating a small "
                      f"file took {entry.get('file_create', '?')})."]
        if entry["notes"]:
            lines += ["", "### Notes", "", entry["notes"]]
        if entry["error"]:
            lines += ["", "It failed:", "", "```", entry["error"].rstrip(), "```"]
    return "\n".join(lines) + "\n"


def _tables(results: list[dict[str, Any]]) -> list[str]:
    lines: list[str] = []
    measures = list(dict.fromkeys(r["measure"] for r in results))
    for measure in measures:
        rows = [r for r in results if r["measure"] == measure]
        of = next((r["ratio_of"] for r in rows if r.get("ratio_of")), None)
        lines += [f"**{measure}**", "",
                  f"| contender | median ms | p95 ms | n | ratio{f' ({of})' if of else ''} | target | met | note |",
                  "|---|---|---|---|---|---|---|---|"]
        for r in rows:
            if r["status"] != "ok":
                lines.append(f"| {r['contender']} | {r['status']} | | | | {_target(r)} | | |")
                continue
            ratio = "" if r["ratio"] is None else f"{r['ratio']:.3f}"
            lines.append(f"| {r['contender']} | {r['median_ms']:.2f} | {r['p95_ms']:.2f} | {r['n']} | {ratio} | "
                         f"{_target(r)} | {_met(r)} | {r.get('note') or ''} |")
        lines.append("")
    return lines[:-1]


def _doc_text(doc: str) -> str:
    """A module docstring as Markdown: the usage line (indented) dropped, paragraphs kept."""
    kept = [line for line in doc.splitlines() if not line.startswith("    .venv/bin/python")]
    return "```\n" + "\n".join(kept).strip() + "\n```"


def _check_name(r: dict[str, Any]) -> str:
    if r.get("target_on") == "median_ms":
        return f"{r['measure']}: {r['contender']}, median"
    if r.get("target_on") == "per_second":  # a rate with a floor (B6)
        return f"{r['measure']}: {r['contender']}, per second"
    if r.get("ratio_of") == "airflow_txn / this":
        return f"{r['measure']}: airflow_txn / {r['contender']}"
    if r["contender"] == _bench.OURS:
        return f"{r['measure']}: {r.get('ratio_of') or 'ratio'}"
    return f"{r['measure']}: {r['contender']}, {r.get('ratio_of') or 'ratio'}"


def _value(r: dict[str, Any]) -> str:
    if r["status"] != "ok":
        return r["status"]
    if r.get("target_on") == "per_second":
        return f"{r['per_second']:,.0f}/s"
    return f"{r['median_ms']:.2f} ms" if r.get("target_on") == "median_ms" else f"{r['ratio']:.3f}"


def _target(r: dict[str, Any]) -> str:
    if r.get("target") is None:
        return ""
    if r.get("target_on") == "per_second":
        text = f">= {r['target']:g}/s"
        return text + (f" (CI gate: ratio {r['gate']:g})" if r.get("gate") is not None else "")
    text = f"<= {r['target']:g}" + (" ms" if r.get("target_on") == "median_ms" else "")
    gate = r.get("gate")
    if gate is not None and gate != 2 * r["target"]:
        text += f" (CI gate {gate:g})"
    return text


def _met(r: dict[str, Any]) -> str:
    return {True: "yes", False: "**no**", None: ""}[r.get("met")]


def _line(r: dict[str, Any]) -> str:
    if r["status"] != "ok":
        return f"{r['measure']} | {r['contender']}: {r['status']}"
    ratio = "" if r["ratio"] is None else f"  ratio {r['ratio']:.3f}"
    target = "" if r.get("target") is None else f"  target {_target(r)} met={r['met']}"
    return f"{r['measure']} | {r['contender']}: median {r['median_ms']:.2f} ms  p95 {r['p95_ms']:.2f} ms{ratio}{target}"


# -- where and with what ----------------------------------------------------------------------------
def _command(argv: list[str] | None) -> str:
    args = sys.argv[1:] if argv is None else argv
    return " ".join([".venv/bin/python benchmarks/run.py", *args])


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _load() -> str:
    try:
        return ", ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def _fs_probe() -> str:
    """Median ms to create one small file in the work dir (seen on a shared VM: 0.03 ms or 0.9 ms depending
    on the other I/O of the machine), as context for every contender that writes files."""
    with _bench.scratch("probe-") as base:
        times = []
        for i in range(100):
            start = time.perf_counter()
            (base / f"f{i}").write_bytes(b"x" * 100)
            times.append(time.perf_counter() - start)
    return f"{_bench.median_ms(times):.3f} ms"


def _machine() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError, StopIteration):
        cpu = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                   if line.startswith("model name"))
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError, AttributeError):
        ram = 0.0
    return {"cpu": cpu, "cores": os.cpu_count(), "ram_gb": round(ram, 1),
            "os": f"{platform.system()} {platform.release()}", "load_before": _load()}


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in ("pyarrow", "sqlalchemy", "deltalake", "pyiceberg", "pyspark", "kazoo", "psycopg"):
        try:
            out[name] = str(importlib.import_module(name).__version__)
        except Exception:
            out[name] = "not installed"
    out["airflow_txn"] = _git_sha()
    return out


def _git_sha() -> str:
    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=False)
        return done.stdout.strip()

    sha = git("rev-parse", "--short=12", "HEAD") or "unknown"
    dirty = bool(git("status", "--porcelain", "--untracked-files=no", "--", "airflow_txn"))
    return f"{sha}{' + uncommitted changes' if dirty else ''}"


if __name__ == "__main__":
    sys.exit(main())
