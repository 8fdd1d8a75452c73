"""The randomized workload: `python -m tests.history.workload ROLE CATALOG ROOT HISTORY_FILE WORKER SEED STOP_FILE`.

A writer runs random transaction programs until STOP_FILE exists: appends to several tables at once,
read-modify-write updates and deletes (some serializable), partition rewrites, whole-table compaction,
MERGEs (upserts, guarded and additive updates, deletes, a sync deleting what the source lacks) of rows it saw and
of keys from a small pool every writer shares (so two merges may insert one key: one of them must fail),
withdrawals and deposits on two pairs of accounts (the write-skew pattern), read-only transactions,
table changes of hist.wide (issue 32: columns added, nullable or NOT NULL with a default, renamed, widened, made
nullable or not, dropped; now and then loaded in the same transaction) beside writers appending, updating and
deleting its rows with the columns they see, tables of recorder.NAMESPACE created, renamed and dropped (rows
loaded into them in the same transaction now and then), and a few voluntary rollbacks (more of the changes). A
reader reads every table at the latest readable CSN or at a random older one (hist.wide with the schema of that CSN;
the namespace's tables as `wh.tables(csn=)` lists them there). Both use
only the public API and record everything through tests/history/recorder.py;
an error outside recorder.EXPECTED_ERRORS (by family) is recorded as `error` and ends the worker with exit code 1.
"""

from __future__ import annotations

import random
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa

from airflow_txn import Warehouse
from airflow_txn.errors import TableExistsError, TableNotFoundError
from tests.history.recorder import (
    ACCOUNTS,
    CONSTRAINTS,
    EVENTS,
    GROUPS,
    ITEMS,
    NAMESPACE,
    TABLES,
    WIDE,
    RecordedTxn,
    Recorder,
    Row,
    cols_of,
    expected,
    extras,
    snapshot_read,
)

MERGE_WEIGHTS = {"upsert": 3.0, "add": 2.0, "guarded": 2.0, "delete": 1.0, "sync": 0.3}
"""How often a merge of hist.items is each of recorder.MERGES (hist.events: all but sync, which would empty
every other group)."""
POOL = 6
"""Keys every writer's merges draw from (per group of hist.events): concurrent merges insert the same key."""

ITEMS_LOW, ITEMS_HIGH = 12, 40  # keep hist.items small: reads stay cheap, conflicts stay likely
GROUP_KEEP = 6  # a partition rewrite keeps at most this many rows of its group
WIDE_LOW, WIDE_HIGH = 6, 30  # keep hist.wide small too
MAX_EXTRAS = 4  # hist.wide's columns beyond (rid, tok, val, grp), at most
CHANGE_ROLLBACK = 0.15  # how often a transaction that changed hist.wide rolls back by choice


class Writer:
    def __init__(self, wh: Warehouse, rec: Recorder, worker: str, rng: random.Random) -> None:
        self.wh, self.rec, self.worker, self.rng = wh, rec, worker, rng
        self.count = 0
        self.columns = 0

    def column_name(self) -> str:
        """A column name no writer used before (a replacement worker has a new name)."""
        self.columns += 1
        return f"x{self.worker.lower()}_{self.columns}"

    def token(self) -> str:
        self.count += 1
        return f"{self.worker}.{self.count}"

    def new_rows(self, tx: RecordedTxn, n: int, grp: str) -> list[Row]:
        """Rows with ids never used before: the transaction's token and a counter."""
        return [[tx.new_rid(), tx.tok, self.rng.randint(0, 1000), grp] for _ in range(n)]

    def pause(self) -> None:
        """Sometimes wait a little between statements, so transactions overlap more."""
        if self.rng.random() < 0.3:
            time.sleep(self.rng.uniform(0.0, 0.05))

    def run_one(self) -> None:
        programs: list[tuple[float, Callable[[RecordedTxn], None], str | None]] = [
            (3, self.append_many, None),
            (3, self.modify_items, None),
            (2, self.rewrite_group, None),
            (0.5, self.compact_items, None),
            (1.5, self.merge_items, None),
            (1.5, self.merge_group, None),
            (2, self.move_money, "serializable"),
            (2, self.move_money, "snapshot"),
            (1, self.read_only, None),
            (1.5, self.write_wide, "snapshot"),
            (0.8, self.change_wide, "snapshot"),
            (1.2, self.change_tables, "snapshot"),
        ]
        weights = [w for w, _, _ in programs]
        _, program, isolation = self.rng.choices(programs, weights=weights)[0]
        if isolation is None:
            isolation = "serializable" if self.rng.random() < 0.3 else "snapshot"
        tx = RecordedTxn(self.rec, self.wh, self.token(), isolation)
        try:
            program(tx)
        except Exception as exc:
            # a name a concurrent commit took, or a table it renamed or dropped: found as the change is staged
            named = program == self.change_tables and isinstance(exc, (TableExistsError, TableNotFoundError))
            if not expected(exc) and not named:
                raise
            tx.abort(exc)
            return
        if self.rng.random() < (CHANGE_ROLLBACK if program in (self.change_wide, self.change_tables) else 0.05):
            tx.abort()  # a voluntary rollback: none of it may ever be seen
        else:
            tx.commit()

    # -- programs ---------------------------------------------------------------------------------
    def append_many(self, tx: RecordedTxn) -> None:
        """New rows in one, two or three tables at once (atomic visibility across tables)."""
        tables = self.rng.sample([ITEMS, EVENTS, EVENTS], k=self.rng.randint(1, 3))
        for table in tables:
            grp = self.rng.choice(GROUPS) if table == EVENTS else ""
            tx.append(table, self.new_rows(tx, self.rng.randint(1, 3), grp))
            self.pause()

    def modify_items(self, tx: RecordedTxn) -> None:
        """Read hist.items, then update or delete rows it saw, and log the change in hist.events."""
        rows = tx.read(ITEMS)
        if len(rows) < ITEMS_LOW:
            tx.append(ITEMS, self.new_rows(tx, 3, ""))
            return
        picked = self.rng.sample(rows, k=min(len(rows), self.rng.randint(1, 2)))
        self.pause()
        if len(rows) > ITEMS_HIGH or self.rng.random() < 0.3:
            tx.delete(ITEMS, [r[0] for r in picked])
        else:
            for rid, _tok, val, _grp in picked:
                tx.update(ITEMS, rid, val + 1)
        self.pause()
        tx.append(EVENTS, self.new_rows(tx, 1, self.rng.choice(GROUPS)))

    def rewrite_group(self, tx: RecordedTxn) -> None:
        """Overwrite one partition of hist.events with some of its rows plus a new one."""
        grp = self.rng.choice(GROUPS)
        rows = tx.read(EVENTS, grp=grp)
        kept = sorted(self.rng.sample(rows, k=min(len(rows), GROUP_KEEP - 1)))
        self.pause()
        tx.overwrite(EVENTS, kept + self.new_rows(tx, 1, grp), grp=grp)

    def compact_items(self, tx: RecordedTxn) -> None:
        """Rewrite the whole of hist.items as one part holding the same rows."""
        rows = tx.read(ITEMS)
        self.pause()
        tx.overwrite(ITEMS, rows)

    def merge_items(self, tx: RecordedTxn) -> None:
        """MERGE into hist.items by rid: keys of the pool, and (after a read) rows it saw and a new row; a sync's
        source is what it read, changed, so it deletes the rest."""
        clause = self.rng.choices(list(MERGE_WEIGHTS), weights=list(MERGE_WEIGHTS.values()))[0]
        keys = {f"pool.{n}" for n in self.rng.sample(range(POOL), k=self.rng.randint(0, 2))}
        if clause == "sync" or self.rng.random() < 0.5:
            seen = [r[0] for r in tx.read(ITEMS)]
            keep = seen if clause == "sync" else []
            keys |= set(keep[: max(0, len(keep) - 2)]) | set(self.rng.sample(seen, k=min(len(seen), 2)))
            keys.add(tx.new_rid())
        if not keys:
            keys.add(tx.new_rid())
        self.pause()
        tx.merge(ITEMS, [[rid, tx.tok, self.rng.randint(0, 1000), ""] for rid in sorted(keys)], ["rid"], clause)

    def merge_group(self, tx: RecordedTxn) -> None:
        """MERGE into one or two groups of hist.events by (rid, grp), blind: keys of the groups' pools and a new
        row; only the parts of those groups are candidates, and only a commit into them can refuse it."""
        clause = self.rng.choices(list(MERGE_WEIGHTS)[:-1], weights=list(MERGE_WEIGHTS.values())[:-1])[0]
        source = []
        for grp in self.rng.sample(GROUPS, k=self.rng.randint(1, 2)):
            for n in self.rng.sample(range(POOL), k=self.rng.randint(1, 3)):
                source.append([f"pool.{grp}.{n}", tx.tok, self.rng.randint(0, 1000), grp])
            if self.rng.random() < 0.5:
                source.append([tx.new_rid(), tx.tok, self.rng.randint(0, 1000), grp])
        tx.merge(EVENTS, source, ["rid", "grp"], clause)

    def move_money(self, tx: RecordedTxn) -> None:
        """Withdraw from one account of a pair if the pair's sum stays >= 0, or deposit into it."""
        pair = next(c for c in CONSTRAINTS if c["isolation"] == self.current_isolation(tx))["rids"]
        balances = {r[0]: r[2] for r in tx.read(ACCOUNTS)}
        total = sum(balances[rid] for rid in pair)
        rid = self.rng.choice(pair)
        self.pause()
        if total > 0 and self.rng.random() < 0.7:
            tx.update(ACCOUNTS, rid, balances[rid] - self.rng.randint(1, total))
        else:
            tx.update(ACCOUNTS, rid, balances[rid] + self.rng.randint(1, 60))

    def wide_rows(self, tx: RecordedTxn, n: int, schema: pa.Schema) -> list[Row]:
        """New rows of hist.wide with a value for each extra column of `schema` (null now and then where allowed)."""
        cols = extras(cols_of(schema))
        return [[tx.new_rid(), tx.tok, self.rng.randint(0, 1000), self.rng.choice(GROUPS),
                 {c[0]: None if c[3] and self.rng.random() < 0.2 else self.rng.randint(-99, 99) for c in cols}]
                for _ in range(n)]

    def write_wide(self, tx: RecordedTxn) -> None:
        """Append rows of hist.wide with the columns this transaction sees; or read it and update or delete a row
        (a rewrite under the version it sees: a default it read is written as a value)."""
        schema = tx.schema(WIDE)
        if self.rng.random() < 0.6:
            tx.append(WIDE, self.wide_rows(tx, self.rng.randint(1, 3), schema), schema)
            return
        rows = tx.read(WIDE)
        self.pause()
        if len(rows) < WIDE_LOW:
            tx.append(WIDE, self.wide_rows(tx, 2, schema), schema)
        elif len(rows) > WIDE_HIGH or self.rng.random() < 0.3:
            tx.delete(WIDE, [self.rng.choice(rows)[0]])
        else:
            row = self.rng.choice(rows)
            tx.update(WIDE, row[0], row[2] + 1)

    def change_wide(self, tx: RecordedTxn) -> None:
        """One or two changes of hist.wide's extra columns, chosen from the schema this transaction sees; now and
        then rows loaded under the new schema in the same transaction."""
        schema = tx.schema(WIDE)
        for _ in range(self.rng.randint(1, 2)):
            schema = self.one_change(tx, schema)
            self.pause()
        if self.rng.random() < 0.4:
            tx.append(WIDE, self.wide_rows(tx, self.rng.randint(1, 2), schema), schema)

    def one_change(self, tx: RecordedTxn, schema: pa.Schema) -> pa.Schema:
        """A change of hist.wide's extra columns that `schema` (what the transaction sees) allows; the schema after."""
        cols = extras(cols_of(schema))
        if not cols:
            return self.add_extra(tx)
        col = self.rng.choice(cols)
        narrow = [c for c in cols if c[2] == "int32"]
        name = self.column_name()
        what = self.rng.choice(["add"] * 3 * (len(cols) < MAX_EXTRAS) + ["rename", "drop", "nullable"]
                               + ["widen"] * bool(narrow))
        if what == "add":
            return self.add_extra(tx)
        if what == "rename":
            return tx.rename_column(WIDE, col[1], name)
        if what == "drop":
            return tx.drop_column(WIDE, col[1])
        if what == "widen":
            return tx.alter_column(WIDE, self.rng.choice(narrow)[1], pa.int64())
        if not col[3]:
            return tx.set_nullable(WIDE, col[1], True)
        if all(r[4].get(col[0]) is not None for r in tx.read(WIDE)):  # forbid nulls only where it sees none
            return tx.set_nullable(WIDE, col[1], False)
        return schema

    def compatible_change(self, tx: RecordedTxn) -> pa.Schema:
        """A change of hist.wide that keeps concurrent appends (the driver runs one now and then, so every history
        commits some): add a column while there is room, else widen one, else allow nulls in one, else drop one."""
        schema = tx.schema(WIDE)
        cols = extras(cols_of(schema))
        narrow = [c for c in cols if c[2] == "int32"]
        not_null = [c for c in cols if not c[3]]
        if len(cols) < MAX_EXTRAS:
            return self.add_extra(tx)
        if narrow:
            return tx.alter_column(WIDE, self.rng.choice(narrow)[1], pa.int64())
        if not_null:
            return tx.set_nullable(WIDE, self.rng.choice(not_null)[1], True)
        return tx.drop_column(WIDE, self.rng.choice(cols)[1])

    def add_extra(self, tx: RecordedTxn) -> pa.Schema:
        """Add an int32 column: nullable (with or without a default) or NOT NULL with a default."""
        nullable = self.rng.random() < 0.6
        default = None if nullable and self.rng.random() < 0.5 else self.rng.randint(-9, 9)
        name = self.column_name()
        return tx.add_column(WIDE, name, pa.int32(), nullable, default)

    def change_tables(self, tx: RecordedTxn) -> None:
        """Create, rename or drop a table of NAMESPACE (the names it has at this transaction's snapshot), with rows
        appended to the table created or renamed in the same transaction now and then; or append to one."""
        seen = [n for n in self.wh.tables(csn=tx.t.snapshot_csn) if n in NAMESPACE]
        free = [n for n in NAMESPACE if n not in seen]
        what = self.rng.choice(["create"] * bool(free) * 2 + ["rename"] * bool(free and seen)
                               + ["drop", "append"] * bool(seen))
        if what == "create":
            name = self.rng.choice(free)
            tx.create_table(name)
        elif what == "rename":
            old, name = self.rng.choice(seen), self.rng.choice(free)
            tx.rename_table(old, name)
        elif what == "drop":
            tx.drop_table(self.rng.choice(seen))
            return
        else:
            name = self.rng.choice(seen)
        self.pause()
        if what == "append" or self.rng.random() < 0.6:
            tx.append(name, self.new_rows(tx, self.rng.randint(1, 2), ""))

    @staticmethod
    def current_isolation(tx: RecordedTxn) -> str:
        return tx.t.isolation

    def read_only(self, tx: RecordedTxn) -> None:
        for table in self.rng.sample(TABLES, k=2):
            tx.read(table)


def reader(wh: Warehouse, rec: Recorder, rng: random.Random, stop: Path) -> None:
    """Read every table at one snapshot (the latest, or a random older one), again and again."""
    while not stop.exists():
        t0 = time.monotonic()
        latest = wh.readable_csn()
        how, csn = ("latest", latest) if rng.random() < 0.5 else ("random", rng.randint(1, latest))
        rec.emit("snapread", how=how, csn=csn, latest=latest, t0=t0, **snapshot_read(wh, csn))
        time.sleep(rng.uniform(0.02, 0.1))


def main(argv: list[str]) -> int:
    role, catalog, root, history, worker, seed, stop_file = argv
    rec = Recorder(Path(history), worker)
    rng = random.Random(f"{seed}/{worker}")
    stop = Path(stop_file)
    wh = Warehouse.open(catalog=catalog, root=root)
    rec.emit("start", role=role, seed=seed)
    try:
        if role == "writer":
            writer = Writer(wh, rec, worker, rng)
            while not stop.exists():
                writer.run_one()
        elif role == "reader":
            reader(wh, rec, rng, stop)
        else:
            raise SystemExit(f"unknown role {role!r}")
    except Exception as exc:
        rec.emit("error", err=type(exc).__name__, msg=str(exc)[:500], trace=traceback.format_exc()[-2000:])
        return 1
    finally:
        wh.close()
    rec.emit("done")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
