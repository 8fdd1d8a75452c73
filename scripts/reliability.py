"""The reliability report (issue 6): run the reliability tests, collect their evidence, write the report.

    .venv/bin/python scripts/reliability.py                 # the CI bound (the same as --quick), into build/
    .venv/bin/python scripts/reliability.py --quick --write-docs   # regenerate the tracked docs/RELIABILITY.md
    .venv/bin/python scripts/reliability.py --soak          # the long soak (about an hour)
    .venv/bin/python scripts/reliability.py --suites histories,fuzz --seed 42 --out /tmp/r.md

All suites run in ONE pytest run on two workers (a soak, or --one-by-one: one run per suite), with
AIRFLOW_TXN_EVIDENCE_DIR set to a fresh directory; tests append one JSON line per checked case there, in their
suite's file (tests/evidence.py). The report counts pytest's outcomes (from
JUnit XML) and the evidence cases of every suite, shows the crash matrix as a grid, the randomized
histories with their seeds and transaction counts, and says how to reproduce and how to soak.
The report goes to build/reliability/RELIABILITY.md (ignored by git), so a test run leaves the checkout
clean; only --write-docs (or --out) writes anywhere else.
Needs PostgreSQL (AIRFLOW_TXN_TEST_PG, else scripts/start_postgres.sh is run) and ZooKeeper (installed
and started by the fixtures). Exit status 1 if a test or a case failed, a suite ran nothing, or pytest failed.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import random
import shlex
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO / "build" / "reliability" / "RELIABILITY.md"
"""Where a run writes its report unless told otherwise: under build/, which git ignores."""
DOCS_OUT = REPO / "docs" / "RELIABILITY.md"
"""The tracked report, written only with --write-docs."""
REGENERATE = "python scripts/reliability.py --quick --write-docs"
PACKAGES = ["airflow-txn", "pyarrow", "sqlalchemy", "psycopg", "kazoo", "pytest", "hypothesis"]


@dataclass(frozen=True)
class Suite:
    name: str  # also the evidence suite its tests record under
    title: str
    paths: tuple[str, ...]  # files or directories; those that exist are run
    what: str


SUITES = [
    Suite("crash_matrix", "Crash matrix", ("tests/core/test_crash_points.py",),
          "a process SIGKILLed at every named crash point, then recovery, vacuum and every invariant checked, "
          "on every catalog, oracle and storage root"),
    Suite("service_faults", "Service faults", ("tests/faults",),
          "the catalog database, the oracle or the storage failing or restarting under load"),
    Suite("histories", "Randomized concurrent histories", ("tests/history",),
          "writer and reader processes (some SIGKILLed) running random transactions; the history judged by a "
          "checker that shares no code with the engine"),
    Suite("fuzz", "Bad-input fuzzing", ("tests/core/test_fuzz_bad_input.py",),
          "malformed names, partition values, tids, schemas and batches: a clear error and nothing changed"),
    Suite("zookeeper_faults", "ZooKeeper oracle faults", ("tests/zookeeper/test_processes.py",),
          "committers SIGKILLed between record and apply, ZooKeeper restarted, an ensemble member killed"),
]


@dataclass
class Outcome:
    suite: Suite
    command: list[str]
    env: dict[str, str]
    returncode: int = 0
    seconds: float = 0.0
    tests: dict[str, str] = field(default_factory=dict)  # test id -> passed | failed | error | skipped
    messages: dict[str, str] = field(default_factory=dict)  # test id -> first line of its failure
    cases: list[dict[str, Any]] = field(default_factory=list)  # evidence records
    missing: bool = False

    @property
    def failed_tests(self) -> list[str]:
        return [t for t, o in self.tests.items() if o in ("failed", "error")]

    @property
    def failed_cases(self) -> list[dict[str, Any]]:
        return [c for c in self.cases if not c["passed"]]

    @property
    def ok(self) -> bool:
        ran = sum(o != "skipped" for o in self.tests.values())
        return (not self.missing and self.returncode == 0 and ran > 0 and not self.failed_tests
                and not self.failed_cases)


# -- running --------------------------------------------------------------------------------------------

def postgres_url() -> str:
    if os.environ.get("AIRFLOW_TXN_TEST_PG"):
        return os.environ["AIRFLOW_TXN_TEST_PG"]
    out = subprocess.run(["bash", str(REPO / "scripts" / "start_postgres.sh")], capture_output=True, text=True,
                         check=True)
    return out.stdout.strip().splitlines()[-1]


def knobs(args: argparse.Namespace) -> dict[str, str]:
    """The environment that sizes the run: the tests' own defaults are the CI bound."""
    env = {"AIRFLOW_TXN_HISTORY_SEED": str(args.seed)}
    if args.soak:
        env.update(AIRFLOW_TXN_SOAK_SECONDS=str(args.seconds), AIRFLOW_TXN_SOAK_PROCESSES=str(args.processes),
                   AIRFLOW_TXN_SOAK_ROUNDS=str(args.rounds))
    return env


def run_suite(suite: Suite, args: argparse.Namespace, workdir: Path, base_env: dict[str, str]) -> Outcome:
    paths = [p for p in suite.paths if (REPO / p).exists()]
    evidence_dir = workdir / "evidence" / suite.name
    evidence_dir.mkdir(parents=True, exist_ok=True)
    for old in evidence_dir.glob("*.jsonl"):  # a kept directory from an earlier run
        old.unlink()
    junit = workdir / f"{suite.name}.xml"
    command = suite_command(suite, args, junit, paths)
    env = {**base_env, "AIRFLOW_TXN_EVIDENCE_DIR": str(evidence_dir)}
    outcome = Outcome(suite, command, env, missing=not paths)
    if not paths:
        print(f"!! {suite.title}: none of {suite.paths} exists", flush=True)
        return outcome
    print(f"==> {suite.title}: {' '.join(paths)}", flush=True)
    started = time.monotonic()
    outcome.returncode = subprocess.run(command, cwd=REPO, env={**os.environ, **env}, check=False).returncode
    outcome.seconds = time.monotonic() - started
    if junit.exists():
        read_junit(junit, outcome)
    for path in sorted(evidence_dir.glob("*.jsonl")):
        outcome.cases += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return outcome


def suite_command(suite: Suite, args: argparse.Namespace, junit: Path, paths: list[str]) -> list[str]:
    """The pytest command of one suite run alone (the soak's, and the one the report shows to reproduce it)."""
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--hypothesis-seed={args.seed}",
               f"--junitxml={junit}", *paths]
    if args.soak:
        command.insert(4, f"--timeout={int(args.seconds) * 4 + 900}")
    else:  # two pytest-xdist workers, as every phase of scripts/test.sh: the CI bound's time nearly halves (each
        # test has its own catalog and root; tests/evidence.py appends whole lines, safe from several processes)
        command[4:4] = ["-n", "2"]
    return command


def run_together(suites: list[Suite], args: argparse.Namespace, workdir: Path,
                 base_env: dict[str, str]) -> list[Outcome]:
    """The CI bound: every suite in ONE pytest run on two workers, so the start of pytest and its workers and
    the last slow test of each suite are paid once, not per suite (about a minute of the test command). Each
    suite's tests are read back by their module from the one JUnit file, its cases from its own evidence file
    (tests record under their suite's name); a suite's time is the sum of its tests' times."""
    evidence_dir = workdir / "evidence" / "together"
    evidence_dir.mkdir(parents=True, exist_ok=True)
    for old in evidence_dir.glob("*.jsonl"):
        old.unlink()
    junit = workdir / "together.xml"
    present = {suite.name: [p for p in suite.paths if (REPO / p).exists()] for suite in suites}
    env = {**base_env, "AIRFLOW_TXN_EVIDENCE_DIR": str(evidence_dir)}
    outcomes = [Outcome(suite, suite_command(suite, args, workdir / f"{suite.name}.xml", present[suite.name]), env,
                        missing=not present[suite.name]) for suite in suites]
    for outcome in outcomes:
        if outcome.missing:
            print(f"!! {outcome.suite.title}: none of {outcome.suite.paths} exists", flush=True)
    paths = [p for suite in suites for p in present[suite.name]]
    if not paths:
        return outcomes
    command = suite_command(suites[0], args, junit, paths)
    print(f"==> {', '.join(o.suite.title for o in outcomes if not o.missing)}: {' '.join(paths)}", flush=True)
    returncode = subprocess.run(command, cwd=REPO, env={**os.environ, **env}, check=False).returncode
    everything = Outcome(suites[0], command, env)
    timings: dict[str, float] = {}
    if junit.exists():
        read_junit(junit, everything, timings)
    for outcome in outcomes:
        if not outcome.missing:
            _take_share(outcome, everything, timings, [_module_prefix(p) for p in present[outcome.suite.name]])
            # pytest's 1 is "some test failed": charged to the suites whose tests failed; any other to all
            outcome.returncode = 0 if returncode == 0 or (returncode == 1 and not outcome.failed_tests) else returncode
            evidence = evidence_dir / f"{outcome.suite.name}.jsonl"
            if evidence.exists():  # where a run of the suite alone keeps it: evidence/<suite>/<suite>.jsonl
                own = workdir / "evidence" / outcome.suite.name
                own.mkdir(parents=True, exist_ok=True)
                evidence = evidence.replace(own / evidence.name)
                outcome.cases = [json.loads(line) for line in evidence.read_text().splitlines() if line.strip()]
    return outcomes


def _take_share(outcome: Outcome, everything: Outcome, timings: dict[str, float], modules: list[str]) -> None:
    """The tests of the one run that belong to `outcome`'s suite (by their module), with their messages and times."""
    for test, state in everything.tests.items():
        if any(_belongs(test, m) for m in modules):
            outcome.tests[test] = state
            if test in everything.messages:
                outcome.messages[test] = everything.messages[test]
            outcome.seconds += timings.get(test, 0.0)


def _module_prefix(path: str) -> str:
    """`tests/faults` -> `tests.faults`, `tests/core/test_fuzz_bad_input.py` -> `tests.core.test_fuzz_bad_input`:
    how JUnit's classname of a test begins (a file outside the repository: its module name, how it ends)."""
    resolved = (REPO / path).resolve()
    try:
        return str(resolved.relative_to(REPO)).removesuffix(".py").replace("/", ".")
    except ValueError:
        return resolved.name.removesuffix(".py")


def _belongs(test: str, module: str) -> bool:
    """Whether the JUnit test id `test` ("classname::name") is one of `module`'s (a _module_prefix)."""
    classname = test.split("::", 1)[0]
    return classname == module or classname.startswith(module + ".") or classname.endswith("." + module)


def read_junit(path: Path, outcome: Outcome, timings: dict[str, float] | None = None) -> None:
    for case in ET.parse(path).getroot().iter("testcase"):
        test = f"{case.get('classname', '')}::{case.get('name', '')}"
        if timings is not None:
            timings[test] = timings.get(test, 0.0) + float(case.get("time") or 0.0)
        state = "passed"
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                state = "failed" if child.tag == "failure" else child.tag
                message = (child.get("message") or child.tag).strip().splitlines()
                outcome.messages[test] = " / ".join(line.strip() for line in message[:4])[:300]
        if outcome.tests.get(test) in ("failed", "error"):
            continue  # an error in teardown after a failure: keep the failure
        outcome.tests[test] = state


# -- describing the machine and the software ---------------------------------------------------------------

def versions(pg_url: str) -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    try:
        from sqlalchemy import create_engine, text

        engine = create_engine(pg_url)
        with engine.connect() as conn:
            out["PostgreSQL server"] = str(conn.execute(text("SHOW server_version")).scalar())
        engine.dispose()
    except Exception as exc:
        out["PostgreSQL server"] = f"unknown ({type(exc).__name__})"
    zk = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "zookeeper"], capture_output=True, text=True,
                        check=False)
    out["ZooKeeper (Debian package)"] = zk.stdout.strip() or "unknown"
    return out


def machine() -> dict[str, str]:
    memory = "unknown"
    meminfo = Path("/proc/meminfo")
    if meminfo.exists():
        kb = int(meminfo.read_text().split("MemTotal:")[1].split()[0])
        memory = f"{kb / 1024 / 1024:.1f} GiB"
    git = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                         check=False).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain"], cwd=REPO, capture_output=True, text=True,
                           check=False).stdout.strip()
    return {"date (UTC)": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M"), "platform": platform.platform(),
            "CPUs": str(os.cpu_count()), "memory": memory,
            "git commit": (git or "unknown") + (" with uncommitted changes" if dirty else "")}


# -- the report ----------------------------------------------------------------------------------------------

def table(header: list[str], rows: list[list[Any]]) -> list[str]:
    def cell(value: Any) -> str:
        return str(value).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(map(cell, header)) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(map(cell, row)) + " |" for row in rows]
    return lines


def render(outcomes: list[Outcome], args: argparse.Namespace, env: dict[str, str], pg_url: str,
           command: str) -> str:
    ok = all(o.ok for o in outcomes)
    lines = ["# Reliability report", "",
             f"Generated by `{command}`; do not edit by hand (regenerate it). Result: "
             f"**{'PASSED' if ok else 'FAILED'}**. What the suites are: [TESTING.md](TESTING.md). "
             f"`{REGENERATE}` rewrites this page; `scripts/test.sh` runs the same suites and writes its "
             "report to build/reliability/RELIABILITY.md instead.", "",
             "## Summary", ""]
    rows = []
    for o in outcomes:
        ran = [t for t, s in o.tests.items() if s != "skipped"]
        passed = sum(o.tests[t] == "passed" for t in ran)
        skipped = len(o.tests) - len(ran)
        cases = f"{sum(c['passed'] for c in o.cases)} / {len(o.cases)}" if o.cases else "-"
        verdict = "missing" if o.missing else ("pass" if o.ok else "FAIL")
        rows.append([o.suite.title, o.suite.what, f"{passed} / {len(ran)}" + (f" ({skipped} skipped)" if skipped
                                                                             else ""),
                     cases, f"{o.seconds:.0f} s", verdict])
    lines += table(["suite", "what it checks", "tests passed", "cases passed", "time", "result"], rows)
    lines += ["", "A *test* is one pytest test (one parametrization); a *case* is one checked unit a test "
              "records as evidence (a crash-matrix cell, a history, a fuzzed property with its examples). A suite's "
              "*time* is the sum of its tests' times when the suites ran in one pytest run (the default), the wall "
              "time of its own run otherwise (a soak, `--one-by-one`).", ""]
    for o in outcomes:
        lines += section(o)
    lines += run_details(outcomes, args, env, pg_url)
    return "\n".join(lines) + "\n"


def section(o: Outcome) -> list[str]:
    lines = [f"## {o.suite.title}", "", o.suite.what[0].upper() + o.suite.what[1:] + ".", ""]
    if o.missing:
        return [*lines, f"Not run: none of {', '.join(o.suite.paths)} exists.", ""]
    special = {"crash_matrix": crash_grid, "histories": histories, "fuzz": fuzz}.get(o.suite.name, generic_cases)
    lines += special(o)
    if o.failed_tests or o.failed_cases:
        lines += ["", "Failures:", ""]
        lines += [f"- `{t}`: {o.messages.get(t, '')}" for t in o.failed_tests]
        lines += [f"- case `{c['case']}`" + (": " + " / ".join(str(c["details"]["error"]).splitlines())[:300]
                                             if c["details"].get("error") else "") for c in o.failed_cases]
    return [*lines, ""]


def crash_grid(o: Outcome) -> list[str]:
    cells: dict[tuple[str, str], list[bool]] = defaultdict(list)
    for c in o.cases:
        point, _, column = c["case"].partition("|")
        cells[(point, column)].append(bool(c["passed"]))
    points = sorted({p for p, _ in cells})
    columns = sorted({c for _, c in cells})
    if not points:
        return ["No crash-matrix evidence was recorded."]

    def mark(results: list[bool]) -> str:
        if not results:
            return "-"
        good = sum(results)
        return ("pass" if good == len(results) else "FAIL") + (f" {good}/{len(results)}" if len(results) > 1 else "")

    rows = [[f"`{p}`", *(mark(cells.get((p, c), [])) for c in columns)] for p in points]
    statements = sum(" @ " in p for p in points)
    what = f"{len(points) - statements} crash points" + (
        f" and {statements} statements at a crash point (`kind @ point`: that statement's transaction killed "
        "there)" if statements else "")
    return [f"{what} x {len(columns)} catalog + oracle pairs = {len(o.cases)} cells run:", "",
            *table(["crash point", *(c.replace("|", " + ") for c in columns)], rows)]


def histories(o: Outcome) -> list[str]:
    if not o.cases:
        return ["No history evidence was recorded."]
    keys = ["txns", "committed", "aborted", "unknown", "reads", "killed", "committed_merges", "committed_changes",
            "allowed_constraint_breaks"]
    rows = []
    for c in o.cases:
        d = c["details"]
        rows.append([d.get("backend"), d.get("seed"), *(d.get(k, "") for k in keys), d.get("mutations_caught", "-"),
                     f"{d.get('seconds', 0):.0f} s", "pass" if c["passed"] else "FAIL " + ",".join(d.get("violations",
                                                                                                       []))])
    total = sum(int(c["details"].get("txns", 0)) for c in o.cases)
    reads = sum(int(c["details"].get("reads", 0)) for c in o.cases)
    return [f"{total} transactions and {reads} snapshot reads checked in {len(o.cases)} histories. *unknown*: "
            "killed inside commit(), settled by recovery; *mutations*: corrupted copies of the history the "
            "checker had to reject; *merges*: MERGE statements in committed transactions, each checked against "
            "the checker's model of it; *changes*: committed transactions that changed a table's columns, each "
            "read after it checked under the schema of its snapshot; *SI skews*: write skews snapshot isolation let "
            "through on the snapshot-only account pair (allowed there; the serializable pair must never break).", "",
            *table(["catalog", "seed", *keys[:-3], "merges", "changes", "SI skews", "mutations caught", "run time",
                    "result"], rows)]


def fuzz(o: Outcome) -> list[str]:
    props: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for c in o.cases:
        props[c["case"].split("[")[0]].append(c)
    rows = []
    for name, cases in sorted(props.items()):
        examples = sum(int(c["details"].get("examples", 0)) for c in cases)
        rows.append([f"`{name}`", len(cases), examples or "-", sum(c["passed"] for c in cases)])
    total = sum(int(c["details"].get("examples", 0)) for c in o.cases)
    return [f"{total} Hypothesis examples over {len(props)} tests ({len(o.cases)} cases with their parameters):", "",
            *table(["test", "cases", "examples", "cases passed"], rows)]


def generic_cases(o: Outcome) -> list[str]:
    if o.cases:
        rows = [[f"`{c['case']}`", "pass" if c["passed"] else "FAIL", brief(c["details"])] for c in o.cases]
        return table(["case", "result", "details"], rows)
    rows = [[f"`{t}`", s] for t, s in sorted(o.tests.items())]
    return table(["test", "result"], rows)


def brief(details: dict[str, Any]) -> str:
    """The scalar details of an evidence record, shortened for a table cell."""
    shown = ", ".join(f"{k}={v}" for k, v in details.items() if k != "error" and not isinstance(v, dict | list))
    return shown[:160]


def run_details(outcomes: list[Outcome], args: argparse.Namespace, env: dict[str, str], pg_url: str) -> list[str]:
    lines = ["## What was run", "", f"Mode: **{'soak' if args.soak else 'quick (the CI bound)'}**; seed "
             f"{args.seed} (AIRFLOW_TXN_HISTORY_SEED for the histories, --hypothesis-seed for the fuzzing).", ""]
    lines += table(["", ""], [[k, v] for k, v in {**machine(), **versions(pg_url)}.items()])
    lines += ["", "Commands (from the repository root; each with `AIRFLOW_TXN_EVIDENCE_DIR` set to a fresh "
              "directory, `AIRFLOW_TXN_TEST_PG` and `AIRFLOW_TXN_TEST_ZK=1`):", "", "```bash"]
    shown = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(env.items()) if k not in (
        "AIRFLOW_TXN_TEST_PG", "AIRFLOW_TXN_TEST_ZK"))
    for o in outcomes:
        if not o.missing:
            command = ["pytest", *(a for a in o.command[3:] if not a.startswith("--junitxml"))]
            lines.append(f"{shown} {' '.join(shlex.quote(a) for a in command)}   # {o.suite.name}")
    lines += ["```", "", "## How to reproduce", "",
              f"- This report: `.venv/bin/python scripts/reliability.py{' --soak' if args.soak else ''} --seed "
              f"{args.seed}` (the seed fixes every random choice of the workload, the driver and Hypothesis; "
              "which process the operating system runs when does not repeat, so a rare interleaving may need "
              "a few runs).",
              "- One suite: the command above; one history: `AIRFLOW_TXN_HISTORY_SEED=<seed> .venv/bin/pytest "
              "tests/history -k '<catalog>]'` (the failure message names the history directory; "
              "`.venv/bin/python -m tests.history.checker DIR` judges it again).",
              "- A crash-matrix cell: `.venv/bin/pytest tests/core/test_crash_points.py -k '<point> and <catalog>'`.",
              "", "## How to soak", "",
              "```bash",
              ".venv/bin/python scripts/reliability.py --soak --out /tmp/soak.md   # about an hour",
              ".venv/bin/python scripts/reliability.py --soak --seconds 3600 --processes 8 --rounds 20 --suites "
              "histories,crash_matrix",
              "```", "",
              "`--soak` sets AIRFLOW_TXN_SOAK_SECONDS (history run time per catalog, default 600), "
              "AIRFLOW_TXN_SOAK_PROCESSES (worker processes per history, default 8) and AIRFLOW_TXN_SOAK_ROUNDS "
              "(rounds of the crash matrix and of the service faults, default 5); the same variables work on a "
              "plain pytest run."]
    return lines


# -- main ------------------------------------------------------------------------------------------------------

def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="the CI bound (default)")
    mode.add_argument("--soak", action="store_true", help="long runs: see --seconds, --processes, --rounds")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--out", type=Path, default=DEFAULT_OUT,
                       help=f"report path (default {DEFAULT_OUT.relative_to(REPO)}, ignored by git)")
    where.add_argument("--write-docs", action="store_true",
                       help=f"write the tracked {DOCS_OUT.relative_to(REPO)} instead")
    p.add_argument("--seed", type=int, default=None, help="seed of every random choice (default: a random one)")
    p.add_argument("--one-by-one", action="store_true",
                   help="one pytest run per suite (a soak always does; otherwise all suites run in one)")
    p.add_argument("--suites", default=",".join(s.name for s in SUITES),
                   help=f"comma-separated subset of {', '.join(s.name for s in SUITES)}")
    p.add_argument("--seconds", type=int, default=600, help="soak: history run time per catalog")
    p.add_argument("--processes", type=int, default=8, help="soak: worker processes per history")
    p.add_argument("--rounds", type=int, default=5, help="soak: rounds of the crash matrix and service faults")
    p.add_argument("--keep", type=Path, default=None, help="keep the evidence and JUnit files in this directory")
    args = p.parse_args(argv)
    if args.write_docs:
        args.out = DOCS_OUT
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1_000_000)
    names = {s.name for s in SUITES}
    unknown = set(args.suites.split(",")) - names
    if unknown:
        p.error(f"unknown suites {sorted(unknown)}; choose from {sorted(names)}")
    return args


def main(argv: list[str]) -> int:
    args = parse(argv)
    pg_url = postgres_url()
    env = {**knobs(args), "AIRFLOW_TXN_TEST_PG": pg_url, "AIRFLOW_TXN_TEST_ZK": "1", "AIRFLOW_TXN_TEST_S3": "1"}
    chosen = [s for s in SUITES if s.name in args.suites.split(",")]
    command = "python scripts/reliability.py " + " ".join(shlex.quote(a) for a in argv if a) if argv else (
        "python scripts/reliability.py")
    with tempfile.TemporaryDirectory(prefix="reliability-") as tmp:
        workdir = args.keep or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        outcomes = ([run_suite(s, args, workdir, env) for s in chosen] if args.soak or args.one_by_one
                    else run_together(chosen, args, workdir, env))
    report = render(outcomes, args, env, pg_url, command.strip())
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(report)
    ok = all(o.ok for o in outcomes)
    for o in outcomes:
        print(f"{o.suite.title}: {'ok' if o.ok else 'FAILED'} ({len(o.tests)} tests, {len(o.cases)} cases, "
              f"{o.seconds:.0f} s)")
    print(f"wrote {args.out}: {'PASSED' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
