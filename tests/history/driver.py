"""Running one randomized history: set up the tables, start writer and reader processes, SIGKILL some
at random moments (starting replacements), keep recovery, vacuum, compaction and a compatible change of hist.wide
(the writers change it too, but a slow machine may commit none of theirs) running, then stop everything,
recover, resolve every transaction whose end was not recorded, and record a final read and the
commit log. Everything goes into history files in one directory, which checker.py judges.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airflow_txn import Warehouse
from tests.history.recorder import (
    ACCOUNTS,
    CONSTRAINTS,
    EVENTS,
    GROUPS,
    ITEMS,
    LEASE_SECONDS,
    NAMESPACE,
    PARTITION_BY,
    SCHEMA,
    START_BALANCE,
    TABLES,
    WIDE,
    RecordedTxn,
    Recorder,
    cols_of,
    expected,
    snapshot_read,
)
from tests.history.workload import Writer

REPO = Path(__file__).resolve().parents[2]
RECOVER_EVERY = 1.5
VACUUM_EVERY = 5.0
COMPACT_EVERY = 3.0
CHANGE_EVERY = 4.0
STOP_TIMEOUT = 60.0
START_TIMEOUT = 120.0  # a loaded machine can take this long to start the first workers (imports)


@dataclass
class RunConfig:
    seconds: float = 25.0
    writers: int = 3
    readers: int = 2
    kill_every: tuple[float, float] = (2.0, 6.0)  # seconds between kills, drawn uniformly
    min_commits: int = 40  # on a slow machine, run past `seconds` (up to 3x) until this many commits


@dataclass
class RunResult:
    directory: Path
    kills: int = 0
    commits: int = 0
    crashed: list[str] = field(default_factory=list)  # workers that exited non-zero without being killed
    hung: list[str] = field(default_factory=list)  # workers that did not stop when asked
    seconds: float = 0.0


@dataclass
class Worker:
    name: str
    role: str
    proc: subprocess.Popen[bytes]
    history: Path
    killed: bool = False
    started: bool = False
    offset: int = 0  # how far its history has been scanned for commits
    last_event: str = ""

    def scan(self) -> int:
        """Note whether it has started; return the number of commits it recorded since the last scan."""
        if not self.history.exists():
            return 0
        with self.history.open("rb") as fh:
            fh.seek(self.offset)
            chunk = fh.read()
        complete = chunk[: chunk.rfind(b"\n") + 1]
        self.offset += len(complete)
        self.started = self.started or b'"ev": "start"' in complete
        if complete:
            self.last_event = json.loads(complete.splitlines()[-1])["ev"]
        return complete.count(b'"outcome": "committed"')


class Driver:
    def __init__(self, catalog: str, root: Path, directory: Path, seed: int, config: RunConfig) -> None:
        self.catalog, self.root, self.dir, self.seed, self.config = catalog, root, directory, seed, config
        self.dir.mkdir(parents=True, exist_ok=True)
        self.stop_file = self.dir / "STOP"
        self.rng = random.Random(f"{seed}/driver")
        self.rec = Recorder(self.dir / "driver.jsonl", "driver")
        self.workers: list[Worker] = []
        self.serial = {"writer": 0, "reader": 0}
        self.result = RunResult(directory=self.dir)

    # -- processes ----------------------------------------------------------------------------------
    def spawn(self, role: str) -> Worker:
        self.serial[role] += 1
        name = f"{role[0].upper()}{self.serial[role]}"
        history = self.dir / f"{name}.jsonl"
        with (self.dir / f"{name}.stderr").open("wb") as err:
            proc = subprocess.Popen(
                [sys.executable, "-m", "tests.history.workload", role, self.catalog, str(self.root),
                 str(history), name, str(self.seed), str(self.stop_file)],
                cwd=REPO, stdout=subprocess.DEVNULL, stderr=err, stdin=subprocess.DEVNULL,
            )
        worker = Worker(name, role, proc, history)
        self.workers.append(worker)
        self.rec.emit("spawn", worker=name, role=role, pid=proc.pid)
        return worker

    def kill_one(self) -> None:
        """SIGKILL a random live worker that has started (by its pid; writers more often) and start a
        replacement. Every other time, aim at a writer inside commit() (recorded commit_start, no end
        yet), so some commits end with an unknown outcome that recovery must settle."""
        live = [w for w in self.workers if w.proc.poll() is None and w.started]
        if not live:
            return
        weights = [4.0 if w.role == "writer" else 1.0 for w in live]
        victim = self.rng.choices(live, weights=weights)[0]
        if self.rng.random() < 0.5:
            victim = self.committing_writer(live) or victim
        victim.proc.kill()
        victim.proc.wait(timeout=30)
        victim.killed = True
        self.result.kills += 1
        self.rec.emit("kill", worker=victim.name, pid=victim.proc.pid)
        self.spawn(victim.role)

    def committing_writer(self, live: list[Worker]) -> Worker | None:
        """Wait (up to 2 s) for a writer that is inside commit(), then a random few milliseconds more."""
        limit = time.monotonic() + 2.0
        while time.monotonic() < limit:
            self.result.commits += sum(w.scan() for w in live)
            inside = [w for w in live if w.role == "writer" and w.last_event == "commit_start"]
            if inside:
                time.sleep(self.rng.uniform(0.0, 0.05))
                return self.rng.choice(inside)
            time.sleep(0.003)
        return None

    # -- the run ------------------------------------------------------------------------------------
    def setup(self, wh: Warehouse) -> None:
        for table in TABLES:
            wh.create_table(table, SCHEMA, partition_by=PARTITION_BY[table])
        self.rec.emit("setup", seed=self.seed, config=vars(self.config) | {"lease_seconds": LEASE_SECONDS},
                      tables=PARTITION_BY, constraints=CONSTRAINTS, namespace=NAMESPACE,
                      schemas={table: cols_of(wh.schema(table)) for table in TABLES})
        tx = RecordedTxn(self.rec, wh, "setup.1", "snapshot")
        for rid in sorted({r for c in CONSTRAINTS for r in c["rids"]}):  # one part per account
            tx.append(ACCOUNTS, [[rid, tx.tok, START_BALANCE, ""]])
        tx.append(ITEMS, [[f"setup.1.i{k}", tx.tok, k, ""] for k in range(20)])
        for grp in GROUPS:
            tx.append(EVENTS, [[f"setup.1.{grp}.{k}", tx.tok, k, grp] for k in range(3)])
        tx.append(WIDE, [[f"setup.1.w{k}", tx.tok, k, GROUPS[k % 2], {}] for k in range(4)])
        assert tx.commit() is not None, "the setup transaction did not commit"

    def run(self) -> RunResult:
        started = time.monotonic()
        wh = Warehouse.open(catalog=self.catalog, root=str(self.root))
        try:
            self.setup(wh)
            for _ in range(self.config.writers):
                self.spawn("writer")
            for _ in range(self.config.readers):
                self.spawn("reader")
            self.wait_started()
            self.churn(wh)
            self.stop()
            self.settle(wh)
        finally:
            for w in self.workers:  # only if something above failed: never leave a worker behind
                if w.proc.poll() is None:
                    w.proc.kill()
                    w.proc.wait(timeout=30)
            wh.close()
            self.rec.close()
        self.result.seconds = time.monotonic() - started
        return self.result

    def wait_started(self) -> None:
        """The clock starts once every first worker runs (starting takes a while on a loaded machine)."""
        limit = time.monotonic() + START_TIMEOUT
        while not all(w.started for w in self.workers) and time.monotonic() < limit:
            self.result.commits += sum(w.scan() for w in self.workers)
            if any(w.proc.poll() is not None for w in self.workers):
                break  # a worker died while starting: churn() notes it as crashed
            time.sleep(0.1)
        self.rec.emit("running", started=[w.name for w in self.workers if w.started])

    def churn(self, wh: Warehouse) -> None:
        """For the configured time (longer until min_commits, up to 3x): kill at random moments; run
        recovery, vacuum, compaction and a change of hist.wide now and then."""
        begun = time.monotonic()
        deadline, limit = begun + self.config.seconds, begun + 3 * self.config.seconds
        next_kill = begun + self.rng.uniform(*self.config.kill_every)
        next_recover = begun + RECOVER_EVERY
        next_vacuum = begun + VACUUM_EVERY
        next_compact = begun + COMPACT_EVERY
        next_change = begun + CHANGE_EVERY
        changer = Writer(wh, self.rec, "driver", self.rng)
        while (now := time.monotonic()) < limit and (now < deadline or self.result.commits < self.config.min_commits):
            self.result.commits += sum(w.scan() for w in self.workers)
            if now >= next_kill:
                self.kill_one()
                next_kill = now + self.rng.uniform(*self.config.kill_every)
            if now >= next_recover:
                report = wh.recover()
                self.rec.emit("recover", rolled_back=len(report["rolled_back"]),
                              rolled_forward=report["rolled_forward"])
                next_recover = now + RECOVER_EVERY
            if now >= next_vacuum:
                self.rec.emit("vacuum", result=_summary(wh.vacuum(retention_seconds=3600)))
                next_vacuum = now + VACUUM_EVERY
            if now >= next_compact:
                self.compact(wh)
                next_compact = now + COMPACT_EVERY
            if now >= next_change:
                self.change(changer)
                next_change = now + CHANGE_EVERY
            for w in self.workers:
                if w.proc.poll() not in (None, 0) and not w.killed and w.name not in self.result.crashed:
                    self.result.crashed.append(w.name)
            time.sleep(0.05)

    def compact(self, wh: Warehouse) -> None:
        """Merges no snapshot may notice, racing the writers and the kills (hist.wide's parts may be under several
        versions of its schema)."""
        table = self.rng.choice([ITEMS, EVENTS, WIDE])  # accounts keep one row per part (write skew)
        try:
            self.rec.emit("compact", table=table, result=_summary(wh.compact(table)))
        except Exception as exc:
            if not expected(exc):
                raise
            self.rec.emit("compact", table=table, error=type(exc).__name__, msg=str(exc)[:300])

    def change(self, changer: Writer) -> None:
        """A recorded transaction of one compatible change of hist.wide, racing the writers (their changes of it
        included: the second of two fails at once)."""
        tx = RecordedTxn(self.rec, changer.wh, changer.token(), "snapshot")
        try:
            changer.compatible_change(tx)
        except Exception as exc:
            if not expected(exc):
                raise
            tx.abort(exc)
            return
        tx.commit()

    def stop(self) -> None:
        self.stop_file.touch()
        limit = time.monotonic() + STOP_TIMEOUT
        for w in self.workers:
            try:
                code = w.proc.wait(timeout=max(0.1, limit - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.result.hung.append(w.name)
                w.proc.kill()
                w.proc.wait(timeout=30)
                continue
            if code != 0 and not w.killed and w.name not in self.result.crashed:
                self.result.crashed.append(w.name)
        self.rec.emit("stopped")

    def settle(self, wh: Warehouse) -> None:
        """Recover until no transaction of the history is still open, then resolve, read and log."""
        open_tids = _unfinished(self.dir)
        deadline = time.monotonic() + LEASE_SECONDS + 30
        while True:
            wh.recover()
            states = {tok: wh.transaction_info(tid) for tok, tid in open_tids.items()}
            if all(i["state"] != "active" for i in states.values()) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        for tok, info in sorted(states.items()):
            self.rec.emit("resolve", tok=tok, tid=open_tids[tok], state=info["state"], csn=info.get("commit_csn"))
        t0 = time.monotonic()
        csn = wh.readable_csn()
        self.rec.emit("snapread", how="final", csn=csn, latest=csn, t0=t0, **snapshot_read(wh, csn))
        log = wh.commit_log(limit=1_000_000)
        self.rec.emit("commit_log", records=sorted([r["csn"], r["tid"]] for r in log))


def _summary(result: dict[str, Any]) -> dict[str, Any]:
    return {k: (len(v) if isinstance(v, list | dict) else v) for k, v in result.items()}


def _unfinished(directory: Path) -> dict[str, str]:
    """tok -> tid of every transaction that began but has no recorded end (its worker was killed)."""
    begun: dict[str, str] = {}
    ended: set[str] = set()
    for path in directory.glob("*.jsonl"):
        for line in path.read_text().splitlines():
            try:
                ev = json.loads(line)
            except ValueError:
                continue  # the torn last line of a killed worker
            if ev["ev"] == "begin":
                begun[ev["tok"]] = ev["tid"]
            elif ev["ev"] == "end":
                ended.add(ev["tok"])
    return {tok: tid for tok, tid in begun.items() if tok not in ended}


def run_history(catalog: str, root: Path, directory: Path, seed: int, config: RunConfig) -> RunResult:
    return Driver(catalog, root, directory, seed, config).run()
