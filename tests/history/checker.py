"""Judging a recorded history without the engine: this module imports only the standard library.

Input: the JSON lines of tests/history (recorder.py writes them): `setup` (tables, constraints),
per transaction `begin` (tok, tid, snapshot, isolation), `op` / `read` / `schema` / `op_error` statements
with their results, `commit_start`, `end` (committed with a CSN | aborted with an error class |
rolled_back); readers' `snapread` (every table at one CSN); the driver's `kill`, `resolve` (the state
of every transaction whose end was not recorded, asked after recovery), the `final` snapread and the
`commit_log`. Rows are [rid, tok, val, grp] (a table with columns beyond those, hist.wide: [rid, tok, val, grp,
{column id: value}]); rids are unique per insert, tok names the transaction that last set the row, so rows can be
attributed to transactions without the engine.

The checker rebuilds the database as a model: committed transactions in CSN order, each one's
effect computed by replaying its recorded statements on the model at its snapshot. Then:
- atomic visibility: every read at snapshot S equals the model at S exactly (no row of a transaction
  that did not commit, every committed transaction with CSN <= S entirely, none after S; a mix is a
  torn read); killed transactions resolve to all-or-nothing (the final read is a read too);
- no lost or duplicated transaction: acknowledged commits are in the commit log and in the final
  state, CSNs are unique, the log holds no record of a transaction that did not commit, and a commit
  that ended before another began has the smaller CSN; snapshots are never older than a commit
  acknowledged before they were taken, and a process never sees the watermark go backwards;
- snapshot isolation: every read and statement result inside a transaction equals the model at its
  snapshot plus its own writes, and no two concurrent committed transactions wrote the same row
  (first committer wins, so no lost update);
- serializable: a committed serializable transaction's reads and statement results are the same at
  its commit point (CSN - 1) as at its snapshot (equivalence to the serial order of CSNs, so no
  write skew), and every enforced constraint (a sum >= a bound) holds after every commit;
- a MERGE that inserts (or deletes the rows its source lacks) is validated at commit whatever the isolation
  level: it gives the same result at its transaction's commit point as at its snapshot (else two merges could
  both insert one key).

Table changes (issue 32, docs/DESIGN.md D27): `add_column`, `rename_column`, `drop_column`, `alter_column`,
`set_nullable` statements, each recorded with its arguments and the schema the transaction sees after it
([[column id, name, type, nullable], ...]); reads of a table with extra columns carry the schema they were read
under (`schema`, `schemas`). The model keeps each table's schema as of every CSN, columns by id, and a row as the
values it was written with, by column id; a read projects it onto the reader's schema (a column the row was
written without reads its default, or null). Then:
- every read's schema is the model's at its snapshot (the transaction's own changes included), and its rows are the
  model's projected onto it (`wrong_schema`, and the row checks above);
- a committed change was made to the schema its commit point has (two changes of one table from one snapshot
  never both commit), and an incompatible one (drop or rename a column, forbid nulls) never commits beside a
  concurrent committed writer of its table: first committer wins (`ddl_conflict`);
- a compatible change (add a column, widen one, allow nulls) never fails a concurrent append: a snapshot
  transaction of appends and compatible changes only, to tables some transaction changed, may fail with
  SerializationError only if an incompatible change of one of them committed after its snapshot, or was committing
  as it committed and names it in the error (the ZooKeeper oracle counts a change still committing: D27)
  (`spurious_conflict`);
- a column id is never given twice in a table, not even by a change that rolled back (`reused_column_id`), unless
  a vacuum ran after that change rolled back (it forgets such versions, and their ids with them: D27).

Tables of the setup's `namespace` are created, renamed and dropped (`create_table`, `rename_table`, `drop_table`)
and appended to; `check_names` replays them by name and CSN: every snapshot read's `named` tables (what
`wh.tables(csn=)` listed, each read at that CSN) equal the model's (`wrong_tables`), and a committed change still holds
at its commit point, so two concurrent changes of one name never both commit (`ddl_conflict`). A change may fail
as it is staged with TableExistsError or TableNotFoundError (a concurrent commit took the name, or moved the table).

A MERGE statement is recorded with its source rows, its key columns and its clause by name (recorder.MERGES);
`merged` below computes what it does to a table. A new kind of statement is a branch of `replay_op`.

Run `python -m tests.history.checker DIR` to judge the history files of a saved run.
"""

from __future__ import annotations

import bisect
import json
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Extras = tuple[tuple[int, Any], ...]
"""The values of a row's columns beyond (rid, tok, val, grp), by column id, as written (sorted by id)."""
Row = tuple[str, str, int, str, Extras]  # rid, tok, val, grp, extras
Col = tuple[int, str, str, bool, Any]
"""A column of the model's schema: id, name, type, nullable, default (what rows written without it read)."""
Cols = tuple[Col, ...]
State = dict[str, dict[str, Row]]  # table -> rid -> row
Effects = dict[str, dict[str, Row | None]]  # table -> rid -> row written (None: deleted)

KINDS: dict[str, str] = {
    "malformed": "the history is incomplete or inconsistent as a record",
    "unexpected_error": "a worker failed with an error the workload does not expect",
    "unresolved": "a transaction killed while committing has no settled outcome",
    "committed_without_commit": "a transaction that never called commit ended committed",
    "aborted_but_committed": "a transaction told it aborted ended committed",
    "bad_csn": "a commit CSN is not after its snapshot, or differs between history and log",
    "duplicate_csn": "two commits share one CSN",
    "csn_order": "a commit that ended before another began has the larger CSN",
    "stale_snapshot": "a snapshot is older than a commit acknowledged before it was taken",
    "watermark_backwards": "a process saw the readable watermark go backwards",
    "lost_commit": "an acknowledged commit is missing from the commit log or the final state",
    "phantom_commit": "the commit log holds a transaction that did not commit",
    "torn_read": "a read saw part of a transaction's effects",
    "dirty_read": "a read saw rows of a transaction that did not commit",
    "future_read": "a read at snapshot S saw a transaction committed after S",
    "missing_commit": "a read at snapshot S missed a transaction committed at or before S",
    "duplicate_row": "a read returned one row twice",
    "wrong_row": "a read returned a row version the model does not hold at that snapshot",
    "inconsistent_txn_read": "a read or statement result inside a transaction differs from its snapshot",
    "lost_update": "two concurrent committed transactions wrote the same row",
    "write_skew": "an enforced constraint was broken",
    "not_serializable": "a serializable transaction's reads changed between its snapshot and its commit",
    "unvalidated_merge": "a merge that inserted committed though what it merged changed after its snapshot",
    "wrong_schema": "a read's schema is not the table's schema at its snapshot",
    "ddl_conflict": "a committed table change and a concurrent committed writer (or change) of the table",
    "spurious_conflict": "appends (and compatible changes) failed though no incompatible change was concurrent",
    "reused_column_id": "a table change gave a column an id given before",
    "wrong_tables": "a snapshot's list of tables, or a listed table's rows, is not the model's at that CSN",
}
FIELDS = ("rid", "tok", "val", "grp")
BASE_COLS: Cols = tuple((i + 1, name, typ, True, None) for i, (name, typ) in
                        enumerate(zip(FIELDS, ("string", "string", "int64", "string"), strict=True)))
"""Every table's schema unless the setup records one."""
CHANGES = ("add_column", "rename_column", "drop_column", "alter_column", "set_nullable")
"""The table changes a history holds (statements recorded as `op`)."""
EXPECTED_ABORTS = {"SerializationError", "LeaseExpiredError", "TransactionClosedError"}
TABLE_CHANGES = ("create_table", "rename_table", "drop_table")
"""Changes of the tables of the setup's `namespace` (statements recorded as `op`, `new` for a rename)."""
NAME_ABORTS = {"TableExistsError", "TableNotFoundError"}
"""What a change of a name may also fail with as it is staged: a concurrent commit took the name or moved the table."""
Names = dict[str, int]
"""The tables of the namespace at a CSN: name -> table identity (the index of the change that created it)."""
MAX_MESSAGES = 8  # per kind; every violation is counted


@dataclass
class Violation:
    kind: str
    message: str


@dataclass
class Txn:
    tok: str
    worker: str
    tid: str
    snap: int
    iso: str
    t_begin: float
    steps: list[dict[str, Any]] = field(default_factory=list)
    commit_started: bool = False
    t_commit: float | None = None
    """When its commit began (the `commit_start` event's time)."""
    end: dict[str, Any] | None = None
    resolution: dict[str, Any] | None = None
    committed: bool = False
    acked: bool = False
    csn: int | None = None
    effects: Effects | None = None
    changed: dict[str, tuple[Cols, list[dict[str, Any]], bool]] = field(default_factory=dict)
    """Table -> (the schema it saw at its snapshot, its changes of it, whether one was incompatible)."""
    snap_schemas: dict[str, Cols] = field(default_factory=dict)
    """The schemas of its snapshot (its reads are checked under them at its commit point too)."""
    wrong_at_snapshot: set[int] = field(default_factory=set)
    """The steps (by id) whose recorded result the model did not give at the snapshot."""

    @property
    def writer(self) -> bool:
        return self.committed and self.csn is not None and self.csn != self.snap

    def __str__(self) -> str:
        return f"{self.tok} ({self.iso}, snapshot {self.snap}" + (f", CSN {self.csn})" if self.committed else ")")


@dataclass
class Differences:
    """What one read shows against the model, by the transaction each row belongs to."""

    visible: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))  # tok -> tables seen as expected
    missing: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))  # tok -> tables missing rows of it
    seen_rows: dict[str, list[Row]] = field(default_factory=lambda: defaultdict(list))  # tok -> its unexpected rows
    unexplained: list[str] = field(default_factory=list)


@dataclass
class Report:
    violations: list[Violation] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.violations

    def kinds(self) -> set[str]:
        return {v.kind for v in self.violations}

    def summary(self) -> str:
        lines = [f"history stats: {json.dumps(self.stats, sort_keys=True)}"]
        by_kind: dict[str, list[str]] = defaultdict(list)
        for v in self.violations:
            by_kind[v.kind].append(v.message)
        for kind, messages in sorted(by_kind.items()):
            lines.append(f"{kind} x{len(messages)}: {KINDS.get(kind, '')}")
            lines += [f"  - {m}" for m in messages[:MAX_MESSAGES]]
        return "\n".join(lines)


def load(source: Path | Iterable[Path]) -> list[dict[str, Any]]:
    """Every event of a directory of *.jsonl files (or of the given files); a torn last line is skipped."""
    paths = sorted(source.glob("*.jsonl")) if isinstance(source, Path) else list(source)
    events: list[dict[str, Any]] = []
    for path in paths:
        lines = path.read_text().splitlines()
        for number, line in enumerate(lines):
            try:
                events.append(json.loads(line))
            except ValueError:
                if number != len(lines) - 1:  # only the last line of a killed process may be torn
                    events.append({"ev": "garbage", "w": path.name, "line": number + 1})
    return events


def check(events: Iterable[dict[str, Any]]) -> Report:
    return Checker(list(events)).run()


class Checker:
    def __init__(self, events: list[dict[str, Any]]) -> None:
        self.events = events
        self.report = Report()
        self.txns: dict[str, Txn] = {}
        self.reads: list[dict[str, Any]] = []
        self.tables: dict[str, list[str]] = {}
        self.constraints: list[dict[str, Any]] = []
        self.commit_log: list[list[Any]] | None = None
        self.state: State = {}
        self.schemas: dict[str, Cols] = {}
        self.initial_schemas: dict[str, Cols] = {}
        self.column_ids: dict[str, dict[int, str]] = defaultdict(dict)
        self.last_writer: dict[str, dict[str, Txn]] = {}
        self.counts: Counter[str] = Counter()
        self.new_rids: set[str] = set()
        self.namespace: set[str] = set()

    def violate(self, kind: str, message: str) -> None:
        self.report.violations.append(Violation(kind, message))

    def run(self) -> Report:
        self.parse()
        self.check_column_ids()
        self.settle_outcomes()
        self.sweep()
        self.check_commit_log()
        self.check_real_time()
        self.check_ddl_conflicts()
        self.check_names()
        self.report.stats = self.stats()
        return self.report

    # -- parsing ------------------------------------------------------------------------------------
    def parse(self) -> None:
        handlers = {"setup": self.parse_setup, "begin": self.parse_begin, "snapread": self.reads.append,
                    "commit_log": self.parse_log, "error": self.parse_error, "garbage": self.parse_garbage}
        for ev in self.events:
            kind = str(ev.get("ev"))
            if kind in ("op", "read", "schema", "op_error", "commit_start", "end", "resolve"):
                self.parse_txn_event(kind, ev)
            elif kind in handlers:
                handlers[kind](ev)
            elif kind == "kill":
                self.counts["kills"] += 1
        if not self.tables:
            self.violate("malformed", "no setup event: the tables are unknown")
        if self.commit_log is None:
            self.violate("malformed", "no commit_log event: the run did not finish")
        if not any(r.get("how") == "final" for r in self.reads):
            self.violate("malformed", "no final read: the run did not finish")

    def parse_setup(self, ev: dict[str, Any]) -> None:
        self.tables = {t: list(p) for t, p in ev["tables"].items()}
        self.constraints = list(ev.get("constraints", []))
        self.initial_schemas = {t: _cols(c) for t, c in ev.get("schemas", {}).items()}
        self.namespace = set(ev.get("namespace", []))

    def parse_begin(self, ev: dict[str, Any]) -> None:
        if ev["tok"] in self.txns:
            self.violate("malformed", f"transaction token {ev['tok']} began twice")
        self.txns[ev["tok"]] = Txn(ev["tok"], ev["w"], ev["tid"], int(ev["snap"]), ev["iso"],
                                   float(ev.get("t0", ev["t"])))

    def parse_log(self, ev: dict[str, Any]) -> None:
        self.commit_log = ev["records"]

    def parse_error(self, ev: dict[str, Any]) -> None:
        self.violate("unexpected_error", f"worker {ev['w']}: {ev.get('err')}: {ev.get('msg')}")

    def parse_garbage(self, ev: dict[str, Any]) -> None:
        self.violate("malformed", f"unreadable line {ev['line']} in {ev['w']}")

    def purged_between(self, giver: str, ev: dict[str, Any]) -> bool:
        """Whether the transaction named at the end of `giver` ended rolled back or aborted, and a vacuum ran after
        that and before `ev` (vacuum deletes rolled-back versions with no part left: their ids may be given again)."""
        tok = giver.rsplit(" by ", 1)[-1]
        ended = [e for e in self.events if e.get("ev") == "end" and e.get("tok") == tok]
        if not ended or ended[0]["outcome"] == "committed":
            return False
        return any(e.get("ev") == "vacuum" and ended[0]["t"] < e["t"] < ev["t"] for e in self.events)

    def check_column_ids(self) -> None:
        """Ids are never given twice in a table, rolled back or not, in the order the columns were added (by time:
        the workers' files are read one after another); a vacuum after a rolled-back change forgets its version, so
        its id may be given again (D27)."""
        added = [e for e in self.events
                 if e.get("ev") == "op" and e.get("op") == "add_column" and e["tok"] in self.txns]
        for ev in sorted(added, key=lambda e: float(e["t"])):
            given = self.column_ids[ev["table"]]
            cid = int(ev["column"][0])
            if (cid in given and not self.purged_between(given[cid], ev)) or cid <= len(FIELDS):
                self.violate("reused_column_id", f"{ev['tok']} added column {ev['column'][1]!r} of {ev['table']} "
                             f"with id {cid}, given before (to {given.get(cid, 'a column it had from the start')})")
            given[cid] = f"{ev['column'][1]!r} by {ev['tok']}"

    def parse_txn_event(self, kind: str, ev: dict[str, Any]) -> None:
        txn = self.txns.get(ev["tok"])
        if txn is None:
            self.violate("malformed", f"{kind} of transaction {ev['tok']} that never began")
            return
        if kind in ("op", "read", "schema", "op_error"):
            txn.steps.append(ev)
            for row in ev.get("rows", []) if kind == "op" else []:
                if row[1] == txn.tok:  # a row this transaction inserts: its id must be new
                    if row[0] in self.new_rids:
                        self.violate("malformed", f"row id {row[0]} inserted twice (by {txn.tok})")
                    self.new_rids.add(row[0])
        elif kind == "commit_start":
            txn.commit_started = True
            txn.t_commit = float(ev["t"])
        elif kind == "end":
            txn.end = ev
        else:
            txn.resolution = ev

    def settle_outcomes(self) -> None:
        """Decide committed / not committed for every transaction (killed ones by their resolution)."""
        for txn in self.txns.values():
            end, res = txn.end, txn.resolution
            if end is not None:
                if end["outcome"] == "committed":
                    txn.committed, txn.acked, txn.csn = True, True, int(end["csn"])
                elif end.get("err") and end["err"] not in EXPECTED_ABORTS and not (
                        end["err"] in NAME_ABORTS and any(s["ev"] == "op_error" and s["table"] in self.namespace
                                                          for s in txn.steps)):
                    self.violate("unexpected_error", f"{txn} aborted with {end['err']}: {end.get('msg')}")
                if end["outcome"] != "committed" and res is not None and res["state"] == "committed":
                    self.violate("aborted_but_committed", f"{txn} was told {end['outcome']} but ended committed")
                continue
            if res is None or res["state"] not in ("committed", "rolled_back"):
                if txn.commit_started:
                    self.violate("unresolved", f"{txn} was killed while committing and is "
                                 f"{'unknown' if res is None else res['state']} after recovery")
                continue
            if res["state"] == "committed":
                if not txn.commit_started:
                    self.violate("committed_without_commit", f"{txn} never called commit but is committed")
                txn.committed, txn.csn = True, int(res["csn"]) if res.get("csn") is not None else txn.snap

    # -- the model ----------------------------------------------------------------------------------
    def sweep(self) -> None:
        """Walk the CSNs upwards, applying commits, replaying transactions at their snapshots,
        re-checking serializable ones at their commit points and comparing reads with the model."""
        self.state = {t: {} for t in self.tables}
        self.schemas = {t: self.initial_schemas.get(t, BASE_COLS) for t in self.tables}
        self.last_writer = {t: {} for t in self.tables}
        pending = self.commits_in_order()
        at_snapshot: dict[int, list[Txn]] = defaultdict(list)
        for txn in self.txns.values():
            at_snapshot[txn.snap].append(txn)
        at_commit_point: dict[int, list[Txn]] = defaultdict(list)
        for txn in (t for t in pending if t.iso == "serializable" or any(map(validated, t.steps))):
            at_commit_point[(txn.csn or 0) - 1].append(txn)
        reads_at: dict[int, list[dict[str, Any]]] = defaultdict(list)
        for read in self.reads:
            reads_at[int(read["csn"])].append(read)
        index = 0
        for point in sorted(set(at_snapshot) | set(at_commit_point) | set(reads_at)):
            while index < len(pending) and (pending[index].csn or 0) <= point:
                self.apply(pending[index])
                index += 1
            for txn in at_snapshot[point]:
                self.replay_at_snapshot(txn)
            for txn in at_commit_point[point]:
                self.check_at_commit_point(txn)
            for read in reads_at[point]:
                self.check_read(read, point)
        for txn in pending[index:]:
            self.apply(txn)

    def commits_in_order(self) -> list[Txn]:
        """Committed writers by CSN (a CSN after the snapshot, each used once)."""
        pending: list[Txn] = []
        seen: dict[int, Txn] = {}
        for txn in sorted((t for t in self.txns.values() if t.writer), key=lambda t: t.csn or 0):
            assert txn.csn is not None
            if txn.csn < txn.snap:
                self.violate("bad_csn", f"{txn} committed at a CSN before its snapshot")
                continue
            if txn.csn in seen:
                self.violate("duplicate_csn", f"{txn} and {seen[txn.csn]} share CSN {txn.csn}")
            seen[txn.csn] = txn
            pending.append(txn)
        return pending

    def replay(self, txn: Txn, state: State, schemas: dict[str, Cols]) -> tuple[Effects, list[str]]:
        """Run the transaction's recorded statements on `state` (under `schemas`): its effects, and every recorded
        result that differs from what the model gives."""
        effects, problems, _ = self.replay_steps(txn, state, schemas)
        return effects, [problem for _, problem in problems]

    def replay_steps(self, txn: Txn, state: State, schemas: dict[str, Cols]) -> tuple[
            Effects, list[tuple[dict[str, Any], str]], dict[str, tuple[Cols, list[dict[str, Any]], bool]]]:
        """`replay`, each problem with the step it is about, and the tables it changed (Txn.changed)."""
        tables = {s["table"] for s in txn.steps}
        view = {t: dict(state.get(t, {})) for t in tables}
        cols = {t: schemas.get(t, BASE_COLS) for t in tables}
        changed: dict[str, tuple[Cols, list[dict[str, Any]], bool]] = {}
        touched: dict[str, set[str]] = defaultdict(set)
        problems: list[tuple[dict[str, Any], str]] = []
        for step in txn.steps:
            if step["ev"] == "op_error":
                continue  # a failed statement changes nothing (statements are atomic)
            table = step["table"]
            if table in self.namespace:
                continue  # check_names models the namespace's tables
            rows = view[table]
            if step["ev"] != "op" and step.get("schema", _shape(cols[table])) != _shape(cols[table]):
                problems.append((step, f"{table}'s schema is {step['schema']}, the model has {_shape(cols[table])}"))
            if step["ev"] == "schema":  # t.schema's: checked above
                continue
            if step["ev"] == "read":
                expected = sorted(project(r, cols[table]) for r in rows.values()
                                  if step.get("grp") is None or r[3] == step["grp"])
                got = sorted(_row(r) for r in step["rows"])
                if got != expected:
                    problems.append((step, f"read of {table}{_grp(step)} saw {_diff(got, expected)}"))
                continue
            if step["op"] in CHANGES:
                problems += [(step, problem) for problem in replay_change(step, cols, changed)]
                continue
            n = merged(step, rows, touched[table]) if step["op"] == "merge" else \
                self.replay_op(step, rows, touched[table], cols[table])
            if n != step["n"]:
                problems.append((step, f"{step['op']} on {table}{_grp(step)} reported {step['n']} rows, "
                                       f"the model gives {n}"))
        effects = {t: {rid: view[t].get(rid) for rid in rids} for t, rids in touched.items() if rids}
        return effects, problems, changed

    @staticmethod
    def replay_op(step: dict[str, Any], rows: dict[str, Row], touched: set[str], cols: Cols = BASE_COLS) -> int:
        op = step["op"]
        if op == "append":
            for r in map(_row, step["rows"]):
                rows[r[0]] = r
                touched.add(r[0])
            return len(step["rows"])
        if op == "update":  # the row is rewritten under the transaction's schema: a default read becomes a value
            rid = step["rid"]
            if rid not in rows:
                return 0
            old = rows[rid]
            rows[rid] = (rid, step["set"].get("tok", old[1]), int(step["set"].get("val", old[2])), old[3],
                         project(old, cols)[4])
            touched.add(rid)
            return 1
        if op == "delete":
            gone = [rid for rid in step["rids"] if rid in rows]
            for rid in gone:
                del rows[rid]
                touched.add(rid)
            return len(gone)
        if op == "overwrite":
            for rid in [rid for rid, r in rows.items() if step.get("grp") is None or r[3] == step["grp"]]:
                del rows[rid]
                touched.add(rid)
            for r in map(_row, step["rows"]):
                rows[r[0]] = r
                touched.add(r[0])
            return len(step["rows"])
        raise ValueError(f"unknown op {op!r}")

    def replay_at_snapshot(self, txn: Txn) -> None:
        txn.snap_schemas = dict(self.schemas)
        effects, steps, changed = self.replay_steps(txn, self.state, self.schemas)
        txn.effects, txn.changed = effects, changed
        txn.wrong_at_snapshot = {id(step) for step, _ in steps}
        for _, problem in steps:
            self.violate("inconsistent_txn_read", f"{txn}: {problem}")
        if txn.committed and txn.csn == txn.snap and (effects or changed):
            self.violate("bad_csn", f"{txn} wrote {sorted(effects)} but committed without a new CSN")

    def check_serializable(self, txn: Txn) -> None:
        """At CSN - 1 (every earlier commit applied) the transaction must read what it read at its snapshot."""
        effects, problems = self.replay(txn, self.state, txn.snap_schemas)
        if not problems and effects == txn.effects:
            return
        read_tables = {s["table"] for s in txn.steps}
        culprits = sorted(str(t) for t in self.txns.values()
                          if t.writer and t.csn is not None and txn.snap < t.csn < (txn.csn or 0)
                          and read_tables & set(t.effects or {}))
        what = "; ".join(problems) or "its writes would differ"
        self.violate("not_serializable", f"{txn}: at its commit point {what}; changed after its snapshot by "
                     f"{culprits or 'nobody it can name'}")

    def check_at_commit_point(self, txn: Txn) -> None:
        """A serializable transaction, or one whose merges the engine validates, at CSN - 1."""
        if txn.iso == "serializable":
            self.check_serializable(txn)
        else:
            self.check_merges_validated(txn)

    def check_merges_validated(self, txn: Txn) -> None:
        """At CSN - 1 a merge that inserted (or deleted what its source lacked) must give what it gave at the
        snapshot, whatever the isolation level (the engine validates what it scanned at commit)."""
        _, problems, _ = self.replay_steps(txn, self.state, txn.snap_schemas)
        for step, problem in problems:
            if validated(step) and id(step) not in txn.wrong_at_snapshot:  # else reported as inconsistent
                culprits = sorted(str(t) for t in self.txns.values()
                                  if t.writer and t.csn is not None and txn.snap < t.csn < (txn.csn or 0)
                                  and step["table"] in (t.effects or {}))
                self.violate("unvalidated_merge", f"{txn}: at its commit point {problem}; {step['table']} changed "
                             f"after its snapshot by {culprits or 'nobody it can name'}")

    def apply(self, txn: Txn) -> None:
        if txn.effects is None:  # its snapshot was never reached: cannot happen for a parsed history
            self.violate("malformed", f"{txn} committed but was never replayed")
            return
        for table, (before, changes, _) in txn.changed.items():
            now = self.schemas.get(table, BASE_COLS)
            if now != before:
                others = sorted(str(t) for t in self.txns.values() if t.writer and table in t.changed
                                and txn.snap < (t.csn or 0) < (txn.csn or 0))
                self.violate("ddl_conflict", f"{txn} changed {table} from the schema of its snapshot, which "
                             f"{others or 'nobody it can name'} changed before it committed")
            for step in changes:
                now = changed_schema(step, now)[0]
            self.schemas[table] = now
        for table, rows in txn.effects.items():
            writers = self.last_writer.setdefault(table, {})
            state = self.state.setdefault(table, {})
            for rid, row in rows.items():
                previous = writers.get(rid)
                if previous is not None and (previous.csn or 0) > txn.snap:
                    self.violate("lost_update", f"{txn} and {previous} both wrote row {rid} of {table}; "
                                 f"{previous.tok} committed after {txn.tok}'s snapshot")
                writers[rid] = txn
                if row is None:
                    state.pop(rid, None)
                else:
                    state[rid] = row
        self.check_constraints(txn)

    def check_constraints(self, txn: Txn) -> None:
        for c in self.constraints:
            rows = self.state.get(c["table"], {})
            if not any(rid in (txn.effects or {}).get(c["table"], {}) for rid in c["rids"]):
                continue
            values = [rows[rid][2] for rid in c["rids"] if rid in rows]
            broken = len(values) == len(c["rids"]) and sum(values) < c["min_sum"]
            if not broken:
                continue
            if c.get("enforced"):
                writers = {rid: str(self.last_writer[c['table']].get(rid)) for rid in c["rids"]}
                self.violate("write_skew", f"after {txn} the sum of {c['rids']} is {sum(values)} < {c['min_sum']} "
                             f"(last writers {writers})")
            else:
                self.counts["allowed_constraint_breaks"] += 1

    # -- reads ----------------------------------------------------------------------------------------
    def check_read(self, read: dict[str, Any], snapshot: int) -> None:
        """Compare a read with the model at its snapshot and say which transaction a difference belongs to."""
        where = f"{read['w']} read at CSN {snapshot} ({read.get('how')})"
        final = read.get("how") == "final"
        if final:
            last = max((t.csn or 0 for t in self.txns.values() if t.writer), default=0)
            if snapshot < last:
                self.violate("lost_commit", f"the final read is at CSN {snapshot}, below the last commit {last}")
        found = Differences()
        for table, shape in read.get("schemas", {}).items():
            model = _shape(self.schemas.get(table, BASE_COLS))
            if shape != model:
                self.violate("wrong_schema", f"{where}: {table}'s schema is {shape}, the model has {model}")
        for table, names in read.get("columns", {}).items():
            model = [[c[1], c[2]] for c in self.schemas.get(table, BASE_COLS)]
            if names != model:
                self.violate("wrong_schema", f"{where}: {table} was read as columns {names}, its schema has {model}")
        for table, raw in read["tables"].items():
            self.compare_table(where, snapshot, table, [_row(r) for r in raw], found)
        self.classify(where, final, snapshot, found)
        for message in found.unexplained:
            self.violate("wrong_row", f"{where}: {message}")
        self.counts["reads"] += 1

    def compare_table(self, where: str, snapshot: int, table: str, rows: list[Row], found: Differences) -> None:
        cols = self.schemas.get(table, BASE_COLS)
        expected = {rid: project(r, cols) for rid, r in self.state.get(table, {}).items()}
        writers = self.last_writer.get(table, {})
        for rid, count in Counter(r[0] for r in rows).items():
            if count > 1:
                self.violate("duplicate_row", f"{where}: row {rid} of {table} returned {count} times")
        got = {r[0]: r for r in rows}
        for rid, row in got.items():
            if expected.get(rid) == row:
                found.visible[writers[rid].tok].add(table)
                continue
            found.seen_rows[row[1]].append(row)
            if rid in expected:
                found.missing[writers[rid].tok].add(table)
            author = self.txns.get(row[1])
            if author is None or not author.committed:
                self.violate("dirty_read", f"{where}: row {rid} of {table} written by {author or row[1]}, "
                             "which did not commit")
            elif (author.csn or 0) <= snapshot:
                found.unexplained.append(f"row {rid} of {table} is {row}, the model has {expected.get(rid)}")
        for rid in expected.keys() - got.keys():
            found.missing[writers[rid].tok].add(table)

    def classify(self, where: str, final: bool, snapshot: int, found: Differences) -> None:
        visible, seen_rows = found.visible, found.seen_rows
        for tok, tables in sorted(found.missing.items()):
            txn = self.txns[tok]
            if visible.get(tok):
                self.violate("torn_read", f"{where}: {txn} is visible in {sorted(visible[tok])} but rows of it "
                             f"are missing in {sorted(tables)}")
            else:
                self.violate("lost_commit" if final else "missing_commit",
                             f"{where}: {txn} is missing in {sorted(tables)}")
        for tok, rows in sorted(seen_rows.items()):
            author = self.txns.get(tok)
            if author is None or not author.committed or (author.csn or 0) <= snapshot:
                continue  # dirty reads and wrong rows are reported where they are found
            written = {r[:4] for rows_ in (author.effects or {}).values() for r in rows_.values() if r is not None}
            if written <= {r[:4] for r in rows}:
                self.violate("future_read", f"{where}: saw {author}, committed after the snapshot")
            else:
                seen = len({r[:4] for r in rows} & written)
                self.violate("torn_read", f"{where}: saw {seen} of the {len(written)} rows of {author}, committed "
                             "after the snapshot")

    # -- the commit log and real time ------------------------------------------------------------------
    def check_commit_log(self) -> None:
        if self.commit_log is None:
            return
        by_tid = {t.tid: t for t in self.txns.values()}
        logged: dict[str, int] = {}
        for csn, count in Counter(int(csn) for csn, _ in self.commit_log).items():
            if count > 1:
                self.violate("duplicate_csn", f"{count} commit records share CSN {csn}")
        for csn, tid in self.commit_log:
            if tid in logged:
                self.violate("duplicate_csn", f"transaction {tid} has two commit records")
            logged[tid] = int(csn)
            txn = by_tid.get(tid)
            if txn is None or not txn.committed:
                self.violate("phantom_commit", f"commit record CSN {csn} of {txn or tid}, which did not commit")
        for txn in self.txns.values():
            if txn.writer and txn.tid not in logged:
                self.violate("lost_commit", f"{txn} has no commit record")
            elif txn.writer and logged[txn.tid] != txn.csn:
                self.violate("bad_csn", f"{txn} has commit record CSN {logged[txn.tid]}")

    def check_real_time(self) -> None:
        acked = sorted((t for t in self.txns.values() if t.writer and t.acked and t.end is not None),
                       key=lambda t: float(t.end["t"]))  # type: ignore[index]
        ends = [float(t.end["t"]) for t in acked]  # type: ignore[index]
        best: list[tuple[int, Txn | None]] = []
        for txn in acked:
            previous = best[-1] if best else (0, None)
            best.append(max(previous, (txn.csn or 0, txn), key=lambda p: p[0]))

        def newest_before(moment: float) -> tuple[int, Txn | None]:
            i = bisect.bisect_left(ends, moment)
            return best[i - 1] if i else (0, None)

        for txn in acked:
            assert txn.end is not None
            csn, other = newest_before(float(txn.end.get("t0", txn.end["t"])))
            if other is not None and csn >= (txn.csn or 0):
                self.violate("csn_order", f"{other} ended before {txn} began committing, yet has CSN {csn}")
        for txn in self.txns.values():
            csn, other = newest_before(txn.t_begin)
            if txn.snap < csn:
                self.violate("stale_snapshot", f"{txn} began after {other} was acknowledged, at an older snapshot")
        last_seen: dict[str, tuple[int, str]] = {}
        observations = [(float(r.get("t0", r["t"])), r["w"], int(r.get("latest", r["csn"])), "read", str(r.get("how")))
                        for r in self.reads]
        observations += [(t.t_begin, t.worker, t.snap, "begin", t.tok) for t in self.txns.values()]
        for moment, worker, seen, what, label in sorted(observations):
            csn, other = newest_before(moment)
            if what == "read" and seen < csn:
                self.violate("stale_snapshot", f"{worker}'s {label} read saw watermark {seen} after {other} "
                             "was acknowledged")
            before = last_seen.get(worker)
            if before is not None and seen < before[0]:
                self.violate("watermark_backwards", f"{worker} saw watermark {before[0]} ({before[1]}) and then "
                             f"{seen} ({what} {label})")
            last_seen[worker] = (seen, f"{what} {label}")

    def check_ddl_conflicts(self) -> None:
        """D27 point 4: an incompatible change and a concurrent writer of its table never both commit (first
        committer wins); appends and compatible changes fail only beside an incompatible change."""
        writers = [t for t in self.txns.values() if t.writer]
        incompatible = [(d, table) for d in writers for table, (_, _, inc) in d.changed.items() if inc]
        for d, table in incompatible:
            for w in writers:
                wrote = any(r is not None for r in (w.effects or {}).get(table, {}).values())
                if w is not d and wrote and d.snap < (w.csn or 0) and w.snap < (d.csn or 0):
                    self.violate("ddl_conflict", f"{d} changed {table} incompatibly and {w}, concurrent with it, "
                                 "wrote rows of it: both committed")
        changed_tables = {table for t in self.txns.values() for table in t.changed}  # where D27 is at stake
        failed = [(d, table) for d in self.txns.values() if not d.committed and d.t_commit is not None
                  for table, (_, _, inc) in d.changed.items() if inc]
        for txn in self.txns.values():
            end = txn.end
            if txn.iso != "snapshot" or end is None or end["outcome"] != "aborted" \
                    or end.get("err") != "SerializationError":
                continue
            if not _appends_only(txn):
                continue  # it read, rewrote, or changed a table incompatibly: it may conflict
            tables = {s["table"] for s in txn.steps} & changed_tables
            if tables and not any(table in tables and (d.csn or 0) > txn.snap for d, table in incompatible) \
                    and not any(table in tables and _committing_beside(d, txn) for d, table in failed):
                self.violate("spurious_conflict", f"{txn} appended (and changed tables compatibly) only, yet failed: "
                             f"{end.get('msg', '')[:200]}")

    def check_names(self) -> None:
        """The serial replay of the namespace's tables (docs/DESIGN.md D27): committed transactions in CSN order, each
        one's names resolved at its snapshot (its own changes included) to table identities; a change must still
        hold at its commit point (the name it creates free, the table it renames or drops still under that name) and
        rows go to a table not dropped: else two concurrent changes of one name both committed (`ddl_conflict`).
        Every snapshot read's table list and rows equal the model at its CSN (`wrong_tables`)."""
        if not self.namespace:
            return
        names: Names = {}
        rows: dict[int, dict[str, Row]] = {}
        history: list[tuple[int, Names, dict[str, list[Row]]]] = [(0, {}, {})]
        for txn in sorted((t for t in self.txns.values() if t.writer), key=lambda t: t.csn or 0):
            steps = [s for s in txn.steps if s["ev"] == "op" and s["table"] in self.namespace]
            if not steps:
                continue
            view = dict(history[bisect.bisect_right([h[0] for h in history], txn.snap) - 1][1])
            for step in steps:
                self.apply_name_step(txn, step, view, names, rows)
            history.append((txn.csn or 0, dict(names), {n: sorted(rows.get(i, {}).values()) for n, i in names.items()}))
        self.check_named_reads(history)

    def apply_name_step(self, txn: Txn, step: dict[str, Any], view: Names, names: Names,
                        rows: dict[int, dict[str, Row]]) -> None:
        """One statement of `txn` on the namespace: resolved in `view` (its snapshot and its own changes), applied to
        `names` and `rows` (the model at its commit point)."""
        op, name = step["op"], step["table"]
        if op == "create_table":
            view[name] = -(len(rows) + 1)
            if name in names:
                self.violate("ddl_conflict", f"{txn} created {name}, which a concurrent commit created")
            names[name] = view[name]
            rows[view[name]] = {}
        elif op in ("rename_table", "drop_table"):
            ident = view.pop(name, None)
            if ident is None or names.get(name) != ident:
                self.violate("ddl_conflict", f"{txn} {op.split('_')[0]}d {name}, which a concurrent commit changed")
                return
            del names[name]
            if op == "drop_table":
                rows[ident] = {}
                return
            if step["new"] in names:
                self.violate("ddl_conflict", f"{txn} renamed {name} to {step['new']}, which a concurrent commit took")
            view[step["new"]] = names[step["new"]] = ident
        elif op == "append":
            ident = view.get(name, 0)
            if ident not in names.values():
                self.violate("ddl_conflict", f"{txn} wrote {name}, dropped or renamed by a concurrent commit")
                return
            rows[ident].update((r[0], r) for r in map(_row, step["rows"]))

    def check_named_reads(self, history: list[tuple[int, Names, dict[str, list[Row]]]]) -> None:
        """Every snapshot read's tables of the namespace (`named`) against the model at its CSN."""
        csns = [h[0] for h in history]
        for read in self.reads:
            if "named" not in read:
                continue
            snapshot = int(read["csn"])
            model = history[bisect.bisect_right(csns, snapshot) - 1][2]
            got = {name: sorted(map(_row, got_rows)) for name, got_rows in read["named"].items()}
            where = f"{read['w']} read at CSN {snapshot} ({read.get('how')})"
            if sorted(got) != sorted(model):
                self.violate("wrong_tables", f"{where}: tables {sorted(got)}, the model has {sorted(model)}")
            for name in sorted(set(got) & set(model)):
                if got[name] != model[name]:
                    self.violate("wrong_tables", f"{where}: {name} saw {_diff(got[name], model[name])}")

    def stats(self) -> dict[str, Any]:
        txns = list(self.txns.values())
        aborts = Counter(str(t.end.get("err")) for t in txns if t.end and t.end["outcome"] == "aborted")
        return {
            "txns": len(txns),
            "committed": sum(t.acked for t in txns),
            "committed_writes": sum(t.acked and t.writer for t in txns),
            "committed_serializable": sum(t.acked and t.writer and t.iso == "serializable" for t in txns),
            "aborted": sum(aborts.values()),
            "aborted_by": dict(aborts),
            "rolled_back": sum(1 for t in txns if t.end and t.end["outcome"] == "rolled_back"),
            "unknown": sum(1 for t in txns if t.end is None and t.commit_started),
            "unknown_committed": sum(1 for t in txns if t.end is None and t.committed),
            "abandoned": sum(1 for t in txns if t.end is None and not t.commit_started),
            "reads": self.counts["reads"],
            "txn_reads": sum(1 for t in txns for s in t.steps if s["ev"] == "read"),
            "statements": sum(1 for t in txns for s in t.steps if s["ev"] == "op"),
            "committed_merges": sum(1 for t in txns if t.committed for s in t.steps
                                    if s["ev"] == "op" and s["op"] == "merge"),
            "committed_validated_merges": sum(1 for t in txns if t.committed for s in t.steps if validated(s)),
            "committed_changes": sum(1 for t in txns if t.writer and t.changed),
            "committed_incompatible_changes": sum(1 for t in txns if t.writer and any(
                inc for _, _, inc in t.changed.values())),
            "rolled_back_changes": sum(1 for t in txns if not t.committed and t.changed),
            "killed": self.counts["kills"],
            "allowed_constraint_breaks": self.counts["allowed_constraint_breaks"],
            "last_csn": max((t.csn or 0 for t in txns if t.writer), default=0),
            "violations": len(self.report.violations),
        }


def validated(step: dict[str, Any]) -> bool:
    """Whether a recorded statement is a merge the engine validates at commit: it inserted, or it deletes the rows
    its source lacks."""
    return step.get("ev") == "op" and step.get("op") == "merge" and (
        step["clause"] == "sync" or int(step["n"][1]) > 0)


def merged(step: dict[str, Any], rows: dict[str, Row], touched: set[str]) -> list[int]:
    """Apply a recorded merge to `rows` (rid -> row): a row whose key columns (`on`) equal a source row's is matched
    (the source holds each key once); returns [updated, inserted, deleted] as Transaction.merge counts them."""
    on = [FIELDS.index(name) for name in step["on"]]
    source = {tuple(r[i] for i in on): r for r in map(_row, step["source"])}
    clause = step["clause"]
    updated = inserted = deleted = 0
    matched: set[tuple[Any, ...]] = set()
    for rid, row in list(rows.items()):
        key = tuple(row[i] for i in on)
        new = source.get(key)
        if new is not None:
            matched.add(key)
        if new is None and clause != "sync":
            continue
        if new is None or clause == "delete":
            del rows[rid]
            touched.add(rid)
            deleted += 1
            continue
        updated += 1
        touched.add(rid)
        if clause == "add":
            rows[rid] = (rid, new[1], row[2] + new[2], row[3], row[4])
        elif clause == "guarded":
            rows[rid] = (rid, new[1], new[2], row[3], row[4]) if new[2] > row[2] else row
        else:  # upsert, sync: every column from the source
            rows[rid] = new
    if clause not in ("add", "delete"):
        for key, new in source.items():
            if key not in matched:
                rows[new[0]] = new
                touched.add(new[0])
                inserted += 1
    return [updated, inserted, deleted]


def _row(raw: list[Any] | tuple[Any, ...]) -> Row:
    rid, tok, val, grp = raw[:4]
    extras = tuple(sorted((int(k), v) for k, v in raw[4].items())) if len(raw) > 4 else ()
    return (str(rid), str(tok), int(val), "" if grp is None else str(grp), extras)


def project(row: Row, cols: Cols) -> Row:
    """`row` as a reader under `cols` reads it: each column beyond the first four by id, a column the row was
    written without read as that column's default (null without one); a dropped column not read."""
    if len(cols) == len(FIELDS) and not row[4]:
        return row
    written = dict(row[4])
    extras = tuple(sorted((c[0], written[c[0]] if c[0] in written else c[4]) for c in cols if c[0] > len(FIELDS)))
    return (row[0], row[1], row[2], row[3], extras)


def _committing_beside(change: Txn, txn: Txn) -> bool:
    """Whether `txn` failed naming `change`, an incompatible change that did not commit, while that change was
    committing (their commits overlapped): with the ZooKeeper oracle a change still committing may yet record its
    commit, so a writer of its table counts it as committed (docs/DESIGN.md D27)."""
    end = txn.end or {}
    if change.tid not in str(end.get("msg", "")) or change.t_commit is None or txn.t_commit is None:
        return False
    change_end = float(change.end["t"]) if change.end is not None else float("inf")
    return change.t_commit < float(end["t"]) and change_end > txn.t_commit


def _cols(raw: list[list[Any]]) -> Cols:
    return tuple((int(c[0]), str(c[1]), str(c[2]), bool(c[3]), None) for c in raw)


def _shape(cols: Cols) -> list[list[Any]]:
    """The schema as recorded: [[id, name, type, nullable], ...]."""
    return [[c[0], c[1], c[2], c[3]] for c in cols]


def replay_change(step: dict[str, Any], cols: dict[str, Cols],
                  changed: dict[str, tuple[Cols, list[dict[str, Any]], bool]]) -> list[str]:
    """Apply a recorded table change to the transaction's view of the schemas (`cols`) and note it in `changed`
    (Txn.changed); what differs from the model."""
    table = step["table"]
    before, steps, incompatible = changed.get(table, (cols[table], [], False))
    new, problem = changed_schema(step, cols[table])
    changed[table] = (before, [*steps, step], incompatible or not compatible(step, cols[table]))
    cols[table] = new
    problems = [f"{step['op']} of {table}: {problem}"] if problem else []
    if step["schema"] != _shape(new):
        problems.append(f"after {step['op']} {table}'s schema is {step['schema']}, the model has {_shape(new)}")
    return problems


def _appends_only(txn: Txn) -> bool:
    """Whether the transaction ran appends and compatible changes only (a failed statement: an append)."""
    for step in txn.steps:
        kind, op = step["ev"], step.get("op")
        if kind == "schema" or (kind == "op" and op in ("append", *CHANGES)) or (kind == "op_error" and op == "append"):
            continue
        return False
    return not any(inc for _, _, inc in txn.changed.values())


def compatible(step: dict[str, Any], cols: Cols) -> bool:
    """Whether a change keeps the meaning of rows written before it (D27: add a column, widen one, allow nulls)."""
    op = step["op"]
    if op == "set_nullable":
        return bool(step["nullable"]) or not any(c[1] == step["name"] and c[3] for c in cols)
    return op in ("add_column", "alter_column")


def changed_schema(step: dict[str, Any], cols: Cols) -> tuple[Cols, str]:
    """`cols` after a recorded change, and what is wrong with the change there ("" if nothing)."""
    op = step["op"]
    if op == "add_column":
        cid, name, typ, nullable = step["column"]
        if any(c[1] == name for c in cols):
            return cols, f"column {name!r} exists"
        return (*cols, (int(cid), str(name), str(typ), bool(nullable), step.get("default"))), ""
    name = step["old"] if op == "rename_column" else step["name"]
    if not any(c[1] == name for c in cols):
        return cols, f"no column {name!r}"
    out: list[Col] = []
    for c in cols:
        if c[1] != name:
            out.append(c)
        elif op == "rename_column":
            out.append((c[0], str(step["new"]), c[2], c[3], c[4]))
        elif op == "alter_column":
            out.append((c[0], c[1], str(step["type"]), c[3], c[4]))
        elif op == "set_nullable":
            out.append((c[0], c[1], c[2], bool(step["nullable"]), c[4]))
        # drop_column: left out
    return tuple(out), ""


def _grp(step: dict[str, Any]) -> str:
    return f" (group {step['grp']})" if step.get("grp") is not None else ""


def _diff(got: list[Row], expected: list[Row]) -> str:
    extra, lacking = sorted(set(got) - set(expected)), sorted(set(expected) - set(got))
    return f"{len(got)} rows; extra {extra[:3]}, missing {lacking[:3]}"


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m tests.history.checker HISTORY_DIR", file=sys.stderr)
        return 2
    report = check(load(Path(argv[0])))
    print(report.summary())
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
