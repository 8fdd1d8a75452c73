"""The history checker on hand-made histories: a good one passes, and every kind of bad one is reported
(a torn read, a lost commit, a duplicated row, a dirty read, a future read, a write skew, a lost update,
a stale snapshot, a CSN out of real-time order, an inconsistent read inside a transaction, a killed
commit left unresolved, two concurrent merges inserting one key), so the checker itself can fail; and its
model of MERGE gives every clause's result. And it shares no code with the engine."""

from __future__ import annotations

import ast
import copy
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.history import checker

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
ITEMS, EVENTS, ACCOUNTS = "hist.items", "hist.events", "hist.accounts"
SER = {"table": ACCOUNTS, "rids": ["ser-a", "ser-b"], "min_sum": 0, "enforced": True, "isolation": "serializable"}
Event = dict[str, Any]


class History:
    """A tiny history builder: transactions and reads on a clock that ticks once per event."""

    def __init__(self) -> None:
        self.now = 0.0
        self.events: list[Event] = [self.ev("setup", "driver", tables={ITEMS: [], EVENTS: ["grp"], ACCOUNTS: []},
                                            constraints=[SER])]

    def ev(self, kind: str, worker: str, **fields: Any) -> Event:
        self.now += 1.0
        return {"ev": kind, "w": worker, "t": self.now, **fields}

    def txn(self, tok: str, snap: int, steps: list[Event], csn: int | None = None, outcome: str = "committed",
            iso: str = "snapshot", worker: str = "W1", err: str | None = None, end: bool = True) -> None:
        self.events.append(self.ev("begin", worker, tok=tok, tid=f"tid-{tok}", snap=snap, iso=iso,
                                   t0=self.now + 0.5))
        for step in steps:
            self.events.append(self.ev(step.pop("ev"), worker, tok=tok, **step))
        if outcome in ("committed", "unknown"):
            self.events.append(self.ev("commit_start", worker, tok=tok))
        if not end or outcome == "unknown":
            return
        fields: dict[str, Any] = {"outcome": outcome}
        if outcome == "committed":
            fields.update(csn=csn, t0=self.now)
        if err:
            fields["err"] = err
        self.events.append(self.ev("end", worker, tok=tok, **fields))

    def read(self, csn: int, tables: dict[str, list[list[Any]]], how: str = "latest", worker: str = "R1",
             latest: int | None = None) -> None:
        full = {ITEMS: [], EVENTS: [], ACCOUNTS: [], **tables}
        self.events.append(self.ev("snapread", worker, how=how, csn=csn, latest=latest or csn,
                                   t0=self.now + 0.5, tables=full))

    def finish(self, csn: int, tables: dict[str, list[list[Any]]], log: list[list[Any]]) -> list[Event]:
        self.read(csn, tables, how="final", worker="driver")
        self.events.append(self.ev("commit_log", "driver", records=log))
        return self.events


def append(table: str, *rows: list[Any]) -> Event:
    return {"ev": "op", "op": "append", "table": table, "rows": list(rows), "n": len(rows)}


def update(table: str, rid: str, val: int, tok: str, n: int = 1) -> Event:
    return {"ev": "op", "op": "update", "table": table, "rid": rid, "set": {"val": val, "tok": tok}, "n": n}


def read(table: str, *rows: list[Any]) -> Event:
    return {"ev": "read", "table": table, "grp": None, "rows": list(rows)}


def merge(table: str, source: list[list[Any]], on: list[str], clause: str, n: list[int]) -> Event:
    """A recorded MERGE (recorder.RecordedTxn.merge): its source, keys, clause by name and [updated, inserted,
    deleted]."""
    return {"ev": "op", "op": "merge", "table": table, "source": source, "on": on, "clause": clause, "n": n}


I1, I2 = ["i1", "setup", 1, ""], ["i2", "setup", 2, ""]
SA, SB = ["ser-a", "setup", 100, ""], ["ser-b", "setup", 100, ""]
T1_ITEM, T1_EVENT = ["t1.1", "T1", 10, ""], ["t1.2", "T1", 11, "g0"]
I1_T2 = ["i1", "T2", 5, ""]
BASE_LOG = [[2, "tid-setup"], [3, "tid-T1"], [4, "tid-T2"]]
LATEST = {ITEMS: [I1_T2, I2, T1_ITEM], EVENTS: [T1_EVENT], ACCOUNTS: [SA, SB]}


def base(h: History) -> None:
    """setup (CSN 2), T1 appends to two tables (CSN 3), T2 updates a row it read (CSN 4), A aborts."""
    h.txn("setup", 1, [append(ITEMS, I1, I2), append(ACCOUNTS, SA), append(ACCOUNTS, SB)], csn=2)
    h.read(2, {ITEMS: [I1, I2], ACCOUNTS: [SA, SB]})
    h.txn("T1", 2, [append(ITEMS, T1_ITEM), append(EVENTS, T1_EVENT)], csn=3)
    h.read(3, {ITEMS: [I1, I2, T1_ITEM], EVENTS: [T1_EVENT], ACCOUNTS: [SA, SB]})
    h.txn("T2", 3, [read(ITEMS, I1, I2, T1_ITEM), update(ITEMS, "i1", 5, "T2")], csn=4, worker="W2")
    h.txn("A", 4, [append(ITEMS, ["a.1", "A", 0, ""])], outcome="aborted", err="SerializationError")
    h.read(2, {ITEMS: [I1, I2], ACCOUNTS: [SA, SB]}, how="random", latest=4)


def good() -> list[Event]:
    h = History()
    base(h)
    h.read(4, LATEST)
    return h.finish(4, LATEST, BASE_LOG)


def torn_read() -> list[Event]:
    h = History()
    base(h)
    h.read(4, {**LATEST, EVENTS: []})  # T1's item but not its event
    return h.finish(4, LATEST, BASE_LOG)


def future_read() -> list[Event]:
    h = History()
    base(h)
    h.read(2, {ITEMS: [I1, I2, T1_ITEM], EVENTS: [T1_EVENT], ACCOUNTS: [SA, SB]}, how="random", latest=4)
    return h.finish(4, LATEST, BASE_LOG)


def lost_commit() -> list[Event]:
    h = History()
    base(h)
    return h.finish(4, {ITEMS: [I1_T2, I2], ACCOUNTS: [SA, SB]}, [r for r in BASE_LOG if r[1] != "tid-T1"])


def duplicate_row() -> list[Event]:
    h = History()
    base(h)
    return h.finish(4, {**LATEST, ITEMS: [I1_T2, I2, T1_ITEM, T1_ITEM]}, BASE_LOG)


def dirty_read() -> list[Event]:
    h = History()
    base(h)
    h.read(4, {**LATEST, ITEMS: [*LATEST[ITEMS], ["a.1", "A", 0, ""]]})
    return h.finish(4, LATEST, BASE_LOG)


def concurrent(h: History, snap: int, iso: str, txns: list[tuple[str, list[Event], int]]) -> None:
    """Begin every transaction first (one snapshot), then run each one's statements and commit, in order."""
    for number, (tok, _, _) in enumerate(txns):
        h.events.append(h.ev("begin", f"W{number}", tok=tok, tid=f"tid-{tok}", snap=snap, iso=iso, t0=h.now))
    for number, (tok, steps, csn) in enumerate(txns):
        for step in steps:
            h.events.append(h.ev(step.pop("ev"), f"W{number}", tok=tok, **step))
        h.events.append(h.ev("commit_start", f"W{number}", tok=tok))
        h.events.append(h.ev("end", f"W{number}", tok=tok, outcome="committed", csn=csn, t0=h.now))


def write_skew() -> list[Event]:
    """Two serializable withdrawals, each reading both accounts and taking from a different one."""
    h = History()
    base(h)
    concurrent(h, 4, "serializable", [
        ("S1", [read(ACCOUNTS, SA, SB), update(ACCOUNTS, "ser-a", -50, "S1")], 5),
        ("S2", [read(ACCOUNTS, SA, SB), update(ACCOUNTS, "ser-b", -60, "S2")], 6),
    ])
    final = {**LATEST, ACCOUNTS: [["ser-a", "S1", -50, ""], ["ser-b", "S2", -60, ""]]}
    return h.finish(6, final, [*BASE_LOG, [5, "tid-S1"], [6, "tid-S2"]])


def lost_update() -> list[Event]:
    """Two snapshot transactions from one snapshot both update row i2 and both commit."""
    h = History()
    base(h)
    concurrent(h, 4, "snapshot", [("U1", [update(ITEMS, "i2", 7, "U1")], 5),
                                  ("U2", [update(ITEMS, "i2", 8, "U2")], 6)])
    final = {**LATEST, ITEMS: [I1_T2, ["i2", "U2", 8, ""], T1_ITEM]}
    return h.finish(6, final, [*BASE_LOG, [5, "tid-U1"], [6, "tid-U2"]])


def stale_snapshot() -> list[Event]:
    h = History()
    base(h)
    h.txn("L", 3, [read(ITEMS, I1, I2, T1_ITEM)], csn=3)  # began after T2 (CSN 4) was acknowledged
    return h.finish(4, LATEST, BASE_LOG)


def csn_order() -> list[Event]:
    h = History()
    base(h)
    h.txn("Y", 4, [append(ITEMS, ["y.1", "Y", 0, ""])], csn=6)
    h.txn("Z", 4, [append(ITEMS, ["z.1", "Z", 0, ""])], csn=5)  # began committing after Y ended
    final = {**LATEST, ITEMS: [*LATEST[ITEMS], ["y.1", "Y", 0, ""], ["z.1", "Z", 0, ""]]}
    return h.finish(6, final, [*BASE_LOG, [5, "tid-Z"], [6, "tid-Y"]])


def inconsistent_txn_read() -> list[Event]:
    h = History()
    base(h)
    h.txn("Q", 4, [read(ITEMS, I1_T2, I2)], csn=4)  # T1's item is missing from its snapshot
    return h.finish(4, LATEST, BASE_LOG)


def unresolved() -> list[Event]:
    h = History()
    base(h)
    h.txn("K", 4, [append(ITEMS, ["k.1", "K", 0, ""])], outcome="unknown")
    return h.finish(4, LATEST, BASE_LOG)


def resolved_commit_torn() -> list[Event]:
    """A commit killed after its record: resolved committed at CSN 5, yet only half of it is visible."""
    h = History()
    base(h)
    h.txn("K", 4, [append(ITEMS, ["k.1", "K", 0, ""]), append(EVENTS, ["k.2", "K", 0, "g1"])], outcome="unknown")
    h.events.append(h.ev("resolve", "driver", tok="K", tid="tid-K", state="committed", csn=5))
    final = {**LATEST, ITEMS: [*LATEST[ITEMS], ["k.1", "K", 0, ""]]}
    return h.finish(5, final, [*BASE_LOG, [5, "tid-K"]])


def merges(inserted_twice: bool = False) -> list[Event]:
    """After base(): merges of every clause, one transaction after another (each line: the table after it)."""
    h = History()
    base(h)  # items: i1 (T2, 5), i2 (setup, 2), t1.1 (T1, 10); events: t1.2 (T1, 11, g0)
    h.txn("M1", 4, [merge(ITEMS, [["i2", "M1", 20, ""], ["pool.1", "M1", 7, ""]], ["rid"], "upsert", [1, 1, 0])],
          csn=5)  # i2 (M1, 20), pool.1 (M1, 7) inserted
    h.txn("M2", 5, [merge(ITEMS, [["i1", "M2", 1, ""], ["pool.1", "M2", 30, ""], ["pool.2", "M2", 9, ""]], ["rid"],
                          "guarded", [2, 1, 0]),  # i1 kept (1 < 5), pool.1 (M2, 30), pool.2 inserted
                    merge(ITEMS, [["i2", "M2", 5, ""], ["nope", "M2", 1, ""]], ["rid"], "add", [1, 0, 0])],
          csn=6)  # i2 (M2, 25)
    h.txn("M3", 6, [merge(EVENTS, [["t1.2", "M3", 0, "g0"], ["x", "M3", 0, "g1"]], ["rid", "grp"], "delete",
                          [0, 0, 1])], csn=7)  # t1.2 deleted, x ignored
    h.txn("M4", 7, [merge(ITEMS, [["i1", "M4", 6, ""], ["pool.2", "M4", 1, ""]], ["rid"], "sync", [2, 0, 3])],
          csn=8)  # i1 and pool.2 from the source; i2, t1.1 and pool.1 deleted
    final = {ITEMS: [["i1", "M4", 6, ""], ["pool.2", "M4", 1, ""]], EVENTS: [], ACCOUNTS: [SA, SB]}
    log = [*BASE_LOG, [5, "tid-M1"], [6, "tid-M2"], [7, "tid-M3"], [8, "tid-M4"]]
    h.read(8, final)
    if inserted_twice:  # two merges from one snapshot insert pool.9 and both commit: one had to fail
        concurrent(h, 8, "snapshot", [
            ("N1", [merge(ITEMS, [["pool.9", "N1", 1, ""]], ["rid"], "upsert", [0, 1, 0])], 9),
            ("N2", [merge(ITEMS, [["pool.9", "N2", 2, ""]], ["rid"], "upsert", [0, 1, 0])], 10)])
        final = {**final, ITEMS: [*final[ITEMS], ["pool.9", "N2", 2, ""]]}
        log += [[9, "tid-N1"], [10, "tid-N2"]]
    return h.finish(10 if inserted_twice else 8, final, log)


def unvalidated_merge() -> list[Event]:
    return merges(inserted_twice=True)


BAD: dict[str, Callable[[], list[Event]]] = {
    "unvalidated_merge": unvalidated_merge,
    "torn_read": torn_read,
    "future_read": future_read,
    "lost_commit": lost_commit,
    "duplicate_row": duplicate_row,
    "dirty_read": dirty_read,
    "write_skew": write_skew,
    "lost_update": lost_update,
    "stale_snapshot": stale_snapshot,
    "csn_order": csn_order,
    "inconsistent_txn_read": inconsistent_txn_read,
    "unresolved": unresolved,
}


def test_a_good_history_passes() -> None:
    report = checker.check(good())
    assert report.ok, report.summary()
    assert report.stats["committed_writes"] == 3 and report.stats["aborted"] == 1
    assert report.stats["reads"] == 5


def test_every_merge_clause_is_modelled() -> None:
    report = checker.check(merges())
    assert report.ok, report.summary()
    assert report.stats["committed_writes"] == 7


def test_a_merge_result_the_model_does_not_give_is_reported() -> None:
    events = merges()
    step = next(e for e in events if e.get("op") == "merge" and e["clause"] == "guarded")
    step["n"] = [1, 1, 0]  # the guard counted as no update
    assert checker.check(events).kinds() == {"inconsistent_txn_read"}


# what else a bad history legitimately shows besides its own kind
ALSO = {"csn_order": {"stale_snapshot"}, "stale_snapshot": {"watermark_backwards"}, "write_skew": {"not_serializable"},
        "unvalidated_merge": {"lost_update"}}


@pytest.mark.parametrize("kind", sorted(BAD))
def test_a_bad_history_is_reported(kind: str) -> None:
    report = checker.check(BAD[kind]())
    assert report.kinds() == {kind} | ALSO.get(kind, set()), f"{kind} not reported as such:\n{report.summary()}"


def test_write_skew_is_also_a_serializability_violation() -> None:
    report = checker.check(write_skew())
    assert {"write_skew", "not_serializable"} <= report.kinds(), report.summary()


def test_a_killed_commit_must_be_all_or_nothing() -> None:
    report = checker.check(resolved_commit_torn())
    assert "torn_read" in report.kinds(), report.summary()


def test_the_same_history_under_snapshot_isolation_is_not_write_skew_checked() -> None:
    """The write-skew pattern is only an error where the constraint is enforced (serializable)."""
    events = write_skew()
    for ev in events:
        if ev["ev"] == "setup":
            ev["constraints"] = [{**SER, "enforced": False}]
        if ev["ev"] == "begin":
            ev["iso"] = "snapshot"
    report = checker.check(events)
    assert report.ok, report.summary()
    assert report.stats["allowed_constraint_breaks"] == 1


def test_torn_lines_and_files(tmp_path: Path) -> None:
    """load() reads a directory of history files and skips only a torn last line."""
    events = good()
    half = len(events) // 2
    (tmp_path / "a.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events[:half]) + '{"ev": "op", "to')
    (tmp_path / "b.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events[half:]))
    assert checker.check(checker.load(tmp_path)).ok
    (tmp_path / "c.jsonl").write_text('{"broken\n{"ev": "kill", "w": "driver", "t": 1}\n')
    assert "malformed" in checker.check(checker.load(tmp_path)).kinds()


def test_an_unfinished_history_is_malformed() -> None:
    events = [e for e in good() if e["ev"] != "commit_log"]
    assert "malformed" in checker.check(copy.deepcopy(events)).kinds()


def test_the_command_line(tmp_path: Path) -> None:
    (tmp_path / "h.jsonl").write_text("".join(json.dumps(e) + "\n" for e in lost_commit()))
    run = subprocess.run([sys.executable, "-m", "tests.history.checker", str(tmp_path)], cwd=REPO,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 1 and "lost_commit" in run.stdout, run.stdout + run.stderr


# -- independence from the engine -----------------------------------------------------------------------

def test_the_checker_imports_only_the_standard_library() -> None:
    tree = ast.parse((HERE / "checker.py").read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "the checker imports nothing relative"
            imported.add((node.module or "").split(".")[0])
    foreign = sorted(imported - set(sys.stdlib_module_names) - {"__future__"})
    assert foreign == [], f"the checker imports {foreign}: it must share no code with the engine"


def test_importing_the_checker_loads_no_engine_code() -> None:
    probe = ("import sys, tests.history.checker; "
             "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('airflow_txn', 'pyarrow', 'sqlalchemy')); "
             "print(bad); sys.exit(1 if bad else 0)")
    run = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, f"importing the checker loaded {run.stdout} {run.stderr}"


# -- table changes (issue 32, D27): the schema as of every CSN, read by column id ------------------------------
WIDE = "hist.wide"
BASE_COLS = [[1, "rid", "string", True], [2, "tok", "string", True], [3, "val", "int64", True],
             [4, "grp", "string", True]]
X = [5, "x", "int32", True]


def schema_step(table: str, cols: list[list[Any]]) -> Event:
    return {"ev": "schema", "table": table, "schema": cols}


def change(op: str, table: str, after: list[list[Any]], **fields: Any) -> Event:
    """A recorded table change (recorder.RecordedTxn's add_column, ...): its arguments and the schema after it."""
    return {"ev": "op", "op": op, "table": table, "n": 0, "schema": after, **fields}


def wide_read(table: str, cols: list[list[Any]], *rows: list[Any]) -> Event:
    return {"ev": "read", "table": table, "grp": None, "rows": list(rows), "schema": cols}


def ddl_history(bad: str | None = None) -> list[Event]:
    """After base(): W1 appends to hist.wide (CSN 5); D1 adds column x (nullable, default 7) and loads a row with
    it (6) while A2, from the snapshot before, appends (7: a compatible change keeps it); D2 renames x to y and
    widens it (8); R adds a column and rolls back; D3 drops y and adds z (NOT NULL, default 1) (9). Every read
    carries the schema of its CSN; rows written before a column read its default. `bad` corrupts it."""
    h = History()
    h.events[0]["tables"][WIDE] = ["grp"]
    h.events[0]["schemas"] = {WIDE: BASE_COLS}
    base(h)
    w1 = ["w1.1", "W1", 1, "g0", {}]
    h.txn("W1", 4, [append(WIDE, w1)], csn=5)
    with_x = [*BASE_COLS, X]
    d1 = ["d1.1", "D1", 2, "g0", {"5": 3}]
    a2 = ["a2.1", "A2", 0, "g1", {}]
    concurrent(h, 5, "snapshot", [
        ("D1", [schema_step(WIDE, BASE_COLS), change("add_column", WIDE, with_x, column=X, default=7),
                append(WIDE, d1)], 6),
        ("A2", [append(WIDE, a2)], 7)])
    at7 = [["a2.1", "A2", 0, "g1", {"5": None if bad == "wrong_row" else 7}], ["d1.1", "D1", 2, "g0", {"5": 3}],
           ["w1.1", "W1", 1, "g0", {"5": 7}]]
    h.read(7, {**LATEST, WIDE: at7}, latest=7)
    h.events[-1]["schemas"] = {WIDE: with_x}
    y = [*BASE_COLS, [5, "y", "int64", True]]
    h.txn("D2", 7, [wide_read(WIDE, with_x, *at7), change("rename_column", WIDE, [*BASE_COLS, [5, "y", "int32", True]],
                                                          old="x", new="y"),
                    change("alter_column", WIDE, y, name="y", type="int64")], csn=8)
    h.read(8, {**LATEST, WIDE: at7}, latest=8)
    h.events[-1]["schemas"] = {WIDE: with_x if bad == "wrong_schema" else y}
    at6 = [["d1.1", "D1", 2, "g0", {"5": 3}], ["w1.1", "W1", 1, "g0", {"5": 7}]]
    h.read(6, {**LATEST, WIDE: at6}, how="random", latest=8)
    h.events[-1]["schemas"] = {WIDE: with_x}  # time travel: the schema of CSN 6
    h.txn("R", 8, [change("add_column", WIDE, [*y, [6, "q", "int32", True]], column=[6, "q", "int32", True],
                          default=None)], outcome="rolled_back")
    z = [*BASE_COLS, [7, "z", "int32", False]]
    h.txn("D3", 8, [change("drop_column", WIDE, BASE_COLS, name="y"),
                    change("add_column", WIDE, z, column=z[-1], default=1)], csn=9)
    final_wide = [[r[0], r[1], r[2], r[3], {"7": 1}] for r in at7]
    log = [*BASE_LOG, [5, "tid-W1"], [6, "tid-D1"], [7, "tid-A2"], [8, "tid-D2"], [9, "tid-D3"]]
    last = 9
    if bad == "ddl_conflict":  # a rename and an append to the table from one snapshot both commit
        zz = [*BASE_COLS, [7, "zz", "int32", False]]
        concurrent(h, 9, "snapshot", [
            ("D4", [change("rename_column", WIDE, zz, old="z", new="zz")], 10),
            ("A5", [append(WIDE, ["a5.1", "A5", 0, "g0", {"7": 4}])], 11)])
        final_wide.append(["a5.1", "A5", 0, "g0", {"7": 4}])
        log += [[10, "tid-D4"], [11, "tid-A5"]]
        last = 11
    if bad == "two_changes":  # two compatible changes of one table from one snapshot both commit
        concurrent(h, 9, "snapshot", [
            ("D4", [change("set_nullable", WIDE, [*BASE_COLS, [7, "z", "int32", True]], name="z", nullable=True)],
             10),
            ("D5", [change("alter_column", WIDE, [*BASE_COLS, [7, "z", "int64", False]], name="z", type="int64")],
             11)])
        log += [[10, "tid-D4"], [11, "tid-D5"]]
        last = 11
    if bad == "spurious_conflict":  # an append refused though only compatible changes committed since its snapshot
        h.txn("A6", 9, [append(WIDE, ["a6.1", "A6", 0, "g0", {"7": 2}])], outcome="aborted", err="SerializationError")
    if bad in ("both_refused", "refused_after_it"):
        committing_beside(h, overlap=bad == "both_refused")
    if bad == "reused_column_id":
        h.txn("R2", 9, [change("add_column", WIDE, [*z, [6, "q2", "int32", True]], column=[6, "q2", "int32", True],
                               default=None)], outcome="rolled_back")
    final = {**LATEST, WIDE: final_wide}
    events = h.finish(last, final, log)
    _final_schema = {WIDE: z}
    for ev in events:
        if ev["ev"] == "snapread" and ev["how"] == "final":
            ev["schemas"] = _final_schema
    if bad == "ddl_conflict":
        _final_schema[WIDE] = [*BASE_COLS, [7, "zz", "int32", False]]
    if bad == "two_changes":
        _final_schema[WIDE] = [*BASE_COLS, [7, "z", "int64", True]]
    return events


def committing_beside(h: History, overlap: bool) -> None:
    """D6 drops column z and A7 appends to the table, both from CSN 9; each fails naming the other (the ZooKeeper
    oracle counts a transaction still committing: D27). With `overlap` their commits overlap, else D6's commit
    begins only after A7's ended: then nothing was committing beside A7."""
    def step(worker: str, tok: str, event: Event) -> Event:
        return h.ev(event.pop("ev"), worker, tok=tok, **event)

    def end(worker: str, tok: str, other: str) -> Event:
        return h.ev("end", worker, tok=tok, outcome="aborted", err="SerializationError",
                    msg=f"table {WIDE}: transaction tid-{other} ... (committing, or committed and not applied yet)")

    h.events += [h.ev("begin", "W2", tok="D6", tid="tid-D6", snap=9, iso="snapshot", t0=h.now + 0.5),
                 step("W2", "D6", change("drop_column", WIDE, BASE_COLS, name="z")),
                 h.ev("begin", "W3", tok="A7", tid="tid-A7", snap=9, iso="snapshot", t0=h.now + 0.5),
                 step("W3", "A7", append(WIDE, ["a7.1", "A7", 0, "g0", {"7": 5}]))]
    if overlap:
        h.events += [h.ev("commit_start", "W2", tok="D6"), h.ev("commit_start", "W3", tok="A7"),
                     end("W3", "A7", "D6"), end("W2", "D6", "A7")]
    else:
        h.events += [h.ev("commit_start", "W3", tok="A7"), end("W3", "A7", "D6"),
                     h.ev("commit_start", "W2", tok="D6"), end("W2", "D6", "A7")]


def test_an_append_may_fail_beside_an_incompatible_change_that_was_committing() -> None:
    """Refused beside a change that was committing as it committed and then failed too (D27 on ZooKeeper): not
    spurious; refused naming a change that only began committing after it ended: spurious."""
    assert checker.check(ddl_history("both_refused")).ok
    assert checker.check(ddl_history("refused_after_it")).kinds() == {"spurious_conflict"}


@pytest.mark.parametrize("vacuumed", [True, False])
def test_column_ids_are_checked_in_time_order_across_workers(vacuumed: bool) -> None:
    """R3 (worker W2) adds a column and rolls back, a vacuum may run, then R4 (worker W3) adds one with the same id;
    the checker reads W3's file before W2's, yet judges the ids in the order they were given: the reuse is allowed
    after the vacuum only (it forgets rolled-back versions, D27)."""
    h = History()
    h.events[0]["tables"][WIDE] = ["grp"]
    h.events[0]["schemas"] = {WIDE: BASE_COLS}
    base(h)
    q = [5, "q", "int32", True]
    h.txn("R3", 4, [change("add_column", WIDE, [*BASE_COLS, q], column=q, default=None)], outcome="rolled_back",
          worker="W2")
    if vacuumed:
        h.events.append(h.ev("vacuum", "driver", result={}))
    first = len(h.events)
    h.txn("R4", 4, [change("add_column", WIDE, [*BASE_COLS, q], column=q, default=None)], outcome="rolled_back",
          worker="W3")
    h.events[first - (3 if vacuumed else 2):] = h.events[first:] + h.events[first - (3 if vacuumed else 2):first]
    events = h.finish(4, LATEST, BASE_LOG)
    kinds = checker.check(events).kinds()
    assert kinds == (set() if vacuumed else {"reused_column_id"}), kinds


def test_table_changes_are_modelled() -> None:
    """Added (null or default for older rows), renamed, widened and dropped columns, a rolled-back change, time
    travel under the schema of then, and a compatible change beside a concurrent append: all as the model says."""
    report = checker.check(ddl_history())
    assert report.ok, report.summary()
    assert report.stats["committed_changes"] == 3 and report.stats["committed_incompatible_changes"] == 2


@pytest.mark.parametrize("kind", ["wrong_schema", "wrong_row", "ddl_conflict", "two_changes", "spurious_conflict",
                                  "reused_column_id"])
def test_a_bad_table_change_history_is_reported(kind: str) -> None:
    report = checker.check(ddl_history(kind))
    expected = {"two_changes": {"ddl_conflict"},
                "wrong_row": {"wrong_row", "missing_commit", "inconsistent_txn_read"}}.get(kind, {kind})
    assert report.kinds() == expected, f"{kind} not reported as such:\n{report.summary()}"


def names_history(bad: str | None = None) -> list[Event]:
    """After base(): N1 creates hist.t0 and loads a row (CSN 5); N2 renames it hist.t1 and loads another (6); N3
    drops hist.t1 (7) while N4, from the same snapshot, renames it and fails. Readers list the namespace's tables at
    their CSN (`named`). `bad`: a read lists a name of another CSN ("wrong_tables"), or N4 commits too
    ("ddl_conflict": a drop and a rename of one name from one snapshot)."""
    h = History()
    h.events[0]["namespace"] = ["hist.t0", "hist.t1", "hist.t2"]
    base(h)
    n1, n2 = ["n1.1", "N1", 1, ""], ["n2.1", "N2", 2, ""]

    def named(tables: dict[str, list[list[Any]]]) -> None:
        h.events[-1]["named"] = tables

    h.txn("N1", 4, [{"ev": "op", "op": "create_table", "table": "hist.t0", "n": 0}, append("hist.t0", n1)], csn=5)
    h.read(5, LATEST)
    named({"hist.t1" if bad == "wrong_tables" else "hist.t0": [n1]})
    h.txn("N2", 5, [{"ev": "op", "op": "rename_table", "table": "hist.t0", "new": "hist.t1", "n": 0},
                    append("hist.t1", n2)], csn=6)
    h.read(6, LATEST)
    named({"hist.t1": [n1, n2]})
    h.read(5, LATEST, how="random", latest=6)
    named({"hist.t0": [n1]})
    log = [*BASE_LOG, [5, "tid-N1"], [6, "tid-N2"], [7, "tid-N3"]]
    steps = {"N3": {"op": "drop_table", "table": "hist.t1"},
             "N4": {"op": "rename_table", "table": "hist.t1", "new": "hist.t2"}}
    ends = {"N3": {"outcome": "committed", "csn": 7},
            "N4": {"outcome": "committed", "csn": 8} if bad == "ddl_conflict"
            else {"outcome": "aborted", "err": "SerializationError"}}
    for tok in steps:  # both begin at CSN 6, then both commit
        h.events.append(h.ev("begin", f"W{tok}", tok=tok, tid=f"tid-{tok}", snap=6, iso="snapshot", t0=h.now))
    for tok, step in steps.items():
        h.events.append(h.ev("op", f"W{tok}", tok=tok, n=0, **step))
        h.events.append(h.ev("commit_start", f"W{tok}", tok=tok))
        h.events.append(h.ev("end", f"W{tok}", tok=tok, t0=h.now, **ends[tok]))
    if bad == "ddl_conflict":
        log.append([8, "tid-N4"])
    h.read(6, LATEST, how="random", latest=log[-1][0])
    named({"hist.t1": [n1, n2]})
    last = log[-1][0]
    events = h.finish(last, LATEST, log)
    events[-2]["named"] = {}  # the final read: hist.t1 dropped (the model refuses N4's rename at its commit point)
    return events


def test_table_names_are_modelled_by_csn() -> None:
    """Tables created, renamed and dropped: each snapshot lists the names of its CSN, each table with its rows."""
    report = checker.check(names_history())
    assert report.ok, report.summary()


@pytest.mark.parametrize("kind", ["wrong_tables", "ddl_conflict"])
def test_a_bad_table_names_history_is_reported(kind: str) -> None:
    report = checker.check(names_history(kind))
    assert report.kinds() == {kind}, f"{kind} not reported as such:\n{report.summary()}"
