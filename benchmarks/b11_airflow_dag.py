"""B11: per-task cost in Airflow: a backfill DAG of 30 mapped Spark loads run with dag.test(), transactional vs plain.

    .venv/bin/python -m benchmarks.b11_airflow_dag [--quick]

The DAGs are benchmarks/_b11_dag.py: `b11_txn` (plan_days, then a transaction_group: begin, 30
SparkTransactionOperator loads each overwriting one day's partition of b11.events with 10,000 rows through
airflow_txn.spark.write, commit, rollback (skipped), outcome) and `b11_plain` (plan_days, then 30 plain @task
loads writing the same rows with `df.write.mode("overwrite").parquet(<dir>/day=<day>)`, no airflow_txn).
Four variants, each one whole `dag.test()` run (Airflow 3, in-process; timed from the call to its return):

airflow_txn, local Spark        b11_txn; each task uses the process's local SparkSession (the operator's default)
airflow_txn, Spark Connect      b11_txn with `remote="sc://127.0.0.1:PORT"`: every task attaches to a Spark
                                Connect server (tests/harness/spark_connect.py, started once, outside the timed
                                part) and stops its session; writes go through the "airflow_txn" data source
plain, local Spark              b11_plain on the process's local SparkSession
plain, Spark Connect            b11_plain, every task attaching to the same server and stopping its session

Under dag.test() every task runs in the one process, so the local variants share one SparkSession, started
before any timed run (as the first task of a real worker process would start its own JVM; that start is not
in these numbers). The runs happen in a child process with the Airflow tests' harness
(tests/airflow/conftest.py: a throw-away AIRFLOW_HOME with a SQLite metadata database; tests/airflow/helpers.py:
run_dag), a DAG folder holding only _b11_dag.py, and a warehouse with a SQLite catalog and a local root.
One warm-up run of each variant (1 task) first, then repetitions interleaved (the order rotating).
Full: 30 tasks x 2 runs of each variant at two sizes, 10,000 rows per task (the bookkeeping shows) and 1,000,000
(a realistic load, where the Spark job is the task); quick: 4 tasks x 10,000 rows x 1 (about 2 minutes with the
Connect server's start and the warm-ups, which stay: without them the first DAG run of the process, the
transactional one, took 8 times the plain one).
Targets: the whole DAG, (airflow_txn, local) / (plain, local) <= 1.05 and (airflow_txn, Connect) / (plain, Connect)
<= 1.05; what the transaction adds to one load task (Airflow's recorded load-task duration, the transactional run's
median minus the interleaved plain run's, at 10,000 rows) <= 50 ms on local Spark and <= 150 ms through Connect.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from benchmarks import _bench

ROW = "B11"
TARGET = 1.05
ROWS_PER_TASK = 10_000
REALISTIC_ROWS = 1_000_000
"""Rows per load task of the realistic size (full runs only): the Spark job, not the bookkeeping, is the task."""
ADDED_TARGET_MS = {"airflow_txn, local Spark": 50.0, "airflow_txn, Spark Connect": 150.0}
"""What the transaction may add to one load task (Airflow's recorded load-task duration, this minus plain)."""
TXN_LOCAL = "airflow_txn, local Spark"
TXN_CONNECT = "airflow_txn, Spark Connect"
PLAIN_LOCAL = "plain df.write.parquet, local Spark"
PLAIN_CONNECT = "plain df.write.parquet, Spark Connect"
VARIANTS: dict[str, tuple[str, bool]] = {TXN_LOCAL: ("b11_txn", False), TXN_CONNECT: ("b11_txn", True),
                                         PLAIN_LOCAL: ("b11_plain", False), PLAIN_CONNECT: ("b11_plain", True)}
"""variant: (dag_id, attaches to Spark Connect)."""
PLAIN_OF = {TXN_LOCAL: PLAIN_LOCAL, TXN_CONNECT: PLAIN_CONNECT}
GATES: dict[str, float | None] = {TXN_LOCAL: 5.0, TXN_CONNECT: 30.0}
"""--quick's gate per airflow_txn variant. Quick runs reached 1.5 and 10 on a quiet machine, 4.1 and 12.9 with
the other CPU-bound work of a shared 2-core machine (one run of 4 tasks is noisy); NOTES say why the 1.05 target
is out of reach. Gated past those, so CI still catches a regression (e.g. the Connect tasks' cost doubling)."""
WARMUP_TASKS = 1
REPO = Path(__file__).resolve().parent.parent


def measure_of(tasks: int, rows: int) -> str:
    return f"one DAG run: {tasks} mapped loads x {rows:,} rows (dag.test)"


def run(quick: bool) -> list[dict[str, Any]]:
    sizes = [(4, ROWS_PER_TASK, 1)] if quick else [(30, ROWS_PER_TASK, 2), (30, REALISTIC_ROWS, 2)]
    """(tasks, rows per task, repetitions) of each DAG size measured."""
    why = (_bench.missing("airflow", "airflow") or _bench.missing("pyspark", "spark")
           or (None if shutil.which("java") else "java not found"))
    if why:
        return [_bench.not_run(ROW, measure_of(tasks, rows), name, why, target=TARGET if name in PLAIN_OF else None)
                for tasks, rows, _ in sizes for name in VARIANTS]
    _bench.workers_import_this_checkout()  # the Connect server's Python workers and the child's
    with _bench.scratch("b11-") as base, ExitStack() as stack:
        url, why_connect = _connect_server(base, stack)
        found = _in_child(base, {"sizes": sizes, "connect": url, "work": str(base / "child")},
                          timeout=600 if quick else 3600)
    skipped = dict(found["skipped"])
    if why_connect:
        skipped.update({TXN_CONNECT: why_connect, PLAIN_CONNECT: why_connect})
    out: list[dict[str, Any]] = []
    for tasks, rows, _ in sizes:
        size = str(rows)
        out += _rows(measure_of(tasks, rows), tasks, found["samples"].get(size, {}), found["durations"].get(size, {}),
                     skipped)
        if rows == ROWS_PER_TASK:
            out += _added_rows(tasks, found["durations"].get(size, {}), skipped)
    return out


def _connect_server(base: Path, stack: ExitStack) -> tuple[str | None, str | None]:
    """(url, None) of a Spark Connect server running until `stack` closes, or (None, why it cannot run)."""
    try:
        from tests.harness.spark_connect import SparkConnectUnavailable, server
    except ImportError as exc:  # an installed package without the checkout's tests/
        return None, f"needs the checkout's tests/harness: {exc}"
    try:
        return stack.enter_context(server(base / "connect")).url, None
    except SparkConnectUnavailable as exc:
        return None, f"the Spark Connect server did not start: {str(exc).splitlines()[0]}"


def _in_child(base: Path, config: dict[str, Any], timeout: float) -> dict[str, Any]:
    """Run the DAG runs in a fresh interpreter (Airflow reads its configuration once, when first imported, and
    an earlier row of the same run.py may have imported it with another AIRFLOW_HOME); its findings as JSON."""
    config_path, result_path, log_path = base / "config.json", base / "result.json", base / "child.log"
    config_path.write_text(json.dumps({**config, "result": str(result_path)}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update({"SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable})
    with open(log_path, "wb") as log:
        done = subprocess.run([sys.executable, "-m", "benchmarks.b11_airflow_dag", "--child", str(config_path)],
                              cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=timeout, check=False)
    if done.returncode != 0 or not result_path.exists():
        tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-40:])
        raise RuntimeError(f"the B11 child process exited with {done.returncode}:\n{tail}")
    return dict(json.loads(result_path.read_text()))


def _rows(measure: str, tasks: int, samples: dict[str, list[float]], durations: dict[str, list[list[float]]],
          skipped: dict[str, str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for name in VARIANTS:
        target = TARGET if name in PLAIN_OF else None
        if name in skipped or name not in samples:
            out.append(_bench.not_run(ROW, measure, name, skipped.get(name, "no samples"), target=target))
            continue
        mine = samples[name]
        every = [d for run_durations in durations[name] for d in run_durations]
        note = (f"{statistics.median(mine) / tasks * 1000:.0f} ms of the run per load task; Airflow's median "
                f"load-task duration {statistics.median(every) * 1000:.0f} ms")
        plain = PLAIN_OF.get(name)
        if plain is not None and plain in samples:
            out.append(_bench.result(ROW, measure, name, mine, ratio=_bench.ratio(mine, samples[plain]),
                                     ratio_of=f"this / {plain}", target=TARGET, gate=GATES[name], note=note))
        elif plain is not None:
            out.append(_bench.result(ROW, measure, name, mine,
                                     note=f"{note}; no ratio: {plain} did not run ({skipped.get(plain)})"))
        elif name == PLAIN_CONNECT and PLAIN_LOCAL in samples:
            out.append(_bench.result(ROW, measure, name, mine, ratio=_bench.ratio(mine, samples[PLAIN_LOCAL]),
                                     ratio_of=f"this / {PLAIN_LOCAL}",
                                     note=f"{note}; the ratio is what attaching to Spark Connect costs a plain DAG"))
        else:
            out.append(_bench.result(ROW, measure, name, mine, note=note))
    return out


def _added_rows(tasks: int, durations: dict[str, list[list[float]]], skipped: dict[str, str]) -> list[dict[str, Any]]:
    """What the transaction adds to one load task: per pair of interleaved runs, the median of the transactional
    run's load-task durations (Airflow's own record, start to end of the task) minus the plain run's."""
    measure = f"what the transaction adds to one load task ({tasks} mapped loads x {ROWS_PER_TASK:,} rows, dag.test)"
    out: list[dict[str, Any]] = []
    for name, plain in PLAIN_OF.items():
        target = ADDED_TARGET_MS[name]
        if name in skipped or plain in skipped or not durations.get(name) or not durations.get(plain):
            out.append(_bench.not_run(ROW, measure, name, skipped.get(name) or skipped.get(plain) or "no samples",
                                      target=target, target_on="median_ms"))
            continue
        added = [statistics.median(mine) - statistics.median(theirs)
                 for mine, theirs in zip(durations[name], durations[plain], strict=False)]
        out.append(_bench.result(ROW, measure, name, added, target=target, target_on="median_ms",
                                 note=f"the load-task duration minus {plain}'s, per pair of interleaved runs"))
    return out


NOTES = """\
**Full run (2026-12-07 16:27 UTC, the table above; the machine otherwise idle, a host slower than the morning's: the
plain local task 203 against 175 ms).** Per load task at 10,000 rows the transaction adds **91 ms on local Spark**
(281 against 203 ms; the two pairs 50 and 133 ms; target 50 ms: not met) and **91 ms through Spark Connect** (360
against 267 ms; target 150 ms: met); the whole DAG 1.65 x and 2.34 x plain at 10,000 rows, 1.28 x and 2.72 x at
1,000,000 (target 1.05 x: not met).

**Where a local load task's difference goes, timed without a profiler (2026-12-07, after that run).** The B11 DAGs
under dag.test() (10 tasks x 10,000 rows, 4 runs of each DAG interleaved, SQLite metadata and catalog), with
wall-clock wrappers around the task runner's and airflow_txn's steps, medians a task: Airflow's recorded load-task
duration 280 against 227 ms plain (+53 ms in this probe; the full run's pairs spread from 50 to 133 ms: the noise
between runs on this machine is as large as the target). Of the +53 ms: `conform` 18.5 ms (Spark's analysis of the
projection that gives each column its field id and guards); the tid's XCom pull 9 ms (rendering the task's templates
21.8 against 13.5 ms plain; a pull through dag.test()'s in-process Execution API 8.8 ms here, 4.9-6.0 ms in a probe
DAG with no Spark in the process: the 25 ms of the profile below was the profiler's own cost); the catalog's
statements about 11 ms (the keyed try's start 3.9: attach, key, heartbeat and a withdrawal of 0.75; the
statement's open 2.2, its commit 3.1, the write dir 0.5, the written files' footers 1.3); the task's Spark
session 2.6 ms. The Spark job itself takes what the plain write takes (143 ms). After the recorded end the task
runner pushes the Transaction link, one more Execution API call (10 ms; a plain task pushes none). So 50 ms is
out of reach on this path without giving something up: dropping the tid's XCom pull (docs/DESIGN.md, D35: not
taken) and all of `conform` (the field ids every part file carries, D27) together would save about 27 ms of
53-91. In a real deployment the tid's pull is a request to the API server: a probe DAG there (begin, then 3
mapped tasks each timing 20 pulls; LocalExecutor, PostgreSQL metadata, the three tasks at once on 2 cores) took
16.5-19.3 ms a pull (medians; 5.4 ms the fastest).

**Why the whole DAG stays above 1.05 x.** The group has three more Airflow tasks than the plain DAG (begin,
commit, outcome; rollback is skipped) and dag.test() one more scheduling pass (below): about 2-3 s a run whatever
its loads do, and 30 loads of 1,000,000 rows take 10.6 s plain. 1.05 x would need the run's load tasks to take
about 50 s or more (2 s a task at 30 tasks), or a group without those tasks: `begin` is where the transaction
and its lease start before any load, `commit` the one step that makes the loads visible at one CSN, `outcome`
what fails the run after a rollback (Airflow ends a run by its leaves): each is a step of the protocol, not
bookkeeping that could be folded away.

**Full run (2026-12-07 09:31 UTC, the table of that morning; the machine otherwise idle), after the commit path's cuts
(B6).** Per load task at 10,000 rows the transaction adds **82 ms on local Spark** (233 against 175 ms; target 50
ms: not met; 139 ms in the run of 01:32, on a slower night: plain 264 ms then) and **105 ms through Spark Connect** (324
against 213 ms; target 150 ms: met); the whole DAG 1.67 x and 2.67 x plain at 10,000 rows, 1.31 x and 2.41 x at
1,000,000 (target 1.05 x: not met). What is left of the local task's 82 ms, from the probes below: the tid's XCom pull
(~25 ms), `conform`'s Spark analysis (~12 ms), the catalog (~10 ms), the operator (~8 ms), and the write itself.

**Where a load task's difference goes now (2026-12-07, later; probes, not a full run).** After the commit path's
cuts (B6: a version lookup and D27's check built once, no version statements for a transaction that changed no
schema; the append's check of the table's version is one of those lookups), one local-Spark overwrite task outside
Airflow (attach, key, heartbeat, withdraw, `airflow_txn.spark.write` of 10,000 rows; 12 interleaved pairs) takes
**21 ms more than a plain `df.write.parquet`** (185 against 161 ms): `conform` about 12 ms, the catalog about 10.
In dag.test() (the B11 DAGs, 10 tasks, two or three runs each, this code and b95d7f1's in alternating processes)
the recorded load-task duration is 25-94 ms over plain with this code (median of the four pairs ~43 ms) and 45-74
ms with b95d7f1's (~60 ms): the pairs are too noisy to call the 50 ms target met. What the task adds besides the
write, from a cProfile of a 10-task run: rendering its templated `tid` is one more XCom pull (the group's `begin`
output), 25 ms a pull through dag.test()'s in-process Execution API, inside Airflow's recorded duration (start
date to end date; the Transaction link is pushed after the end date); the operator's own code (keyed try, session,
job tag) 8 ms. `conform`'s cost is Spark's analysis, not py4j: one `selectExpr` of the guarded projection plus
`DataFrame.to(schema with field ids)` cut its round trips from 58 to 15 but its time only from 12.9 to 12.2 ms
(medians of 50), and the optimizer then lost the field ids of some files' columns
(tests/conformance/test_table_changes.py caught it): not kept. The whole DAG at 10 tasks stays about 2 x plain
(3.6-4.7 against 1.8-2.6 s): the three more tasks (begin, commit, outcome) and dag.test()'s extra scheduling pass
described below.

**Full run (2026-12-07 01:32 UTC, the table of that night; the machine otherwise idle).** After this session's two
catalog changes: a keyed statement whose key has nothing before its attempt withdraws with one lookup instead of nine
statements (core/retries.py; every try's start and each write of a first try paid them), and no pool pre-ping on
PostgreSQL (not this row's SQLite catalog). Per load task at 10,000 rows the transaction adds **139 ms on local
Spark** (368 against 264 ms; target 50 ms: not met) and **144 ms through Spark Connect** (475 against 349 ms; target
150 ms: met, narrowly); the whole DAG 1.63 x and 2.09 x plain, at 1,000,000 rows 1.31 x and 2.29 x. This machine
ran slower tonight than on 2026-12-06 (the plain local task 264 against 183 ms, the plain 1,000,000-row task 464
against 315), so the two runs' differences do not compare. Measured side by side instead, the same hour, one local
overwrite task's steps outside Airflow (20 tasks, SQLite catalog, medians; d16b8c8 against this code, two rounds
each): the try's withdrawal (`compensate`) 5.9 / 5.7 -> 1.1 / 1.0 ms, and `airflow_txn.spark.write` minus a plain
`df.write.parquet` of the same rows 92 / 83 -> 79 / 49 ms (that difference is noisy: the plain write varied 208-261
ms). What is left, from the profile (10 tasks): `conform` 31 ms (py4j: each column's expression, alias and field-id
metadata, then Spark's analysis of the projection; `DataFrame.to(schema)`, which carries the metadata in one call,
took 60 ms against 28-35), the statement's open 10 ms (the overwrite's visible-part lookup 7) and registration 7 ms,
the Airflow-side XCom pull and link push 35-50 ms around the task; the 50 ms target needs the Spark-side projection
cut, not the catalog.

**Full run (2026-12-06 15:33 UTC, the table of that day; the machine otherwise idle; issue 34's rows).** Per load task,
from Airflow's recorded load-task durations (medians): at 10,000 rows a task the transaction adds **119 ms on local
Spark** (294 against 183 ms; target 50 ms: not met) and **94 ms through Spark Connect** (337 against 254 ms;
target 150 ms: met). At **1,000,000 rows a task** (the realistic load) it adds 4 ms on local Spark (319 against 315
ms: the transactional write appends into a new write dir, where the plain one overwrites a directory) and 237 ms
through Connect (595 against 358 ms). The whole DAG is still **1.30 x plain at 1,000,000 rows on local Spark**
(13.5 against 10.4 s) and **2.15 x through Connect** (25.9 against 12.0 s), 1.89 x and 1.98 x at 10,000 rows: the
1.05 target is not met at either size. Where the difference goes, measured:

- *What the run has besides its load tasks* (about 3 s a run on local Spark, whatever the rows): three more Airflow
  tasks than the plain DAG (begin, commit, outcome; rollback is skipped), about 0.3-0.4 s each under dag.test(),
  and one more scheduling pass: dag.test() finds `outcome` not runnable in the pass that skips `rollback` and
  sleeps 1 s ("No tasks to run. unrunnable tasks: outcome"; a scheduler pays a loop there too). On 30 tasks that
  is 100 ms a task of the run: on its own it keeps a 30-task DAG above 1.05 x unless each load task takes 2 s or
  more (3 s <= 5 % of 30 tasks' time).
- *Around each load task, outside its recorded duration* (cProfile of 10-task runs): rendering the operator's
  templated `tid` (an XCom pull through the Execution API) and pushing its Transaction link at the end, 35-50 ms
  a task. The empty Spark UI link the task runner also pushed is gone since this run's code (18 ms a task).
- *Inside a local-Spark load task at 10,000 rows* (cProfile, SQLite catalog, per task): the Spark job itself as
  fast as the plain write (158 against 142 ms), then `conform` 37 ms (the projection that gives each column its
  field id and guards: py4j round trips and Spark's analysis of one more select), the catalog's statements 38 ms
  (attach 2, the attempt's fence 2, heartbeat 1, withdrawing earlier tries 8, open_write 12, registering 12: each
  its own catalog transaction, the withdrawal's key lookups repeated in three of them), the lease keeper, write
  dir, footers and job tag about 10 ms. Reaching 50 ms needs both halved: one catalog transaction for the try's
  start (fence, withdraw and heartbeat together), the withdrawal's lookups skipped for a key that has staged
  nothing, and fewer round trips in `conform`. Not done here.
- *Through Spark Connect at 1,000,000 rows*: the data-source write itself is not the cost: outside Airflow, on the
  same kind of server, a transactional 1,000,000-row write through the data source took 489 ms, through Spark's
  native writer (`via="native"`, possible where client and server share the root's filesystem) 381 ms, a plain
  Connect write 416 ms (medians of 5). Inside the DAG a profile (10 tasks x 1,000,000 rows) puts the Connect load
  task in the data-source write's server job (`via.write`), and the operator's own session code outside Airflow
  gave 1.2-2.4 s a write whether each write had a new client or one client made three: not the per-task attach.
  Those probes shared the machine with a 100,000,000-part catalog build, so what makes the server job cost more
  there than in the 489 ms probe (the load, the transaction's own server session, or one transaction of many keyed
  statements against a transaction per write) was not settled.

**Full run (2026-11-27 16:51 UTC; the machine otherwise idle).** Local Spark: 9.7 s for the
transactional DAG against 6.0 s plain, **1.63x**. Spark Connect: 17.3 s against 7.7 s, **2.25x** (it was 19.0x in the
run of the morning: 321 s against 16.9 s). Neither meets the 1.05 target; what changed and what is left follow.

**Spark Connect: one server session per transaction (since the morning run).** SparkTransactionOperator now
attaches every Spark task of a transaction to ONE server session (its id derived from the server and the tid:
airflow/connect_sessions.py) and leaves it open when the task ends, closing only its own channel, so the server's
Python workers (which the data source's driver side and its write tasks run in) start once per transaction, not
once per task: what the transaction adds per load task is now (17.3 - 7.7) / 30 = 0.32 s of the run, against about
10 s before. A probe through the operator's session
code (100-row data-source writes, load 10): a new session per write 5.9-6.1 s, the transaction's session 0.29-0.45
s. What the morning run measured, for the record:

**Spark Connect: every task pays the Python start-up of the data source.** A probe outside Airflow, on the same
kind of Connect server: the first airflow_txn write (data source, 10,000 rows, overwrite of one day) in a new
Connect session took 9.5-10.8 s, the next writes in the same session 0.5-0.8 s; a plain `df.write.parquet` through
Connect 0.8-0.9 s. The server's log of one first write: 2.5 s planning (the data source's `writer()` runs in a
fresh Python process on the server: interpreter start, imports of airflow_txn, pyarrow and SQLAlchemy,
`Warehouse.open`), 3.2-3.6 s for the two write tasks (fresh Python workers: `boot` 1.4-1.5 s, `init` 1.5-2.0 s
each), 3 s for the commit (`commit()` in another fresh Python process on the server's driver). Spark Connect keeps
Python workers per session, and SparkTransactionOperator stops its Connect session at the end of every task (so
that the gRPC channel's threads do not keep the task's process alive), so every Connect task starts them all
again; a plain Connect write runs in the JVM alone. That is the 19x: about 10 s per task against about 0.5 s; the
target cannot be reached without keeping the Python workers across sessions or tasks (not changed here: the
operator and the data source are outside this benchmark's scope).

**Local Spark: where the 2.36x of the morning run went (1.63x now).** The transactional DAG has four more tasks
than the plain one (begin,
commit, outcome, and rollback, skipped), each a full Airflow task under dag.test(): the run minus its load tasks'
durations was 5.7 s against 2.1 s plain. Per load task (766 ms against 337 ms), probes outside Airflow after the
run, 10,000 rows, medians of 11: the transactional write + commit 391 ms against 299 ms for the plain write (its
Spark job 317 ms: a partitionBy write into the write dir, as fast as a plain partitionBy dynamic overwrite, 302
ms; the rest is the write dir, footers, registration, commit); the operator's own steps (the hook's
Warehouse.open, attach, heartbeat, lease keeper, compensate) 30-50 ms. That explains about 130 ms of the 430 ms
per task; the rest was not found within this benchmark (the run's load was several times the probes').

**What dag.test() hides.** All tasks run in one process, so the local variants share one SparkSession started
before the timed runs; on a real worker each task process starts its own JVM (several seconds), which is the cost
a Spark Connect server saves, and which this row does not include. The load on this shared 2-core machine moves
single runs by tens of percent: the ratios are of medians of interleaved runs.
"""


# -- the child process --------------------------------------------------------------------------------------------
def _child(config_path: Path) -> None:
    config = json.loads(config_path.read_text())
    import tests.airflow.conftest as harness  # sets AIRFLOW_HOME & co. on import, before Airflow is imported

    assert harness.BASE is not None, "Airflow or PySpark is not installed"
    try:
        _measure(config, harness)
    finally:
        shutil.rmtree(harness.BASE, ignore_errors=True)


def _measure(config: dict[str, Any], harness: Any) -> None:
    work = Path(config["work"])
    work.mkdir(parents=True)
    # a DAG folder of its own: dag.test() parses the whole folder on every call, the example DAGs would add
    # the same seconds to every variant
    dags = harness.BASE / "b11_dags"
    dags.mkdir()
    (dags / "_b11_dag.py").symlink_to(REPO / "benchmarks" / "_b11_dag.py")
    os.environ["AIRFLOW__CORE__DAGS_FOLDER"] = str(dags)
    catalog, root = f"sqlite:///{work / 'catalog.db'}", work / "warehouse"
    os.environ["AIRFLOW_CONN_AIRFLOW_TXN_DEFAULT"] = harness.connection_json(
        catalog, root, {"spark.sql.session.timeZone": "UTC"})  # no static settings: a Connect server refuses them
    import pyarrow as pa
    from airflow.dag_processing.dagbag import DagBag
    from airflow.utils import db

    from airflow_txn import Warehouse
    from airflow_txn.airflow.operators.spark import spark_session
    from tests.airflow.helpers import run_dag, task_states

    db.initdb()
    bag = DagBag(dag_folder=str(dags))
    assert bag.import_errors == {}, bag.import_errors
    with Warehouse.open(catalog=catalog, root=str(root)) as wh:
        wh.create_table("b11.events", pa.schema([("id", pa.int64()), ("day", pa.string()), ("value", pa.float64())]),
                        partition_by=["day"])
    spark = spark_session(harness.SPARK_CONF, app_name="b11")  # the session every local task reuses
    spark.sparkContext.setLogLevel("ERROR")
    durations: dict[str, list[list[float]]] = {}
    skipped: dict[str, str] = {}

    def one(name: str, tasks: int, rows: int) -> float:
        dag_id, remote = VARIANTS[name]
        conf = {"tasks": tasks, "rows": rows, "remote": config["connect"] if remote else "", "out": str(work / "plain")}
        start = time.perf_counter()
        try:
            dag_run = run_dag(bag, dag_id, conf)
        finally:
            os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)  # set by a Connect session: the local one next
        seconds = time.perf_counter() - start
        if str(dag_run.state) != "success":
            raise RuntimeError(f"{name}: the DAG run ended {dag_run.state}: {task_states(dag_run)}")
        durations.setdefault(name, []).append(_load_durations(dag_run))
        return seconds

    names = [name for name, (_, remote) in VARIANTS.items() if config["connect"] or not remote]
    for name in list(names):  # warm-up: a small run of each; a variant that cannot run says why
        try:
            one(name, WARMUP_TASKS, ROWS_PER_TASK)
        except Exception as exc:
            skipped[name] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
            names.remove(name)
    samples: dict[str, dict[str, list[float]]] = {}
    by_size: dict[str, dict[str, list[list[float]]]] = {}
    for tasks, rows, reps in config["sizes"]:  # each size's runs interleaved, sizes one after the other
        durations.clear()
        samples[str(rows)] = _bench.interleave(
            {name: functools.partial(one, name, int(tasks), int(rows)) for name in names}, reps=int(reps), warmup=0)
        by_size[str(rows)] = dict(durations)
    spark.stop()
    Path(config["result"]).write_text(json.dumps({"samples": samples, "durations": by_size, "skipped": skipped}))


def _load_durations(dag_run: Any) -> list[float]:
    """Airflow's recorded duration (s) of each mapped load task of the run."""
    from airflow.utils.session import create_session

    with create_session() as session:
        return [float(ti.duration or 0.0) for ti in dag_run.get_task_instances(session=session)
                if ti.map_index >= 0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(Path(args.child))
        return
    for row in run(args.quick):
        print(row)


if __name__ == "__main__":
    main()
