"""A hypothesis state machine that drives random histories of concurrent transactions against a model.

What is driven
--------------
Two tables (``shop.events`` partitioned by the string column ``day``, ``shop.accounts`` unpartitioned),
seeded with a committed transaction, and up to four transactions open at once, each begun with
isolation "snapshot" or "serializable". Each step is one action: append, overwrite (whole table or
listed partitions), update (``value = value + 1 where id in S``), delete (``where id in S``), each
optionally under a staging key and optionally followed by commit or rollback; a retried task (the
last keyed statement again, or another statement under its key); commit or rollback of any open
transaction; a read inside a transaction (optionally listed partitions and a filter, optionally
through a second handle from ``wh.attach``); ``wh.read`` at the readable watermark or at any older
CSN; bad input (data outside the listed partitions); statements, reads, commit and rollback on
transactions that ended. Ending a transaction begins another one. Every example runs on a fresh
warehouse: a new SQLite file (on /dev/shm when there is one) or a new PostgreSQL schema, and a new
storage root. The actions are drawn by ONE rule: hypothesis' swarm testing turns whole rules off per
example, and with a rule per action most examples lost either their writes or their commits.

The model
---------
Row-level deltas applied at commit would give the right contents whenever the engine accepts a
statement, but they cannot say WHEN it must refuse one: write-write conflicts are per PART
(invariant 6), so two transactions deleting different rows of one part conflict and the same rows
of different parts do not. So the model tracks parts (a committed transaction's effect is then
exactly "its removed parts disappear, its created parts appear"), built only from what the contract
says about them: a staging call writes one part per partition present in its data (no rows, no
part); overwrite replaces every part of the table (or of the listed partitions) visible to the
transaction; delete/update replace only the visible parts holding a matching row, each by one part
of its kept/updated rows (none when nothing is kept). A model part has the four version fields of
docs/DESIGN.md (creating transaction, creation CSN or None or RollbackCSN, removing transaction, removal
CSN) and its staging keys.

* Visibility (invariant 2): a transaction sees its own live parts not removed by itself, plus parts
  committed at or before its snapshot, not removed at or before it, and not removed by itself.
* Write conflicts: a statement conflicts iff a part it would remove already carries a removal by
  ANY other transaction (active, failed but not yet rolled back, or committed after the snapshot,
  which is how "first writer wins" looks at part level). The engine must then raise
  SerializationError and the transaction becomes failed: further statements, reads and commit raise
  TransactionClosedError, only rollback works. Conversely the engine must accept every statement the
  model accepts. Appends never conflict.
* Keys (invariant 7): a keyed statement first compensates what earlier statements of the same
  transaction staged under that key (in any table): their created parts become RollbackCSN
  (invisible, as if never written) and their removal locks are released; the statement then sees
  and conflicts on the compensated view. A statement is atomic: one rejected for a conflict leaves
  no trace, not even its compensation. Keys whose statements built on what a withdrawn key did are
  withdrawn with it, transitively, and must run again: statements that rewrote a part it staged
  (hold its removal lock), and statements that scanned (overwrite: the listed partitions, else the
  whole table; update and delete: the whole table) a partition where it holds removal locks, after
  its first statement in that table. Commit refuses with InvalidatedKeysError naming them until a
  statement under each key has run. A write with no key among them cannot run again, so the retry is
  refused (RetryConflictError) and changes nothing.
* Commit: a transaction whose live parts touch no table commits read-only at its snapshot CSN.
  Otherwise, with isolation "serializable", it fails (and is rolled back) if a transaction
  committed after its snapshot created or removed a live part in a partition it read (any part of
  a table it read whole). Reads are its ``read`` calls (the listed partitions, else the whole
  table) and the scans of its accepted overwrite (listed partitions, else whole table), update and
  delete (whole table), which chose what to replace from what they saw. Otherwise the commit gets
  a CSN above every earlier one; its created parts get that creation CSN and its removed parts
  that removal CSN. The model then records the full contents of every table at that CSN; these
  snapshots never change afterwards and are what ``wh.read`` at that CSN (or any CSN up to the
  next commit) must return. Rolled-back and compensated parts never count as touched or written.
* Rollback: created parts become RollbackCSN, removal locks are released.

Checks: every read compares the engine's rows with the model's as sorted lists of row dicts. After
every statement the parts the engine lists for the transaction (``wh.transaction_info(tid)['parts']``:
table, partition, row count, role, rolled back or not) equal the model's, so a divergence in part
structure shows where it happens rather than as a later conflict mismatch; after an update, delete
or overwrite the transaction's view of the table equals the model's too. The engine must raise
SerializationError exactly when the model predicts a conflict. After every commit: the watermark is
the new CSN, every table read at it equals the model (atomic visibility), and ``last_commit_csn``
of every table is the model's. Transactions start at the watermark; a failed or ended transaction
refuses statements.

Runs ``AIRFLOW_TXN_HYPOTHESIS_EXAMPLES`` examples (default 40) of up to ``AIRFLOW_TXN_HYPOTHESIS_STEPS``
steps (default 30) on each catalog. The same machine also replays a few fixed histories (bottom of
the module) so that the paths a random run may miss are always taken.
"""

from __future__ import annotations

import bisect
import contextlib
import itertools
import os
import shutil
import tempfile
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule, run_state_machine_as_test
from sqlalchemy import Engine, create_engine, text

from airflow_txn import Warehouse
from airflow_txn.core.transaction import Transaction
from airflow_txn.errors import (
    InvalidatedKeysError,
    RetryConflictError,
    SchemaMismatchError,
    SerializationError,
    TransactionClosedError,
)

ROLLBACK_CSN = 2**63 - 1  # docs/DESIGN.md: RollbackCSN, never visible
WHOLE = "*"  # a read set entry meaning "the whole table"
MAX_LIVE = 4
ISOLATIONS = ("snapshot", "serializable")

EXAMPLES = int(os.environ.get("AIRFLOW_TXN_HYPOTHESIS_EXAMPLES", "40"))
STEPS = int(os.environ.get("AIRFLOW_TXN_HYPOTHESIS_STEPS", "30"))

Row = tuple[Any, ...]
STATS: Counter[str] = Counter()


def note(what: str) -> None:
    """A hypothesis event, also counted for the summary the tests print (see it with pytest -s)."""
    STATS[what] += 1
    with contextlib.suppress(InvalidArgument):  # replayed outside hypothesis (the fixed scenarios)
        event(what)


# -- tables -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Spec:
    """One table: columns (id, [partition column], value), all ints but the string partition column."""

    name: str
    pcol: str | None
    pvalues: tuple[str, ...] = ()

    def __repr__(self) -> str:
        return repr(self.name)

    @property
    def columns(self) -> tuple[str, ...]:
        return ("id", self.pcol, "value") if self.pcol else ("id", "value")

    def schema(self) -> pa.Schema:
        return pa.schema([(c, pa.string() if c == self.pcol else pa.int64()) for c in self.columns])

    def arrow(self, rows: Iterable[Row]) -> pa.Table:
        return pa.Table.from_pylist([dict(zip(self.columns, r, strict=True)) for r in rows], schema=self.schema())

    def make_rows(self, raw: Iterable[tuple[int, int, int]]) -> tuple[Row, ...]:
        """(id, partition index, value) triples as rows of this table."""
        if self.pcol is None:
            return tuple((i, v) for i, _, v in raw)
        return tuple((i, self.pvalues[p % len(self.pvalues)], v) for i, p, v in raw)

    def scope(self, indices: frozenset[int] | None) -> tuple[str, ...] | None:
        """Partition indices as a sorted tuple of partition values (None: whole table / unpartitioned)."""
        if indices is None or self.pcol is None:
            return None
        return tuple(sorted({self.pvalues[i % len(self.pvalues)] for i in indices}))

    def partition_of(self, row: Row) -> str | None:
        return row[1] if self.pcol else None

    def split(self, rows: Iterable[Row]) -> list[tuple[str | None, tuple[Row, ...]]]:
        """One piece per partition present in `rows` (no rows, no piece)."""
        rows = tuple(rows)
        if self.pcol is None:
            return [(None, rows)] if rows else []
        values = sorted({self.partition_of(r) for r in rows})
        return [(v, tuple(r for r in rows if self.partition_of(r) == v)) for v in values]

    def sort(self, rows: Iterable[Row]) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, r, strict=True)) for r in sorted(rows)]

    def rows_of(self, table: pa.Table) -> list[dict[str, Any]]:
        assert table.column_names == list(self.columns), f"{self.name} read with columns {table.column_names}"
        columns = [table.column(c).to_pylist() for c in self.columns]
        return self.sort(zip(*columns, strict=True))


SPECS = (
    Spec("shop.events", "day", ("2024-01-01", "2024-01-02", "2024-01-03")),
    Spec("shop.accounts", None),
)


# -- the model ----------------------------------------------------------------------------------------
ACTIVE, FAILED, COMMITTED, ROLLED_BACK = "active", "failed", "committed", "rolled_back"


@dataclass(eq=False)
class MTxn:
    handle: Transaction
    isolation: str
    snapshot: int
    state: str = ACTIVE
    reads: dict[str, set[str]] = field(default_factory=dict)
    last_keyed: Stmt | None = None
    keyed: dict[str, Stmt] = field(default_factory=dict)  # each key's latest statement
    invalidated: set[str] = field(default_factory=set)  # keys a retry withdrew: they must run again
    scans: list[Scan] = field(default_factory=list)  # what its statements scanned, in order

    def __repr__(self) -> str:
        return f"<{self.isolation} transaction {self.handle.tid} at {self.snapshot}, {self.state}>"

    @property
    def live(self) -> bool:
        return self.state in (ACTIVE, FAILED)


@dataclass(frozen=True)
class Scan:
    """A statement's place in its transaction's order, its key, and what it scanned ("*": the whole table,
    "": nothing, an append; else partition values, None for the unpartitioned table)."""

    seq: int
    key: str | None
    table: str
    scope: frozenset[str | None]

    def covers(self, table: str, partition: str | None) -> bool:
        return self.table == table and ("*" in self.scope or partition in self.scope)


@dataclass(eq=False)
class MPart:
    table: str
    partition: str | None
    rows: tuple[Row, ...]
    creator: MTxn
    key: str | None
    created: int | None = None  # None: staged; ROLLBACK_CSN: rolled back or compensated
    remover: MTxn | None = None
    removal_key: str | None = None
    removed: int | None = None

    @property
    def live(self) -> bool:
        return self.created != ROLLBACK_CSN


@dataclass(frozen=True)
class Stmt:
    """One write statement, replayable (retry with the same key)."""

    kind: str  # append | overwrite | update | delete
    spec: Spec
    key: str | None
    rows: tuple[Row, ...] = ()
    scope: tuple[str, ...] | None = None
    ids: frozenset[int] = frozenset()

    def run(self, t: Transaction) -> None:
        name = self.spec.name
        if self.kind == "append":
            t.append(name, self.spec.arrow(self.rows), key=self.key)
        elif self.kind == "overwrite":
            parts = None if self.scope is None else [{self.spec.pcol: v} for v in self.scope]
            t.overwrite(name, self.spec.arrow(self.rows), partitions=parts, key=self.key)
        elif self.kind == "update":
            t.update(name, pc.field("id").isin(sorted(self.ids)), {"value": pc.field("value") + 1}, key=self.key)
        else:
            t.delete(name, pc.field("id").isin(sorted(self.ids)), key=self.key)

    def rewrite(self, rows: tuple[Row, ...]) -> tuple[Row, ...]:
        """What update/delete make of one matching part's rows."""
        if self.kind == "delete":
            return tuple(r for r in rows if r[0] not in self.ids)
        return tuple((*r[:-1], r[-1] + 1) if r[0] in self.ids else r for r in rows)


class Model:
    """Parts with seed-000 version fields, the commit history, and per-CSN table contents."""

    def __init__(self, initial_csn: int) -> None:
        self.parts: list[MPart] = []
        self.initial = initial_csn
        self.latest = initial_csn
        self.commits: list[tuple[int, MTxn, frozenset[str]]] = []
        self.history: dict[int, dict[str, list[dict[str, Any]]]] = {initial_csn: {s.name: [] for s in SPECS}}

    # visibility (invariant 2)
    def visible(self, txn: MTxn | None, snapshot: int, table: str) -> list[MPart]:
        out = []
        for p in self.parts:
            if p.table != table or (txn is not None and p.remover is txn):
                continue
            own = txn is not None and p.creator is txn and p.live
            committed = p.created is not None and p.created <= snapshot and not (
                p.removed is not None and p.removed <= snapshot)
            if own or committed:
                out.append(p)
        return out

    def txn_rows(self, txn: MTxn, spec: Spec, scope: tuple[str, ...] | None,
                 ids: frozenset[int] | None) -> list[dict[str, Any]]:
        rows = [
            r for p in self.visible(txn, txn.snapshot, spec.name) if scope is None or p.partition in scope
            for r in p.rows if ids is None or r[0] in ids
        ]
        return spec.sort(rows)

    def at(self, csn: int) -> dict[str, list[dict[str, Any]]]:
        """Table contents at snapshot `csn`: those of the last commit at or before it."""
        csns = sorted(self.history)
        return self.history[csns[bisect.bisect_right(csns, csn) - 1]]

    def last_commit(self, table: str) -> int | None:
        return max((csn for csn, _, tables in self.commits if table in tables), default=None)

    # statements
    def dependents(self, txn: MTxn, key: str) -> set[str | None]:
        """Keys (None: a write with no key) whose statements built on what `key` did, transitively."""
        found: set[str | None] = set()
        frontier = [key]
        while frontier:
            source = frontier.pop()
            for other in self.built_on(txn, source):
                if other != key and other not in found:
                    found.add(other)
                    if other is not None:
                        frontier.append(other)
        return found

    def built_on(self, txn: MTxn, source: str) -> set[str | None]:
        """Statements that rewrote a part `source` staged, or scanned a partition where it holds removal
        locks after its first statement in that table."""
        keys = {p.removal_key for p in self.parts if p.creator is txn and p.key == source and p.created is None
                and p.remover is txn and p.removal_key != source}
        since: dict[str, int] = {}
        for scan in txn.scans:
            if scan.key == source:
                since.setdefault(scan.table, scan.seq)
        held = {(p.table, p.partition) for p in self.parts
                if p.remover is txn and p.removal_key == source and p.removed is None and p.live}
        keys |= {scan.key for scan in txn.scans if scan.key != source and scan.table in since
                 and scan.seq > since[scan.table] and any(scan.covers(t, v) for t, v in held)}
        return keys

    def withdraw(self, txn: MTxn, key: str | None, others: set[str | None]) -> Callable[[], None]:
        """Undo what earlier statements of `txn` staged under `key` and under each of `others` (first);
        returns how to undo that again."""
        if key is None:
            return lambda: None
        saved = [(p, p.created, p.remover, p.removal_key) for p in self.parts]
        saved_scans = list(txn.scans)
        for withdrawn in [*sorted(k for k in others if k is not None), key]:
            self.compensate(txn, withdrawn)
        txn.scans = [scan for scan in txn.scans if scan.key not in others and scan.key != key]

        def undo() -> None:
            txn.scans = saved_scans
            for p, created, remover, removal_key in saved:
                p.created, p.remover, p.removal_key = created, remover, removal_key
        return undo

    def compensate(self, txn: MTxn, key: str) -> None:
        for p in self.parts:
            if p.creator is txn and p.key == key and p.created is None:
                p.created = ROLLBACK_CSN
        for p in self.parts:
            if p.remover is txn and p.removal_key == key and p.removed is None and p.live:
                p.remover, p.removal_key = None, None

    def plan(self, txn: MTxn, stmt: Stmt) -> tuple[list[MPart], list[tuple[str | None, tuple[Row, ...]]]]:
        """(parts the statement removes, (partition, rows) of the parts it creates)."""
        spec = stmt.spec
        visible = self.visible(txn, txn.snapshot, spec.name)
        if stmt.kind == "append":
            return [], spec.split(stmt.rows)
        if stmt.kind == "overwrite":
            victims = [p for p in visible if stmt.scope is None or p.partition in stmt.scope]
            return victims, spec.split(stmt.rows)
        victims = [p for p in visible if any(r[0] in stmt.ids for r in p.rows)]
        pieces = [piece for p in victims for piece in spec.split(stmt.rewrite(p.rows))]
        return victims, pieces

    def apply(self, txn: MTxn, stmt: Stmt, victims: list[MPart],
              pieces: list[tuple[str | None, tuple[Row, ...]]]) -> None:
        for p in victims:
            p.remover, p.removal_key = txn, stmt.key
        self.parts += [MPart(stmt.spec.name, part, rows, txn, stmt.key) for part, rows in pieces]

    # commit and rollback
    def touched(self, txn: MTxn) -> frozenset[str]:
        return frozenset(p.table for p in self.parts if p.live and txn in (p.creator, p.remover))

    def written_partitions(self, txn: MTxn, table: str) -> set[str | None]:
        return {p.partition for p in self.parts if p.table == table and p.live and txn in (p.creator, p.remover)}

    def read_conflict(self, txn: MTxn) -> bool:
        """Serializable: a transaction committed after our snapshot wrote a partition we read."""
        for csn, other, tables in self.commits:
            if csn <= txn.snapshot:
                continue
            for table in tables & txn.reads.keys():
                read = txn.reads[table]
                if WHOLE in read or read & self.written_partitions(other, table):
                    return True
        return False

    def commit(self, txn: MTxn, csn: int, tables: frozenset[str]) -> None:
        for p in self.parts:
            if p.creator is txn and p.created is None:
                p.created = csn
            if p.remover is txn and p.removed is None:
                assert p.creator is txn or (p.created is not None and p.created <= self.latest), \
                    "model removed a part that was neither committed nor its own"
                p.removed = csn
        self.commits.append((csn, txn, tables))
        self.latest = csn
        self.history[csn] = {
            s.name: s.sort(r for p in self.visible(None, csn, s.name) for r in p.rows) for s in SPECS
        }

    def rollback(self, txn: MTxn) -> None:
        for p in self.parts:
            if p.creator is txn and p.created is None:
                p.created = ROLLBACK_CSN
            if p.remover is txn and p.removed is None:
                p.remover, p.removal_key = None, None

    def parts_of(self, txn: MTxn) -> list[tuple[Any, ...]]:
        """The model's version of wh.transaction_info(tid)['parts'], reduced to what the model knows."""
        return sorted(
            (p.table, p.partition, len(p.rows), "created" if p.creator is txn else "removed", not p.live)
            for p in self.parts if txn in (p.creator, p.remover)
        )


# -- fresh catalogs per example -------------------------------------------------------------------------
class Catalogs:
    """Hands out a fresh, empty catalog URL per hypothesis example, and drops it afterwards."""

    def new(self, directory: Path) -> tuple[str, Callable[[], None]]:
        return f"sqlite:///{directory / 'catalog.db'}", lambda: None

    def close(self) -> None:
        return None


class PgCatalogs(Catalogs):
    def __init__(self, base_url: str) -> None:
        self.base = base_url
        self.engine: Engine = create_engine(base_url, isolation_level="AUTOCOMMIT")

    def new(self, directory: Path) -> tuple[str, Callable[[], None]]:
        name = f"hyp_{uuid.uuid4().hex[:12]}"
        with self.engine.connect() as conn:
            conn.execute(text(f'CREATE SCHEMA "{name}"'))

        def drop() -> None:
            with self.engine.connect() as conn:
                conn.execute(text(f'DROP SCHEMA "{name}" CASCADE'))

        sep = "&" if "?" in self.base else "?"
        return f"{self.base}{sep}options=-csearch_path%3D{name}", drop

    def close(self) -> None:
        self.engine.dispose()


# -- actions ----------------------------------------------------------------------------------------
# One rule draws one action. Hypothesis' swarm testing switches whole rules off per example, which
# with one rule per action left many examples without writes or without commits; a single rule
# with weighted actions keeps every example a real history. `txn` is an index into the open
# transactions (modulo their number); ending a transaction begins a new one in its place.
@dataclass(frozen=True)
class Begin:
    isolation: str


@dataclass(frozen=True)
class Write:
    txn: int
    stmt: Stmt
    then: str  # "stay", "commit" or "rollback"


@dataclass(frozen=True)
class RetrySameKey:
    txn: int
    then: str
    instead: Stmt | None  # None: run the last keyed statement again; else this one, under that key


@dataclass(frozen=True)
class RetryEarlierKey:
    """A task cleared without its downstream: an earlier key's latest statement runs again."""

    txn: int
    pick: int
    then: str


@dataclass(frozen=True)
class End:
    txn: int
    outcome: str
    next_isolation: str


@dataclass(frozen=True)
class ReadInTxn:
    txn: int
    spec: Spec
    partitions: tuple[str, ...] | None
    ids: frozenset[int] | None
    attach: bool


@dataclass(frozen=True)
class ReadCommitted:
    spec: Spec
    offset: int | None  # None: the readable watermark; else any CSN since the start, by offset


@dataclass(frozen=True)
class Misuse:
    txn: int
    action: str


TXN = st.integers(min_value=0, max_value=MAX_LIVE * 3)
TABLE = st.sampled_from(SPECS)
ISOLATION = st.sampled_from(ISOLATIONS)
KEY = st.sampled_from([None, "k1", "k1", "k2", "k2"])
IDS = st.frozensets(st.integers(0, 3), min_size=1, max_size=2)  # few ids: statements collide often
SCOPE = st.one_of(st.none(), st.frozensets(st.integers(0, 2), min_size=1, max_size=2))
RAW = st.tuples(st.integers(0, 3), st.integers(0, 2), st.integers(0, 9))
THEN = st.sampled_from(["stay", "stay", "stay", "stay", "commit", "commit", "rollback"])


@st.composite
def statements(draw: st.DrawFn) -> Stmt:
    spec, key = draw(TABLE), draw(KEY)
    kind = draw(st.sampled_from(["append", "append", "overwrite", "update", "update", "delete"]))
    if kind == "append":
        return Stmt(kind, spec, key, rows=spec.make_rows(draw(st.lists(RAW, min_size=1, max_size=4))))
    if kind == "overwrite":
        scope = spec.scope(draw(SCOPE))
        rows = spec.make_rows(draw(st.lists(RAW, max_size=4)))
        return Stmt(kind, spec, key, rows=tuple(r for r in rows if scope is None or spec.partition_of(r) in scope),
                    scope=scope)
    return Stmt(kind, spec, key, ids=draw(IDS))


@st.composite
def reads_in_txn(draw: st.DrawFn) -> ReadInTxn:
    spec = draw(TABLE)
    return ReadInTxn(draw(TXN), spec, spec.scope(draw(SCOPE)), draw(st.one_of(st.none(), IDS)), draw(st.booleans()))


WRITES = st.builds(Write, TXN, statements(), THEN)
ACTIONS = st.one_of(
    WRITES, WRITES, WRITES, WRITES, WRITES,
    st.builds(End, TXN, st.sampled_from(["commit", "commit", "commit", "rollback"]), ISOLATION),
    reads_in_txn(), reads_in_txn(),
    st.builds(ReadCommitted, TABLE, st.one_of(st.none(), st.integers(min_value=0, max_value=1000))),
    st.builds(ReadCommitted, TABLE, st.one_of(st.none(), st.integers(min_value=0, max_value=1000))),
    st.builds(RetrySameKey, TXN, THEN, st.one_of(st.none(), statements())),
    st.builds(RetryEarlierKey, TXN, st.integers(0, 3), THEN),
    st.builds(Begin, ISOLATION),
    st.builds(Misuse, TXN, st.sampled_from(["stray overwrite", "append", "read", "commit", "rollback"])),
)


# -- the machine --------------------------------------------------------------------------------------
class TxnMachine(RuleBasedStateMachine):
    catalogs: ClassVar[Catalogs] = Catalogs()

    def __init__(self) -> None:
        super().__init__()
        # the model checks semantics, not durability: a RAM disk (when there is one) keeps SQLite fast
        ram = Path("/dev/shm")
        self.dir = Path(tempfile.mkdtemp(prefix="airflow_txn_hyp_", dir=ram if ram.is_dir() else None))
        self.cleanup = contextlib.ExitStack()  # hypothesis calls teardown() only once __init__ succeeded
        with contextlib.ExitStack() as on_error:
            on_error.callback(self.teardown)
            self.cleanup.callback(shutil.rmtree, self.dir, ignore_errors=True)
            url, drop_catalog = self.catalogs.new(self.dir)
            self.cleanup.callback(drop_catalog)
            self.wh = Warehouse.open(catalog=url, root=str(self.dir / "root"))
            self.cleanup.callback(self.wh.close)
            for spec in SPECS:
                self.wh.create_table(spec.name, spec.schema(), partition_by=[spec.pcol] if spec.pcol else [])
            self.model = Model(self.wh.readable_csn())
            self.txns: list[MTxn] = []
            self.seq = itertools.count(1)
            on_error.pop_all()

    def teardown(self) -> None:
        self.cleanup.close()

    # helpers
    def live(self) -> list[MTxn]:
        return [t for t in self.txns if t.live]

    def ended(self) -> list[MTxn]:
        return [t for t in self.txns if not t.live]

    def pick_live(self, pick: int) -> MTxn:
        if not self.live():  # cannot happen (an ended transaction is replaced), but stay total
            self.begin("snapshot")
        live = self.live()
        return live[pick % len(live)]

    def check_parts(self, txn: MTxn) -> None:
        engine = sorted(
            (p["table"], next(iter(p["partition"].values()), None), p["rows"], p["role"],
             p["creation_csn"] == ROLLBACK_CSN)
            for p in self.wh.transaction_info(txn.handle.tid)["parts"]
        )
        assert engine == self.model.parts_of(txn), "engine's parts of the transaction differ from the model's"

    def check_view(self, txn: MTxn, spec: Spec, scope: tuple[str, ...] | None = None) -> None:
        """The transaction's own view of a table (snapshot + own writes) equals the model's."""
        listed = None if scope is None else [{spec.pcol: v} for v in scope]
        got = spec.rows_of(txn.handle.read(spec.name, partitions=listed))
        if txn.isolation == "serializable":
            txn.reads.setdefault(spec.name, set()).update(scope or [WHOLE])
        assert got == self.model.txn_rows(txn, spec, scope, None), f"view of {spec.name} inside the transaction"

    def execute(self, txn: MTxn, stmt: Stmt) -> None:
        if txn.state == FAILED:
            with pytest.raises(TransactionClosedError):
                stmt.run(txn.handle)
            return
        if stmt.key is not None:
            txn.last_keyed = txn.keyed[stmt.key] = stmt
        others = set() if stmt.key is None else self.model.dependents(txn, stmt.key)
        if None in others:
            note(f"{stmt.kind}: retry refused, a write with no key rewrote its output")
            with pytest.raises(RetryConflictError):
                stmt.run(txn.handle)
            self.check_parts(txn)
            return
        undo_compensation = self.model.withdraw(txn, stmt.key, others)
        victims, pieces = self.model.plan(txn, stmt)
        if any(p.remover is not None for p in victims):
            note(f"{stmt.kind}: write-write conflict")
            with pytest.raises(SerializationError):
                stmt.run(txn.handle)
            undo_compensation()  # a rejected statement changes nothing, its compensation included
            txn.state = FAILED
        else:
            note(f"{stmt.kind}: accepted, {'some' if victims else 'no'} parts replaced")
            stmt.run(txn.handle)
            self.model.apply(txn, stmt, victims, pieces)
            self.record_scan(txn, stmt)
            if others:
                note(f"{stmt.kind}: retry invalidated {len(others)} other key(s)")
            txn.invalidated = (txn.invalidated | {k for k in others if k is not None}) - {stmt.key}
            if txn.isolation == "serializable" and stmt.kind != "append":
                txn.reads.setdefault(stmt.spec.name, set()).update(stmt.scope or [WHOLE])
        self.check_parts(txn)
        if txn.state == ACTIVE and stmt.kind != "append":  # reads nothing the statement did not scan
            self.check_view(txn, stmt.spec, stmt.scope)

    def record_scan(self, txn: MTxn, stmt: Stmt) -> None:
        """What the engine keeps of an accepted statement's scan (an append with no key: nothing)."""
        if stmt.kind == "append":
            if stmt.key is not None:
                txn.scans.append(Scan(next(self.seq), stmt.key, stmt.spec.name, frozenset({""})))
            return
        scope: frozenset[str | None] = frozenset({"*"})
        if stmt.kind == "overwrite" and stmt.scope is not None:
            scope = frozenset(stmt.scope)
        txn.scans.append(Scan(next(self.seq), stmt.key, stmt.spec.name, scope))

    def commit(self, txn: MTxn) -> None:
        if txn.state == FAILED:
            with pytest.raises(TransactionClosedError):
                txn.handle.commit()
            assert txn.handle.state == ACTIVE
            return
        if txn.invalidated:
            note("commit: refused, keys must run again")
            with pytest.raises(InvalidatedKeysError) as refused:
                txn.handle.commit()
            assert refused.value.keys == sorted(txn.invalidated)
            assert txn.handle.state == ACTIVE
            return
        tables = self.model.touched(txn)
        if not tables:
            note("commit: read-only")
            assert txn.handle.commit() == txn.snapshot, "a read-only commit returns its snapshot CSN"
            txn.state = COMMITTED
        elif txn.isolation == "serializable" and self.model.read_conflict(txn):
            note("commit: serializable validation fails")
            with pytest.raises(SerializationError):
                txn.handle.commit()
            self.model.rollback(txn)
            txn.state = ROLLED_BACK
        else:
            note(f"commit: {txn.isolation}, {len(tables)} table(s)")
            csn = txn.handle.commit()
            assert csn > self.model.latest, f"commit CSN {csn} is not above the last one {self.model.latest}"
            self.model.commit(txn, csn, tables)
            txn.state = COMMITTED
            for spec in SPECS:  # every table, touched or not, at the new CSN (atomic visibility) ...
                assert spec.rows_of(self.wh.read(spec.name, csn=csn)) == self.model.history[csn][spec.name]
                # ... and the commit record names exactly the tables the transaction changed
                assert self.wh.last_commit_csn(spec.name) == self.model.last_commit(spec.name), spec.name
        assert txn.handle.state == txn.state
        assert self.wh.readable_csn() == self.model.latest, "the watermark is the last commit (the committer's own)"

    def rollback(self, txn: MTxn) -> None:
        txn.handle.rollback()
        self.model.rollback(txn)
        txn.state = ROLLED_BACK
        assert txn.handle.state == ROLLED_BACK

    def finish(self, txn: MTxn, outcome: str, isolation: str | None = None) -> None:
        """Commit or roll back (or, for "stay", leave open); an ended transaction's place is taken by a
        new one (same isolation unless given), so the history keeps going."""
        if outcome == "commit":
            self.commit(txn)
        elif outcome == "rollback":
            self.rollback(txn)
        if not txn.live and len(self.live()) < MAX_LIVE:
            self.begin(isolation or txn.isolation)

    # the rules
    @initialize(seed=st.lists(st.lists(RAW, max_size=6), min_size=len(SPECS), max_size=len(SPECS)),
                isolations=st.lists(ISOLATION, min_size=1, max_size=3))
    def open_transactions(self, seed: list[list[tuple[int, int, int]]], isolations: list[str]) -> None:
        """Commit some rows into every table (so updates and deletes have parts to hit), then open
        one to three transactions."""
        self.begin("snapshot")
        txn = self.txns[-1]
        for spec, raws in zip(SPECS, seed, strict=True):
            if raws:
                self.execute(txn, Stmt("append", spec, None, rows=spec.make_rows(raws)))
        self.commit(txn)
        for isolation in isolations:
            self.begin(isolation)

    @rule(action=ACTIONS)
    def step(self, action: Any) -> None:
        handlers: dict[type, Callable[[Any], None]] = {
            Begin: self.do_begin, Write: self.do_write, RetrySameKey: self.do_retry, End: self.do_end,
            RetryEarlierKey: self.do_retry_earlier,
            ReadInTxn: self.do_read_in_txn, ReadCommitted: self.do_read_committed, Misuse: self.do_misuse,
        }
        handlers[type(action)](action)

    def begin(self, isolation: str) -> None:
        handle = self.wh.begin(isolation=isolation)
        assert handle.snapshot_csn == self.model.latest, "a transaction must start at the readable watermark"
        self.txns.append(MTxn(handle, isolation, handle.snapshot_csn))

    def do_begin(self, action: Begin) -> None:
        if len(self.live()) < MAX_LIVE:
            self.begin(action.isolation)

    def do_write(self, action: Write) -> None:
        txn = self.pick_live(action.txn)
        self.execute(txn, action.stmt)
        self.finish(txn, action.then)

    def do_retry(self, action: RetrySameKey) -> None:
        """A retried task: its statement (again, or a different one) under the key of the transaction's last
        keyed statement replaces, not adds to, what was staged under that key."""
        candidates = [t for t in self.live() if t.last_keyed is not None]
        if not candidates:
            return
        txn = candidates[action.txn % len(candidates)]
        assert txn.last_keyed is not None
        note("retry with the same key" + (" and another statement" if action.instead else ""))
        stmt = txn.last_keyed if action.instead is None else replace(action.instead, key=txn.last_keyed.key)
        self.execute(txn, stmt)
        self.finish(txn, action.then)

    def do_retry_earlier(self, action: RetryEarlierKey) -> None:
        candidates = [t for t in self.live() if len(t.keyed) > 1]
        if not candidates:
            return
        txn = candidates[action.txn % len(candidates)]
        keys = sorted(txn.keyed)
        note("retry of an earlier key")
        self.execute(txn, txn.keyed[keys[action.pick % len(keys)]])
        self.finish(txn, action.then)

    def do_end(self, action: End) -> None:
        self.finish(self.pick_live(action.txn), action.outcome, action.next_isolation)

    def do_read_in_txn(self, action: ReadInTxn) -> None:
        txn, spec = self.pick_live(action.txn), action.spec
        handle = self.wh.attach(txn.handle.tid) if action.attach else txn.handle
        where = None if action.ids is None else pc.field("id").isin(sorted(action.ids))
        listed = None if action.partitions is None else [{spec.pcol: v} for v in action.partitions]
        if txn.state == FAILED:
            with pytest.raises(TransactionClosedError):
                handle.read(spec.name, filter=where, partitions=listed)
            return
        got = spec.rows_of(handle.read(spec.name, filter=where, partitions=listed))
        if txn.isolation == "serializable":
            txn.reads.setdefault(spec.name, set()).update(action.partitions or [WHOLE])
        assert got == self.model.txn_rows(txn, spec, action.partitions, action.ids)

    def do_read_committed(self, action: ReadCommitted) -> None:
        spec = action.spec
        if action.offset is None:
            assert self.wh.readable_csn() == self.model.latest
            assert spec.rows_of(self.wh.read(spec.name)) == self.model.history[self.model.latest][spec.name]
            assert self.wh.last_commit_csn(spec.name) == self.model.last_commit(spec.name)
            return
        csn = self.model.initial + action.offset % (self.model.latest - self.model.initial + 1)
        note("read at an older CSN" if csn < self.model.latest else "read at the watermark CSN")
        assert spec.rows_of(self.wh.read(spec.name, csn=csn)) == self.model.at(csn)[spec.name]

    def do_misuse(self, action: Misuse) -> None:
        """Bad input leaves an open transaction usable (invariant 9); an ended one refuses everything."""
        active = [t for t in self.live() if t.state == ACTIVE]
        if action.action == "stray overwrite" and active:
            txn = active[action.txn % len(active)]
            spec = SPECS[0]
            rows = spec.make_rows([(0, 0, 0)])  # in the first partition, but the second is listed
            with pytest.raises(SchemaMismatchError):
                txn.handle.overwrite(spec.name, spec.arrow(rows), partitions=[{spec.pcol: spec.pvalues[1]}], key="k1")
            self.check_parts(txn)
            assert txn.handle.state == ACTIVE
        elif action.action != "stray overwrite" and self.ended():
            self.use_ended(self.ended()[action.txn % len(self.ended())], action.action)

    def use_ended(self, txn: MTxn, action: str) -> None:
        spec = SPECS[1]
        if action == "rollback" and txn.state == ROLLED_BACK:
            txn.handle.rollback()  # rolling back twice is a no-op
        else:
            with pytest.raises(TransactionClosedError):
                if action == "append":
                    txn.handle.append(spec.name, spec.arrow([(0, 0)]))
                elif action == "read":
                    txn.handle.read(spec.name)
                elif action == "commit":
                    txn.handle.commit()
                else:
                    txn.handle.rollback()
        assert txn.handle.state == txn.state


SETTINGS = settings(
    max_examples=EXAMPLES,
    stateful_step_count=STEPS,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


def machine_class(backend: str, request: pytest.FixtureRequest) -> type[TxnMachine]:
    catalogs: Catalogs = PgCatalogs(request.getfixturevalue("pg_url")) if backend == "postgres" else Catalogs()
    request.addfinalizer(catalogs.close)
    return type("TxnMachine" + backend.title(), (TxnMachine,), {"catalogs": catalogs})


@pytest.mark.parametrize("backend", BACKENDS)
def test_engine_matches_model(backend: str, request: pytest.FixtureRequest) -> None:
    """Half the random histories on PostgreSQL: each step there is a round trip to the server (1,300 per
    history: 10 s for 40 histories on SQLite, about 5 minutes on a loaded CI machine's PostgreSQL); the
    histories test the engine's rules, which both catalogs share, and every fixed history below runs on both."""
    STATS.clear()
    examples = EXAMPLES if backend == "sqlite" else max(1, EXAMPLES // 2)
    try:
        run_state_machine_as_test(machine_class(backend, request), settings=settings(SETTINGS, max_examples=examples))
    finally:
        print(f"\n{backend}: " + ", ".join(f"{k}: {v}" for k, v in sorted(STATS.items())))


# -- fixed histories ------------------------------------------------------------------------------------
# The same machine replaying chosen histories, so the paths a random run may miss are always taken
# (each checks, through the events, that the model really predicted what the history is about).
EVENTS, ACCOUNTS = SPECS
SEED = [[(1, 0, 5), (2, 1, 5)], [(1, 0, 10), (2, 0, 20)]]  # events: one row on each of two days; accounts


def bump(table: Spec, *ids: int, key: str | None = None) -> Stmt:
    return Stmt("update", table, key, ids=frozenset(ids))


def add(table: Spec, *raws: tuple[int, int, int], key: str | None = None) -> Stmt:
    return Stmt("append", table, key, rows=table.make_rows(raws))


SCENARIOS: dict[str, tuple[list[str], list[Any], str]] = {
    # name: (isolations of the open transactions, actions, the event the history must produce)
    "concurrent updates of one part: the second writer fails at once": (
        ["snapshot", "snapshot"],
        [Write(0, bump(ACCOUNTS, 1), "stay"), Write(1, bump(ACCOUNTS, 2), "stay"), End(1, "rollback", "snapshot"),
         Write(0, bump(ACCOUNTS, 2), "commit"), ReadCommitted(ACCOUNTS, None)],
        "update: write-write conflict",
    ),
    "a part removed by a later commit cannot be rewritten from an older snapshot": (
        ["snapshot", "snapshot"],
        [Write(0, Stmt("delete", ACCOUNTS, None, ids=frozenset({2})), "commit"), Write(0, bump(ACCOUNTS, 1), "stay"),
         End(0, "rollback", "snapshot"), ReadCommitted(ACCOUNTS, 0)],
        "update: write-write conflict",
    ),
    "updates of different days of a partitioned table do not conflict": (
        ["snapshot", "snapshot"],
        [Write(0, bump(EVENTS, 1), "stay"), Write(1, bump(EVENTS, 2), "commit"), End(0, "commit", "snapshot"),
         ReadCommitted(EVENTS, None)],
        "commit: snapshot, 1 table(s)",
    ),
    "serializable: a commit into a partition it read fails the commit": (
        ["serializable", "snapshot"],
        [ReadInTxn(0, EVENTS, (EVENTS.pvalues[0],), None, False), Write(1, add(EVENTS, (3, 0, 1)), "commit"),
         Write(0, add(ACCOUNTS, (3, 0, 1)), "commit"), ReadCommitted(ACCOUNTS, None)],
        "commit: serializable validation fails",
    ),
    "serializable: a commit into another partition does not": (
        ["serializable", "snapshot"],
        [ReadInTxn(0, EVENTS, (EVENTS.pvalues[0],), None, False), Write(1, add(EVENTS, (3, 2, 1)), "commit"),
         Write(0, add(ACCOUNTS, (3, 0, 1)), "commit")],
        "commit: serializable, 1 table(s)",
    ),
    "a retry under the same key replaces the first attempt, even in another table": (
        ["snapshot"],
        [Write(0, add(EVENTS, (3, 0, 1), key="k1"), "stay"), Write(0, add(ACCOUNTS, (3, 0, 1), key="k1"), "stay"),
         RetrySameKey(0, "commit", None), ReadCommitted(EVENTS, None)],
        "commit: snapshot, 1 table(s)",
    ),
    "retrying an update applies it once": (
        ["snapshot"],
        [Write(0, bump(ACCOUNTS, 1, key="k1"), "stay"), RetrySameKey(0, "stay", None),
         ReadInTxn(0, ACCOUNTS, None, None, True), End(0, "commit", "snapshot"), ReadCommitted(ACCOUNTS, None)],
        "retry with the same key",
    ),
    "a transaction whose only write was compensated commits read-only": (
        ["snapshot"],
        [Write(0, bump(ACCOUNTS, 1, key="k1"), "stay"),
         RetrySameKey(0, "commit", Stmt("delete", ACCOUNTS, None, ids=frozenset({3}))), ReadCommitted(ACCOUNTS, None)],
        "commit: read-only",
    ),
    "a statement rejected for a conflict does not compensate its key": (
        ["snapshot", "snapshot"],
        [Write(0, bump(ACCOUNTS, 1, key="k1"), "stay"), Write(1, add(EVENTS, (3, 0, 1), key="k1"), "stay"),
         Write(1, bump(ACCOUNTS, 2, key="k1"), "stay"), Write(0, bump(ACCOUNTS, 1), "commit")],
        "update: write-write conflict",
    ),
    "a retry withdraws a key that rewrote its output, and commit waits until that key ran again": (
        ["snapshot"],
        [Write(0, add(EVENTS, (3, 0, 1), key="k1"), "stay"), Write(0, bump(EVENTS, 3, key="k2"), "stay"),
         Write(0, add(EVENTS, (3, 0, 1), key="k1"), "commit"), Write(0, bump(EVENTS, 3, key="k2"), "commit"),
         ReadCommitted(EVENTS, None)],
        "commit: refused, keys must run again",
    ),
    "a retry that releases its removal locks withdraws a later scan that could not see those parts": (
        ["snapshot"],
        [Write(0, Stmt("overwrite", EVENTS, "k1", scope=(EVENTS.pvalues[0],)), "stay"),
         Write(0, Stmt("delete", EVENTS, "k2", ids=frozenset({1})), "stay"),
         Write(0, add(EVENTS, (5, 1, 1), key="k1"), "commit"),
         Write(0, Stmt("delete", EVENTS, "k2", ids=frozenset({1})), "commit"), ReadCommitted(EVENTS, None)],
        "append: retry invalidated 1 other key(s)",
    ),
    "a retry whose output a write with no key rewrote is refused and changes nothing": (
        ["snapshot"],
        [Write(0, add(EVENTS, (3, 0, 1), key="k1"), "stay"), Write(0, bump(EVENTS, 3), "stay"),
         Write(0, add(EVENTS, (4, 0, 1), key="k1"), "commit"), ReadCommitted(EVENTS, None)],
        "append: retry refused, a write with no key rewrote its output",
    ),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_fixed_history(name: str, backend: str, request: pytest.FixtureRequest) -> None:
    isolations, actions, expected = SCENARIOS[name]
    machine = machine_class(backend, request)()
    STATS.clear()
    try:
        machine.open_transactions(seed=SEED, isolations=isolations)
        for action in actions:
            machine.step(action)
    finally:
        machine.teardown()
    assert STATS[expected], f"the history did not produce {expected!r}: {dict(STATS)}"
