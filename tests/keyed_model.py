"""The model of keyed histories (invariant 7): whatever keys rewrote or read each other's output and were retried,
the commit (after every key it names ran again) equals running every key's latest statement again, from the
snapshot, in the order those statements last ran.

Used by tests/core/test_retry_dependencies.py (random histories through the core) and
tests/conformance/test_histories.py (the same kind of history, each statement through an engine path of its own).

A statement is an `Op` on a table: append, overwrite (a partition), delete, update (rows by id), or derive
(append, to its table, the rows the key just read of `source`, each id + 10: a keyed read feeding a write).
`Latest` keeps each key's latest statement and replays them from a starting state.
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

KINDS = ("append", "delete", "update", "overwrite", "derive")
DERIVED_OFFSET = 10


@dataclass(frozen=True)
class Op:
    kind: str  # one of KINDS
    ids: tuple[int, ...] = ()
    day: str = DAYS[0]
    source: str | None = None
    """The table a derive reads (through the key's own handle)."""

    def rows(self) -> list[Row]:
        """The rows an append or an overwrite stages."""
        return [(i, self.day, 1.0 if self.kind == "append" else 2.0) for i in self.ids]

    def run(self, t: Transaction, table: str, key: str) -> None:
        """Run it through the core with an explicit key (a derive: not here, it needs a keyed read)."""
        if self.kind == "append":
            t.append(table, rows_table(self.rows()), key=key)
        elif self.kind == "overwrite":
            t.overwrite(table, rows_table(self.rows()), partitions=[{"day": self.day}], key=key)
        elif self.kind == "update":
            t.update(table, pc.field("id").isin(list(self.ids)), {"value": pc.field("value") + 1}, key=key)
        elif self.kind == "delete":
            t.delete(table, pc.field("id").isin(list(self.ids)), key=key)
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
        return rows + derived(seen or [])

    def __str__(self) -> str:
        if self.kind == "derive":
            return f"derive from {self.source}"
        ids = ",".join(map(str, self.ids))
        return f"{self.kind} {self.day} ids={ids}" if self.kind in ("append", "overwrite") else f"{self.kind} ids={ids}"


def derived(seen: list[Row]) -> list[Row]:
    """What a derive appends for the rows it read."""
    return [(r[0] + DERIVED_OFFSET, r[1], r[2]) for r in seen]


def rows_table(rows: list[Row]) -> pa.Table:
    return pa.table({"id": [r[0] for r in rows], "day": [r[1] for r in rows], "value": [r[2] for r in rows]},
                    schema=EVENTS)


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
