"""Issue 31, item 6: the model-based histories of tests/core/test_retry_dependencies.py, each statement through an
engine path of its own (paths.py), mixed within one history: a write through the core, a keyed read through the
data source, its retry through Spark's native writer, ...

A history is one transaction over two tables: writer keys (A, B, C) append, overwrite a partition, delete and update
rows of both, and merge sources into them (tests/keyed_model.py MERGES: upsert, an expression-guarded update, a
delete, a sync deleting what the source lacks, ...); reader keys (R, S) read `h.a` through a keyed handle and
append rows derived from what they read to `h.b` (the read and the write each through a path of their own). Keys
run again (a new attempt: a retry), so a retry withdraws what other keys built on (invariant 7). Checked against the
model (tests/keyed_model.py):

- after every statement, the transaction's view (read by the core) is every key's latest statement re-run in the
  order they last ran, leaving out the keys the engine has invalidated (`must_run_again`); a keyed read through a
  path gives exactly that view of its table;
- a commit refusal (InvalidatedKeysError) names the invalidated keys, and at least every reader whose read a
  re-run from scratch would not repeat (keeping its work would be wrong); the keys it names run again (each
  through a path chosen again) until the commit goes through;
- the committed tables are every key's latest statement re-run from scratch.

Reader keys write SOURCE too, now and then: a newer attempt reading before its first write must not see what only
its older attempts staged there (a re-run from scratch would not; it once did, since they are withdrawn only at the
first write).

Histories are generated from fixed seeds (deterministic); few and short, as each Spark statement costs a job or
two. A path listed in paths.py is drawn here like the others; `test_every_path_takes_every_part` checks the
histories of each root send every kind of statement through every path of that root.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from airflow_txn import Warehouse
from airflow_txn.core.transaction import Transaction
from airflow_txn.errors import InvalidatedKeysError
from tests.conformance.paths import PATHS, ROOTS, EnginePath, open_warehouse, session_of
from tests.helpers import EVENTS
from tests.keyed_model import (
    DAYS,
    MERGE_ON,
    MERGES,
    Latest,
    Op,
    Row,
    State,
    commit_running_again,
    derived,
    rows_table,
    sorted_rows,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SOURCE, TARGET = "h.a", "h.b"
WRITERS, READERS = "ABC", "RS"
HISTORIES = 6
"""Histories per root."""
STEPS = 6
"""Statements per history, before the reruns a commit asks for."""


@dataclass(frozen=True)
class Step:
    key: str
    table: str
    op: Op
    path: str
    """The path running the statement (a derive: its write)."""
    read_path: str | None = None
    """A derive: the path of its keyed read."""

    def __str__(self) -> str:
        via = self.path if self.read_path is None else f"read {self.read_path}, write {self.path}"
        return f"{self.key}: {self.op} into {self.table} ({via})"


@dataclass(frozen=True)
class History:
    seed: int
    start: list[Row]
    """Committed rows of SOURCE before the transaction."""
    steps: list[Step]
    paths: list[str]
    """The paths its statements (and reruns) are drawn from."""

    def __str__(self) -> str:
        return f"history seed {self.seed}, {SOURCE} committed {self.start}:\n  " + "\n  ".join(map(str, self.steps))


def paths_of(root: str) -> list[EnginePath]:
    return [p for p in PATHS if root == "local" or not p.local_roots_only]


def generate(seed: int) -> History:
    """A history with a keyed read of SOURCE whose writer runs again after it (so a retry withdraws the reader's
    work), a delete or update, and a merge; drawn again from the same generator until it has all three. Paths:
    `with_paths`."""
    rng = random.Random(seed)
    while True:
        start = sorted({(rng.randrange(4), rng.choice(DAYS), 0.0) for _ in range(rng.randrange(3))})
        steps = [_step(rng) for _ in range(STEPS)]
        if _retries_under_a_reader(steps) and any(s.op.kind in ("delete", "update") for s in steps) \
                and any(s.op.kind == "merge" for s in steps):
            return History(seed, start, steps, [])


def _step(rng: random.Random) -> Step:
    if rng.random() < 0.3:
        return Step(rng.choice(READERS), TARGET, Op("derive", source=SOURCE), "", "")
    kind = rng.choice(["append", "append", "delete", "update", "overwrite", "merge"])
    op = Op(kind, tuple(sorted(rng.sample(range(4), rng.randint(1, 3)))), rng.choice(DAYS),
            clause=rng.choice(sorted(MERGES)))
    key = rng.choice(READERS) if rng.random() < 0.2 else rng.choice(WRITERS)
    return Step(key, SOURCE if rng.random() < 0.75 else TARGET, op, "")


ROLES = {"append": "write", "overwrite": "write", "delete": "rewrite", "update": "rewrite", "merge": "merge",
         "derive": "derive"}
"""What a statement does with its path (a derive's read: "keyed read")."""


def with_paths(generated: list[History], paths: list[str], seed: int) -> list[History]:
    """The histories with a path for each statement: per role, the statements of all histories in turn take the
    paths in turn (in an order drawn from `seed`), so with as many statements of a role as paths every path takes
    that role, and one history mixes paths."""
    rng = random.Random(seed)
    order = {role: rng.sample(paths, len(paths)) for role in [*sorted(set(ROLES.values())), "keyed read"]}
    taken = dict.fromkeys(order, 0)

    def next_path(role: str) -> str:
        taken[role] += 1
        return order[role][(taken[role] - 1) % len(paths)]

    placed = []
    for history in generated:
        steps = [Step(s.key, s.table, s.op, next_path(ROLES[s.op.kind]),
                      next_path("keyed read") if s.op.kind == "derive" else None) for s in history.steps]
        placed.append(History(history.seed, history.start, steps, paths))
    return placed


def _retries_under_a_reader(steps: list[Step]) -> bool:
    for i, read in enumerate(steps):
        if read.op.kind == "derive":
            wrote = {s.key for s in steps[:i] if s.table == SOURCE and s.op.kind in ("append", "overwrite", "merge")}
            if wrote & {s.key for s in steps[i + 1:]}:
                return True
    return False


def histories(root: str) -> list[History]:
    seed = 1000 * ROOTS.index(root)
    return with_paths([generate(seed + n) for n in range(HISTORIES)], [p.name for p in paths_of(root)], seed)


def _params() -> list[Any]:
    params = []
    for root in ROOTS:
        spark = any(p.session is not None for p in paths_of(root))
        marks = [*([pytest.mark.spark] if spark else []), *([pytest.mark.s3] if root == "s3" else [])]
        params += [pytest.param(root, n, marks=marks, id=f"{root}-h{n}") for n in range(HISTORIES)]
    return params


def test_every_path_takes_every_part() -> None:
    """Per root, its histories append or overwrite, delete or update, merge, read (keyed) and write a read's result
    through every path of the root."""
    for root in ROOTS:
        used: dict[str, set[str]] = {p.name: set() for p in paths_of(root)}
        for history in histories(root):
            for step in history.steps:
                used[step.path].add(ROLES[step.op.kind])
                if step.read_path is not None:
                    used[step.read_path].add("keyed read")
        assert used == {name: {"write", "rewrite", "merge", "derive", "keyed read"} for name in used}, root


@pytest.fixture
def hwh(request: pytest.FixtureRequest, root_kind: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> Iterator[Warehouse]:
    yield from open_warehouse(request, root_kind, tmp_path, monkeypatch)


class Runner:
    """Runs a history's statements in one transaction, each through its path, checking the view after each."""

    def __init__(self, history: History, wh: Warehouse, request: pytest.FixtureRequest,
                 monkeypatch: pytest.MonkeyPatch) -> None:
        self.history, self.wh, self.request, self.monkeypatch = history, wh, request, monkeypatch
        self.paths = {p.name: p for p in PATHS}
        self.start: State = {SOURCE: sorted(history.start), TARGET: []}
        self.latest = Latest()
        self.attempts: dict[str, int] = {}
        self.done: list[str] = []
        """What ran so far, for the failure messages."""
        self.t: Transaction

    def session(self, name: str) -> tuple[EnginePath, SparkSession | None]:
        path = self.paths[name]
        return path, session_of(path, self.request, self.monkeypatch)

    def begin(self) -> None:
        for table in (SOURCE, TARGET):
            self.wh.create_table(table, EVENTS, partition_by=["day"])
        if self.history.start:
            with self.wh.begin() as t:
                t.append(SOURCE, rows_table(self.history.start))
        self.t = self.wh.begin()

    def run(self, step: Step) -> None:
        attempt = self.attempts[step.key] = self.attempts.get(step.key, 0) + 1
        self.done.append(f"{step} attempt {attempt}")
        handle = self.wh.attach(self.t.tid).use_key(step.key, attempt)
        op, seen = step.op, None
        if op.kind == "derive":
            assert op.source is not None and step.read_path is not None
            path, spark = self.session(step.read_path)
            seen = sorted_rows(path.read(spark, self.wh, op.source, txn=handle))
            path, spark = self.session(step.path)
            path.write(spark, handle, step.table, rows_table(derived(seen)))
            # what the read had to see: the view without the key's older attempts and the keys its write then
            # invalidated (they built on those attempts): the view a re-run of the key from scratch reads
            before = self.expected_view(leaving_out=step.key)[op.source]
            assert seen == before, self.failed(f"the keyed read through {step.read_path} gave {seen}, not {before}")
        else:
            path, spark = self.session(step.path)
            if op.kind in ("append", "overwrite"):
                path.write(spark, handle, step.table, rows_table(op.rows()), mode=op.kind,
                           partitions=[{"day": op.day}] if op.kind == "overwrite" else None)
            elif op.kind == "delete":
                path.delete(spark, handle, step.table, "id", op.ids)
            elif op.kind == "merge":
                path.merge(spark, handle, step.table, rows_table(op.rows()), MERGE_ON, **op.merge_clauses())
            else:
                path.update(spark, handle, step.table, "id", op.ids, {"value": 1.0})
        self.latest.ran(step.key, step.table, op, seen)
        view = {table: sorted_rows(self.t.read(table)) for table in (SOURCE, TARGET)}
        expected = self.expected_view()
        assert view == expected, self.failed(f"after it the view is {view}, the model's {expected}")

    def expected_view(self, leaving_out: str | None = None) -> State:
        """Every valid key's latest statement (but `leaving_out`'s) re-run in order, a derive appending what it
        read."""
        invalid = set(self.wh.transaction_info(self.t.tid)["must_run_again"]) | {leaving_out}
        return self.latest.replay(self.start, set(self.latest.of) - invalid, as_staged=True)

    def run_again(self, rng: random.Random) -> Any:
        def again(key: str) -> None:
            ran = self.latest.of[key]
            paths = self.history.paths
            if ran.op.kind == "derive":
                self.run(Step(key, ran.table, ran.op, rng.choice(paths), rng.choice(paths)))
            else:
                self.run(Step(key, ran.table, ran.op, rng.choice(paths)))
        return again

    def refused(self, refusal: InvalidatedKeysError) -> None:
        self.done.append(f"commit refused: {refusal.keys}")
        invalid = set(self.wh.transaction_info(self.t.tid)["must_run_again"])
        assert set(refusal.keys) == invalid, self.failed(f"the refusal names {refusal.keys}, invalidated are {invalid}")
        stale = set(self.latest.stale_readers(self.start))
        assert stale <= invalid, self.failed(f"{sorted(stale - invalid)} read what a re-run would not, not refused")

    def failed(self, what: str) -> str:
        return f"{what} ...\n{self.history}\nran:\n  " + "\n  ".join(self.done)


@pytest.mark.parametrize(("root_kind", "number"), _params())
def test_keyed_histories_through_mixed_paths_match_the_model(
        root_kind: str, number: int, hwh: Warehouse, request: pytest.FixtureRequest,
        monkeypatch: pytest.MonkeyPatch) -> None:
    history = histories(root_kind)[number]
    runner = Runner(history, hwh, request, monkeypatch)
    runner.begin()
    for step in history.steps:
        runner.run(step)
    commit_running_again(runner.t, runner.latest, runner.run_again(random.Random(history.seed + 1)), runner.refused)
    assert runner.latest.stale_readers(runner.start) == [], runner.failed("the commit kept stale readers")
    committed = {table: sorted_rows(hwh.read(table)) for table in (SOURCE, TARGET)}
    expected = runner.latest.replay(runner.start)
    assert committed == expected, runner.failed(f"committed {committed}, the model {expected}")
