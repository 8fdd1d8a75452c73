"""Part rows in the catalog: registering, listing visible parts, removal locks, stamps, compensation.

Every statement here is one bulk UPDATE/INSERT with bound parameters; removal locks are
compare-and-swap on `removal_tid IS NULL` whose rowcount tells a conflict (invariant 6).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import Connection, and_, delete, insert, or_, select, update

from airflow_txn.catalog import schema
from airflow_txn.csn import ROLLBACK_CSN
from airflow_txn.errors import SerializationError
from airflow_txn.partitioning import Partition, parse_partition_key, partition_key
from airflow_txn.storage import WrittenPart
from airflow_txn.visibility import VersionInfo, visible_clause

_p = schema.parts.c


@dataclass(frozen=True, slots=True)
class PartRow:
    id: int
    table_id: int
    partition_key: str
    path: str
    files: tuple[str, ...]
    row_count: int
    size_bytes: int
    version: VersionInfo
    stage_key: str | None

    @property
    def partition(self) -> Partition:
        return parse_partition_key(self.partition_key)


def _from_row(row: object) -> PartRow:
    r = row
    return PartRow(
        id=int(r.id), table_id=int(r.table_id), partition_key=str(r.partition_key),  # type: ignore[attr-defined]
        path=str(r.path), files=tuple(json.loads(r.files)),  # type: ignore[attr-defined]
        row_count=int(r.row_count), size_bytes=int(r.size_bytes),  # type: ignore[attr-defined]
        version=VersionInfo(r.creation_tid, r.creation_csn, r.removal_tid, r.removal_csn),  # type: ignore[attr-defined]
        stage_key=r.stage_key,  # type: ignore[attr-defined]
    )


def visible_parts(conn: Connection, table_id: int, tid: str | None, snapshot: int,
                  partition_keys: Sequence[str] | None = None) -> list[PartRow]:
    stmt = select(schema.parts).where(_p.table_id == table_id, visible_clause(tid, snapshot))
    if partition_keys is not None:
        stmt = stmt.where(_p.partition_key.in_(list(partition_keys)))
    return [_from_row(r) for r in conn.execute(stmt.order_by(_p.id))]


def register(conn: Connection, table_id: int, tid: str, key: str | None,
             written: Sequence[tuple[Partition, WrittenPart]]) -> None:
    if not written:
        return
    now = time.time()
    conn.execute(
        insert(schema.parts),
        [
            {
                "table_id": table_id, "partition_key": partition_key(partition), "path": part.path,
                "files": json.dumps(list(part.files)), "row_count": part.row_count, "size_bytes": part.size_bytes,
                "creation_tid": tid, "creation_csn": None, "removal_tid": None, "removal_csn": None,
                "stage_key": key, "removal_key": None, "created_at": now,
            }
            for partition, part in written
        ],
    )


def compensate_key(conn: Connection, tid: str, key: str) -> int:
    """Invariant 7: undo what an earlier attempt staged under `key` in this transaction."""
    created = conn.execute(
        update(schema.parts)
        .where(_p.creation_tid == tid, _p.stage_key == key, _p.creation_csn.is_(None))
        .values(creation_csn=ROLLBACK_CSN, removal_tid=tid)  # removal_tid was NULL or already tid
    ).rowcount
    released = conn.execute(
        update(schema.parts)
        .where(_p.removal_tid == tid, _p.removal_key == key, _p.removal_csn.is_(None),
               or_(_p.creation_csn.is_(None), _p.creation_csn != ROLLBACK_CSN))
        .values(removal_tid=None, removal_key=None)
    ).rowcount
    return int(created) + int(released)


def lock_for_removal(conn: Connection, tid: str, key: str | None, part_ids: Sequence[int]) -> None:
    """Take the removal lock on each part, or raise SerializationError naming the holder."""
    for part_id in part_ids:
        taken = conn.execute(
            update(schema.parts)
            .where(_p.id == part_id, _p.removal_tid.is_(None))
            .values(removal_tid=tid, removal_key=key)
        ).rowcount
        if taken != 1:
            holder = conn.execute(select(_p.removal_tid).where(_p.id == part_id)).scalar()
            who = "another statement of this transaction" if holder == tid else f"transaction {holder}"
            raise SerializationError(
                f"part {part_id} is being replaced or was removed by {who}; "
                f"transaction {tid} conflicts and can only roll back"
            )


def tables_touched(conn: Connection, tid: str) -> list[int]:
    stmt = select(_p.table_id).where(
        or_(and_(_p.creation_tid == tid, or_(_p.creation_csn.is_(None), _p.creation_csn != ROLLBACK_CSN)),
            _p.removal_tid == tid)
    ).distinct()
    return sorted(int(r.table_id) for r in conn.execute(stmt))


def staged_created(conn: Connection, tid: str) -> list[tuple[int, PartRow]]:
    stmt = select(schema.parts).where(_p.creation_tid == tid, _p.creation_csn.is_(None))
    return [(int(r.table_id), _from_row(r)) for r in conn.execute(stmt)]


def stamp_commit(conn: Connection, tid: str, table_id: int, csn: int) -> None:
    """Apply one table of a committed transaction: its CSN on created and removed parts (idempotent)."""
    conn.execute(
        update(schema.parts)
        .where(_p.table_id == table_id, _p.creation_tid == tid, _p.creation_csn.is_(None))
        .values(creation_csn=csn)
    )
    conn.execute(
        update(schema.parts)
        .where(_p.table_id == table_id, _p.removal_tid == tid, _p.removal_csn.is_(None))
        .values(removal_csn=csn)
    )


def stamp_rollback(conn: Connection, tid: str, table_id: int) -> None:
    """Invariant 5 for one table: created parts never visible, removal locks released."""
    conn.execute(
        update(schema.parts)
        .where(_p.table_id == table_id, _p.creation_tid == tid, _p.creation_csn.is_(None))
        .values(creation_csn=ROLLBACK_CSN)
    )
    conn.execute(
        update(schema.parts)
        .where(_p.table_id == table_id, _p.removal_tid == tid, _p.removal_csn.is_(None))
        .values(removal_tid=None, removal_key=None)
    )


def written_partitions(conn: Connection, tid: str, table_id: int) -> set[str]:
    """Partition keys a (committed) transaction created or removed parts in, for serializable checks."""
    stmt = select(_p.partition_key).where(
        _p.table_id == table_id,
        or_(and_(_p.creation_tid == tid, _p.creation_csn != ROLLBACK_CSN), _p.removal_tid == tid),
    ).distinct()
    return {str(r.partition_key) for r in conn.execute(stmt)}


def garbage(conn: Connection, horizon: int, limit: int) -> list[PartRow]:
    """Parts no snapshot >= horizon can see: rolled back, or removed at a CSN <= horizon."""
    stmt = select(schema.parts).where(
        or_(_p.creation_csn == ROLLBACK_CSN, and_(_p.removal_csn.is_not(None), _p.removal_csn <= horizon))
    ).limit(limit)
    return [_from_row(r) for r in conn.execute(stmt)]


def forget(conn: Connection, part_id: int) -> None:
    conn.execute(delete(schema.parts).where(_p.id == part_id))


def registered_paths(conn: Connection, table_id: int) -> list[str]:
    return [str(r.path) for r in conn.execute(select(_p.path).where(_p.table_id == table_id))]


def of_transaction(conn: Connection, tid: str) -> list[PartRow]:
    stmt = select(schema.parts).where(or_(_p.creation_tid == tid, _p.removal_tid == tid)).order_by(_p.id)
    return [_from_row(r) for r in conn.execute(stmt)]


def pending_tables(conn: Connection, tid: str) -> list[int]:
    """Tables where `tid` still has unstamped created parts or held removal locks (rollback's work)."""
    stmt = select(_p.table_id).where(
        or_(and_(_p.creation_tid == tid, _p.creation_csn.is_(None)),
            and_(_p.removal_tid == tid, _p.removal_csn.is_(None)))
    ).distinct()
    return sorted(int(r.table_id) for r in conn.execute(stmt))
