"""The model of keyed histories (invariant 7): whatever keys rewrote or read each other's output and were retried,
the commit (after every key it names ran again) equals running every key's latest statement again, from the
snapshot, in the order those statements last ran.

Used by tests/core/test_retry_dependencies.py (random histories through the core) and
tests/conformance/test_histories.py (the same kind of history, each statement through an engine path of its own).

A statement is an `Op` on a table: append, overwrite (a partition), delete, update (rows by id), merge (a source of
rows (id, day, MERGE_VALUE) by the key (id, day), with one of the clauses of MERGES), or derive (append, to its
table, the rows the key just read of `source`, each id + 10: a keyed read feeding a write), or add_column (a table
change, issue 32: a nullable int64 column named by the key and its first id, `Op.column`; rows keep (id, day, value)
and the data statements fill the columns the table has beyond those with nulls, so a key's change and the writes
built on it are retried as the key's statements are: `Latest.columns`). `Latest` keeps each
key's latest statement and replays them from a starting state. A new kind of statement is a kind here with how it
runs through the core (`Op.run`) and what it does to a table's rows (`Op.apply`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Collection
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from airflow_txn import Transaction
from airflow_txn.errors import InvalidatedKeysError
from tests.helpers import EVENTS

DAYS = ("2024-01-01", "2024-01-02")
Row = tuple[int, str, float]
State = dict[str, list[Row]]
"""A table's rows by table name."""

KINDS = ("append", "delete", "update", "overwrite", "merge", "derive", "add_column")
DERIVED_OFFSET = 10
MERGE_ON = ["id", "day"]
MERGE_VALUE = 5.0
"""The value of a merge's source rows."""
MERGES: dict[str, dict[str, object]] = {
    "upsert": {},
    "add": {"when_matched": {"value": pc.field("value") + pc.field("source", "value")}, "when_not_matched": "ignore"},
    "guarded": {"when_matched": {"value": pc.if_else(pc.field("value") < 2.0, pc.field("source", "value"),
                                                     pc.field("value"))}},
    "delete": {"when_matched": "delete", "when_not_matched": "ignore"},
    "sync": {"when_not_matched_by_source": "delete"},
}
"""A merge's clauses by name (Transaction.merge's keyword arguments): update all and insert; add the source's value
to the matched rows' (no insert); an expression-guarded update (the source's value where the target's is below 2)
and insert; delete the matched rows; update, insert and delete every row the source lacks (the whole table)."""


@dataclass(frozen=True)
class Op:
    kind: str  # one of KINDS
    ids: tuple[int, ...] = ()
    day: str = DAYS[0]
    source: str | None = None
    """The table a derive reads (through the key's own handle)."""
    clause: str = "upsert"
    """A merge's clauses: a name in MERGES."""

    def rows(self) -> list[Row]:
        """The rows an append or an overwrite stages; a merge's source."""
        if self.kind == "merge":  # a source holds a key once
            return [(i, self.day, MERGE_VALUE) for i in sorted(set(self.ids))]
        return [(i, self.day, 1.0 if self.kind == "append" else 2.0) for i in self.ids]

    def column(self, key: str) -> str:
        """The column an add_column by `key` adds."""
        return f"{key.lower()}_{self.ids[0] if self.ids else 0}"

    def run(self, t: Transaction, table: str, key: str) -> None:
        """Run it through the core with an explicit key (a derive: not here, it needs a keyed read). Data carries the
        table's columns beyond (id, day, value), as the transaction sees them, as nulls."""
        if self.kind == "add_column":
            t.add_column(table, pa.field(self.column(key), pa.int64()), key=key)
        elif self.kind == "append":
            t.append(table, rows_table(self.rows(), t.schema(table)), key=key)
        elif self.kind == "overwrite":
            t.overwrite(table, rows_table(self.rows(), t.schema(table)), partitions=[{"day": self.day}], key=key)
        elif self.kind == "update":
            t.update(table, pc.field("id").isin(list(self.ids)), {"value": pc.field("value") + 1}, key=key)
        elif self.kind == "delete":
            t.delete(table, pc.field("id").isin(list(self.ids)), key=key)
        elif self.kind == "merge":
            t.merge(table, rows_table(self.rows(), t.schema(table)), MERGE_ON, key=key,
                    **self.merge_clauses())  # type: ignore[arg-type]
        else:
            raise ValueError(f"a {self.kind} runs through a keyed handle (tests/conformance/test_histories.py)")

    def apply(self, rows: list[Row], seen: list[Row] | None = None) -> list[Row]:
        """`rows` after the statement (a derive: `seen` is what it read of its source)."""
        if self.kind == "append":
            return rows + self.rows()
        if self.kind == "overwrite":
            return [r for r in rows if r[1] != self.day] + self.rows()
        if self.kind == "update":
            return [(r[0], r[1], r[2] + 1) if r[0] in self.ids else r for r in rows]
        if self.kind == "delete":
            return [r for r in rows if r[0] not in self.ids]
        if self.kind == "merge":
            return self._merged(rows)
        if self.kind == "add_column":
            return rows
        return rows + derived(seen or [])

    def merge_clauses(self) -> dict[str, object]:
        """Transaction.merge's keyword arguments for the merge's clause."""
        return MERGES[self.clause]

    def _merged(self, rows: list[Row]) -> list[Row]:
        """`rows` after the merge: a row whose (id, day) the source holds is matched (every such row: the table may
        hold a key twice, the source never does)."""
        keys = {(i, self.day) for i in self.ids}
        out: list[Row] = []
        matched = set()
        for row in rows:
            key = (row[0], row[1])
            if key not in keys:
                if self.clause != "sync":
                    out.append(row)
                continue
            matched.add(key)
            if self.clause == "delete":
                continue
            value = {"add": row[2] + MERGE_VALUE, "guarded": MERGE_VALUE if row[2] < 2.0 else row[2]}.get(
                self.clause, MERGE_VALUE)
            out.append((row[0], row[1], value))
        if self.clause in ("upsert", "guarded", "sync"):
            out += [(i, day, MERGE_VALUE) for i, day in sorted(keys - matched)]
        return out

    def __str__(self) -> str:
        if self.kind == "derive":
            return f"derive from {self.source}"
        if self.kind == "add_column":
            return f"add_column ids={self.ids}"
        ids = ",".join(map(str, self.ids))
        if self.kind == "merge":
            return f"merge ({self.clause}) {self.day} ids={ids}"
        return f"{self.kind} {self.day} ids={ids}" if self.kind in ("append", "overwrite") else f"{self.kind} ids={ids}"


def derived(seen: list[Row]) -> list[Row]:
    """What a derive appends for the rows it read."""
    return [(r[0] + DERIVED_OFFSET, r[1], r[2]) for r in seen]


def rows_table(rows: list[Row], schema: pa.Schema | None = None) -> pa.Table:
    """The rows as a table of EVENTS, with `schema`'s further columns (added by add_column) as nulls."""
    data = pa.table({"id": [r[0] for r in rows], "day": [r[1] for r in rows], "value": [r[2] for r in rows]},
                    schema=EVENTS)
    for field in [] if schema is None else list(schema)[len(EVENTS):]:
        data = data.append_column(field.remove_metadata(), pa.nulls(len(rows), field.type))
    return data


def sorted_rows(table: pa.Table) -> list[Row]:
    return sorted((r["id"], r["day"], float(r["value"])) for r in table.to_pylist())


@dataclass(frozen=True)
class Ran:
    order: int
    table: str
    op: Op
    seen: list[Row] | None
    """What a derive read of its source when it ran."""


class Latest:
    """Every key's latest statement, in the order they last ran."""

    def __init__(self) -> None:
        self.of: dict[str, Ran] = {}
        self._order = itertools.count()

    def ran(self, key: str, table: str, op: Op, seen: list[Row] | None = None) -> None:
        self.of[key] = Ran(next(self._order), table, op, None if seen is None else sorted(seen))

    def replay(self, start: State, keys: Collection[str] | None = None, as_staged: bool = False) -> State:
        """`start` after the latest statements of `keys` (None: all), re-run in the order they last ran. A derive
        appends what it would read then, or (`as_staged`) what it read when it ran: the transaction's view."""
        state = {table: list(rows) for table, rows in start.items()}
        for key, ran in sorted(self.of.items(), key=lambda item: item[1].order):
            if keys is None or key in keys:
                seen = None if ran.op.source is None else (ran.seen if as_staged else state[ran.op.source])
                state[ran.table] = sorted(ran.op.apply(state[ran.table], seen))
        return state

    def columns(self, table: str) -> list[str]:
        """`table`'s columns after every key's latest statement: EVENTS's, then each column the latest statement of
        a key added, in the order they last ran (a retried change replaces its earlier attempt's)."""
        ran = sorted((item for item in self.of.items() if item[1].table == table), key=lambda item: item[1].order)
        return [*EVENTS.names, *(r.op.column(key) for key, r in ran if r.op.kind == "add_column")]

    def stale_readers(self, start: State) -> list[str]:
        """The derive keys whose read differs from what re-running every latest statement from `start` reads at
        their turn: a commit keeping their work as it is would be wrong, it must refuse them."""
        state = {table: list(rows) for table, rows in start.items()}
        stale = []
        for key, ran in sorted(self.of.items(), key=lambda item: item[1].order):
            if ran.op.source is not None and sorted(state[ran.op.source]) != ran.seen:
                stale.append(key)
            seen = None if ran.op.source is None else state[ran.op.source]
            state[ran.table] = sorted(ran.op.apply(state[ran.table], seen))
        return sorted(stale)


def commit_running_again(t: Transaction, latest: Latest, run_again: Callable[[str], None],
                         refused: Callable[[InvalidatedKeysError], None] = lambda _: None) -> int:
    """Commit; on InvalidatedKeysError run again each key it names (as a user clearing those tasks would), then
    commit again, at most once per key and once more. `refused` sees each refusal first. The commits tried."""
    for tries in range(1, len(latest.of) + 2):
        try:
            t.commit()
            return tries
        except InvalidatedKeysError as refusal:
            assert set(refusal.keys) <= set(latest.of) and t.state == "active"
            refused(refusal)
            for key in refusal.keys:
                run_again(key)
    raise AssertionError(f"the commit was still refused after {len(latest.of) + 1} tries")
