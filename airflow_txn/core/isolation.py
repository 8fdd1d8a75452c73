"""The isolation levels: the one place that says what a level records on a read and checks at commit.

A level is a member of `Isolation`, a string enum (an option of model/options.py): its value is what
`Warehouse.begin(isolation=...)` takes and what the catalog's `txn_transactions.isolation` column holds.
Everything a level changes goes through its methods here:

- `read_set(keys)`: what a read, or a statement that scans before it replaces (overwrite, update,
  delete), adds to the transaction's read set (`txn_read_set` rows): serializable records the
  listed partitions, else the whole table; snapshot records nothing.
- `validate(conn, tid, snapshot)`: what commit checks inside its catalog transaction (and, with an
  external log, against a quiet log version): serializable aborts with SerializationError when a
  transaction that committed after the snapshot wrote a partition it read.

Adding a level is one edit here: a member and its row in `_RULES` (docs/ARCHITECTURE.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import Connection

from airflow_txn.catalog import commit_log, part_records, read_sets, table_registry
from airflow_txn.errors import SerializationError
from airflow_txn.model.options import Option
from airflow_txn.model.partitioning import WHOLE_TABLE

ReadSet = dict[int, set[str]]
"""{table id: partition keys} a transaction read (read_sets.reads)."""


class Isolation(Option):
    """How a transaction is isolated from concurrent ones; compares equal to its string value. User input
    becomes a level through `Isolation.parse(value, "isolation")` (model/options.py; IsolationName its Literal)."""

    SNAPSHOT = "snapshot"
    """Snapshot isolation, first writer wins per part: no dirty or lost writes, no read skew; write skew passes."""
    SERIALIZABLE = "serializable"
    """Snapshot isolation plus a read-set check at commit: write skew aborts with SerializationError."""

    @property
    def tracks_reads(self) -> bool:
        """Whether reads and scans are recorded and checked at commit (else both are no-ops)."""
        return _RULES[self].tracks_reads

    def read_set(self, keys: Sequence[str] | None) -> list[str]:
        """The partition keys a read or scan of one table adds to the read set (`keys` None: the
        statement saw the whole table); empty when this level records nothing."""
        if not self.tracks_reads:
            return []
        return list(dict.fromkeys(keys or [WHOLE_TABLE]))

    def validates(self, conn: Connection, tid: str) -> bool:
        """Whether commit has anything to validate for `tid`: a level tracking reads always; another only when a
        statement asked to be validated whatever the level (its read-set rows: a MERGE that inserts)."""
        return self.tracks_reads or read_sets.has_reads(conn, tid)

    def validate(self, conn: Connection, tid: str, snapshot: int, reads: ReadSet | None = None) -> None:
        """At commit: raise SerializationError if this level forbids what committed since `snapshot`: a later
        commit wrote something in the read set. A level that tracks no reads has read-set rows only where a
        statement asks to be validated whatever the level (a MERGE that inserts: staging.merge), so its check is
        one lookup that finds nothing for every other transaction. `reads`: the read set (read_sets.reads), when
        the caller read it already: a commit does before the CSN counter's lock, since reads register under the row
        lock its commit holds; an empty one checks nothing."""
        _validate_read_set(conn, self, tid, snapshot, read_sets.reads(conn, tid) if reads is None else reads)


@dataclass(frozen=True)
class _Rules:
    """What one level does; every member of Isolation has a row in _RULES."""

    tracks_reads: bool
    """Reads and scans go into the read set, and commit aborts when a later commit wrote any of it."""


_RULES = {
    Isolation.SNAPSHOT: _Rules(tracks_reads=False),
    Isolation.SERIALIZABLE: _Rules(tracks_reads=True),
}


def _validate_read_set(conn: Connection, level: Isolation, tid: str, snapshot: int, reads: ReadSet) -> None:
    """Abort if a transaction committed after our snapshot wrote anything we read."""
    if not reads:
        return
    for table_id, other in commit_log.commits_after(conn, list(reads), snapshot):
        if other == tid:
            continue
        keys = reads[table_id]
        if WHOLE_TABLE in keys or keys & part_records.written_partitions(conn, other, table_id):
            name = table_registry.by_id(conn, table_id).name
            what = f"{level} transaction {tid} read" if level.tracks_reads else f"transaction {tid} merged into"
            raise SerializationError(
                f"{what} {name}, which transaction {other} changed after snapshot {snapshot}; retry the transaction"
            )
