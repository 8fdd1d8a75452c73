"""The core hooks the Spark layer runs on, gathered in one place.

A Spark statement follows the core's statement rules (its key and attempt, the failure rules of
`Transaction._run`, the isolation level's read set) without copying them, so it calls the handle's own
helpers. They are internal to airflow_txn; this module is the only place outside the core that uses
them, so a change to them has one place to follow.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from airflow_txn.catalog import table_registry, txn_records
from airflow_txn.catalog.compaction_records import MergedAwayError
from airflow_txn.catalog.part_records import PartRow
from airflow_txn.catalog.table_registry import TableInfo
from airflow_txn.core.runtime import Runtime
from airflow_txn.core.staging import Statement
from airflow_txn.core.transaction import Transaction
from airflow_txn.core.warehouse import Warehouse
from airflow_txn.errors import SerializationError

T = TypeVar("T")


def runtime(txn: Transaction) -> Runtime:
    return txn.warehouse.runtime


def statement(txn: Transaction, key: str | None) -> Statement:
    """Who writes: the transaction, its snapshot, and the key (the handle's default key and attempt
    when `key` is None, as for the core's own writes)."""
    return txn._statement(key)


def guarded(txn: Transaction, what: str, fn: Callable[[], T]) -> T:
    """Run `fn` as a statement step: a conflict or a catalog failure marks the transaction failed,
    an expired lease rolls it back, a rejected input leaves it usable (as for the core's writes)."""
    return txn._run(what, fn)


class _MergedAway:
    """What `guarded_choice` returns from inside `guarded` instead of raising, so the transaction stays usable."""

    def __init__(self, error: MergedAwayError) -> None:
        self.error = error


def guarded_choice(txn: Transaction, what: str, fn: Callable[[], T]) -> T:
    """`guarded`, except that a MergedAwayError (a background merge combined parts the statement chose
    with others, compaction.py) leaves the transaction usable: it is raised to the caller, which
    chooses its parts again. A merge never makes a user transaction fail."""

    def attempt() -> T | _MergedAway:
        try:
            return fn()
        except MergedAwayError as exc:
            return _MergedAway(exc)

    outcome = guarded(txn, what, attempt)
    if isinstance(outcome, _MergedAway):
        raise outcome.error
    return outcome


def record_read_set(txn: Transaction, info: TableInfo, partition_keys: Sequence[str] | None) -> None:
    """Isolation: what a read or a statement scanned (the listed partitions, else the whole table),
    recorded as the transaction's level asks (serializable checks it at commit; isolation.py)."""
    txn._record_read_set(info.id, partition_keys)


def note_read(txn: Transaction, info: TableInfo, partition_keys: Sequence[str] | None) -> None:
    """A read through a handle with a default key (an Airflow task's): recorded, so a retry that
    withdraws what it saw withdraws the reader's work too."""
    txn._note_read(info.id, partition_keys)


def snapshot_for(wh: Warehouse, csn: int | None, tables: Sequence[str]) -> int:
    """The snapshot a read of `tables` at `csn` uses (None: the watermark); refuses CSNs not readable
    yet and CSNs below the retention horizon of one of `tables` (each table's own, retention.py)."""
    return wh._snapshot_for(csn, tables)


def table_for_read(rt: Runtime, table: str, txn: Transaction | None) -> TableInfo:
    with rt.catalog.read() as conn:
        if txn is not None:
            txn_records.require_usable(txn_records.fetch(conn, txn.tid))
        return table_registry.get(conn, table)


def partition_keys(info: TableInfo, partitions: Sequence[Mapping[str, Any]] | None) -> list[str] | None:
    return info.partition_keys(partitions)


def check_unlocked(stmt: Statement, victims: Sequence[PartRow]) -> None:
    """Fail before the Spark job when another transaction already holds a part this write replaces
    (registration would fail on the same lock anyway, after the whole job had run)."""
    for part in victims:
        holder = part.version.removal_tid
        if holder is not None and holder != stmt.tid:
            raise SerializationError(
                f"part {part.id} is being replaced or was removed by transaction {holder}; "
                f"transaction {stmt.tid} conflicts and can only roll back"
            )
