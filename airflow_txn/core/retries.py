"""Keyed retries (invariant 7 in docs/DESIGN.md): fencing stale attempts, and withdrawing a key's earlier
work together with the work of every key that built on it.

Other statements of the same transaction may have built on a key's earlier work: rewritten its output
(a delete, update or overwrite took the removal lock on a part the key staged and staged a copy: left
alone, the copy would duplicate rows), scanned while the key's own locks hid parts (a later delete,
update or overwrite never saw them: once they are visible again they would escape it), or read its
output through a keyed handle. So a withdrawal also withdraws every such dependent key, transitively,
and marks it invalidated: its attempt current then may not go on, and commit refuses
(InvalidatedKeysError) until it has run again. A dependent write with no key could never run again, so
a withdrawal it would need is refused (RetryConflictError). Statement order and scans come from
txn_scans (key_records.py). Every function here runs inside the caller's catalog transaction, which
holds the transaction's row lock.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection

from airflow_txn.catalog import key_records, part_records, table_versions
from airflow_txn.catalog.part_records import Withdrawn
from airflow_txn.errors import InvalidatedKeysError, RetryConflictError, StaleAttemptError


def fence(conn: Connection, tid: str, key: str, attempt: int | None) -> None:
    """Refuse `attempt` of `key` when a newer attempt has started, or when a retry of another key
    invalidated it; record it as started otherwise (it fences older attempts from now on)."""
    if attempt is None:
        return
    known = key_records.fetch(conn, tid, key)
    if known is not None and known.attempt is not None and known.attempt > attempt:
        raise StaleAttemptError(
            f"attempt {attempt} of {key!r} in transaction {tid} is stale: attempt {known.attempt} has started "
            "since; this attempt's write is refused"
        )
    if known is not None and known.invalidated_by is not None and known.invalidated_attempt is not None \
            and attempt <= known.invalidated_attempt:
        raise StaleAttemptError(
            f"attempt {attempt} of {key!r} in transaction {tid} was invalidated by a retry of "
            f"{known.invalidated_by!r}, which withdrew the output it had built on: run it again as a new attempt"
        )
    key_records.start_attempt(conn, tid, key, attempt, known)


def dependents(conn: Connection, tid: str, key: str, attempt: int | None) -> frozenset[str]:
    """The keys whose work built on what `key` staged before `attempt`, transitively (never `key` itself);
    RetryConflictError if a write with no key is among them."""
    if not _staged_before(conn, tid, key, attempt):
        return frozenset()
    return _dependents(conn, tid, key, attempt)


def _dependents(conn: Connection, tid: str, key: str, attempt: int | None) -> frozenset[str]:
    """`dependents` for a key that staged something before `attempt` (already looked up)."""
    found: set[str] = set()
    frontier: list[tuple[str, int | None]] = [(key, attempt)]
    while frontier:
        source, before = frontier.pop()
        for consumer in _built_on(conn, tid, source, before):
            if consumer is None:
                raise RetryConflictError(
                    f"the earlier output of {key!r} in transaction {tid} was rewritten by a write with no key, "
                    "which cannot run again: this retry is refused (nothing changed); roll the transaction back "
                    "and run it again, or give every write of the transaction a key"
                )
            if consumer != key and consumer not in found:
                found.add(consumer)
                frontier.append((consumer, None))
    return frozenset(found)


def _staged_before(conn: Connection, tid: str, key: str, attempt: int | None) -> bool:
    """Whether `key` left anything in `tid` before `attempt`: without it, nothing can have built on its work."""
    return key_records.staged_before(conn, tid, key, attempt, table_versions.present(conn))


def _built_on(conn: Connection, tid: str, source: str, before: int | None) -> set[str | None]:
    """Keys whose statements built on what `source` did before attempt `before`: they rewrote a part it
    staged, read a partition it staged into, or scanned a partition where it holds removal locks, after
    its first statement there, or wrote under (or changed again) a version of a table's schema it staged."""
    keys = part_records.consumers(conn, tid, source, before) | table_versions.built_on(conn, tid, source, before)
    since = key_records.first_statements(conn, tid, source, before)
    if since:
        held = part_records.held_by(conn, tid, source, before)
        keys |= key_records.scanned_after(conn, tid, since, held, (key_records.WRITE, key_records.READ), source)
        staged = part_records.staged_by(conn, tid, source, before)
        keys |= key_records.scanned_after(conn, tid, since, staged, (key_records.READ,), source)
    return keys


def withdrawn(conn: Connection, tid: str, key: str | None, attempt: int | None) -> Withdrawn:
    """What a statement under (key, attempt) withdraws: {key: attempt} and {dependent: None}."""
    if key is None:
        return {}
    return {key: attempt, **dict.fromkeys(dependents(conn, tid, key, attempt))}


def withdraw(conn: Connection, tid: str, key: str, attempt: int | None) -> int:
    """Compensate what `key` staged before `attempt` and everything its dependents staged; mark the
    dependents invalidated. Returns the number of parts changed."""
    if not _staged_before(conn, tid, key, attempt):
        return 0  # nothing to compensate, to forget or to invalidate (a first try, a try's later statements)
    others = _dependents(conn, tid, key, attempt)
    changed = 0
    for other in sorted(others):
        changed += part_records.compensate_key(conn, tid, other) + table_versions.compensate_key(conn, tid, other)
        key_records.forget_scans(conn, tid, other, None, writes_only=False)
    changed += part_records.compensate_key(conn, tid, key, attempt)
    changed += table_versions.compensate_key(conn, tid, key, attempt)
    key_records.forget_scans(conn, tid, key, attempt, writes_only=attempt is None)
    key_records.invalidate(conn, tid, dict.fromkeys(others, key))
    return changed


def ran_again(conn: Connection, tid: str, key: str) -> None:
    """A statement under `key` registered: whatever a retry had invalidated of it has run again."""
    key_records.clear(conn, tid, key)


def record(conn: Connection, tid: str, key: str | None, attempt: int | None, table_id: int,
           scanned: Sequence[str] | None) -> None:
    """Record a registering statement's place in order and what it scanned (None: nothing, an append).
    An append with no key is never needed: nothing withdraws it and it hides nothing."""
    if key is not None or scanned is not None:
        key_records.record_scan(conn, tid, key, attempt, table_id, scanned or [], key_records.WRITE)


def require_nothing_to_rerun(conn: Connection, tid: str) -> None:
    """Commit's check: InvalidatedKeysError (the transaction stays active) while a key must run again."""
    pending = key_records.invalidated(conn, tid)
    if pending:
        listed = ", ".join(f"{k!r} (withdrawn by the retry of {by!r})" for k, by in sorted(pending.items()))
        raise InvalidatedKeysError(
            f"transaction {tid} cannot commit yet: {listed} must run again, since a retry withdrew the output "
            "they had built on; run those tasks again (in Airflow: clear them, or clear the retried task "
            "with its downstream), then commit; or roll back", pending)
