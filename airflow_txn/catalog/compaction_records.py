"""Catalog rows of background merges (compaction.py): candidates, the swap, and what others must know of merges.

A merge that swapped has a row in txn_compactions. Its sources carry removal_tid = the merge's tid and
removal_csn = the merge CSN M; the merged part carries creation_tid = the merge's tid and creation_csn
= M. Two other protocols look merges up here:
  - a user statement that chose parts before a merge swapped them out (`follow_merges`): it replaces
    the merged part instead when it replaces every source, else it must choose again (MergedAwayError);
  - vacuum (`garbage`): sources stay while a reader may still hold a file list taken before the swap
    (and, as every part, while a tag sees them: tag_records.pinned_by_a_tag).
A merge's row goes (vacuum's history purge, `purgeable`) once no part carries its tid as removal_tid any more
and it swapped before the history kept, except each table's newest (`last_merge_times`, `merges_signature`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from sqlalchemy import Connection, Select, and_, delete, exists, func, insert, or_, select, update

from airflow_txn.catalog import Catalog, part_records, schema, tag_records
from airflow_txn.catalog.clock import wall_time
from airflow_txn.catalog.part_records import PartRow
from airflow_txn.errors import MergedAwayError as MergedAwayError  # raised here (follow_merges); public in errors
from airflow_txn.model.csn import ROLLBACK_CSN
from airflow_txn.model.parts import WrittenPart

_p = schema.parts.c
_m = schema.compactions.c

MAX_FOLLOW = 100
"""Merged parts merged again, followed at most this deep (each merge removes parts: the chain is short)."""


@dataclass(frozen=True, slots=True)
class SwapResult:
    merged_part_id: int | None  # None: a source was taken or is gone, the merge must yield
    reason: str = ""


def candidates(conn: Connection, table_id: int, bound: int,
               partition_keys: Sequence[str] | None = None) -> list[PartRow]:
    """Committed parts nobody removes or locks, created at a CSN <= bound, in (creation_csn, id) order."""
    stmt = select(*part_records.columns(conn)).where(
        _p.table_id == table_id, _p.creation_csn.is_not(None), _p.creation_csn <= bound,
        _p.creation_csn != ROLLBACK_CSN, _p.removal_tid.is_(None), _p.removal_csn.is_(None),
    )
    if partition_keys is not None:
        stmt = stmt.where(_p.partition_key.in_(list(partition_keys)))
    return part_records.part_rows(conn.execute(stmt.order_by(_p.creation_csn, _p.id)))


def still_free(conn: Connection, sources: Sequence[PartRow]) -> bool:
    """Every source is still committed, unlocked and not removed."""
    rows = conn.execute(
        select(_p.id).where(_p.id.in_([s.id for s in sources]), _p.removal_tid.is_(None), _p.removal_csn.is_(None))
    ).all()
    return len(rows) == len(sources)


def swap(conn: Connection, catalog: Catalog, tid: str, table_id: int, partition_key: str,
         sources: Sequence[PartRow], written: WrittenPart, merge_csn: int, schema_version: int = 1) -> SwapResult:
    """The swap, inside the caller's catalog transaction: compare-and-swap the removal of every source
    (NULL -> tid, stamped M at once), register the merged part at M and record the merge. A source
    a user transaction took (or that is gone) makes it return None: the caller must roll back.
    Where rows lock (PostgreSQL) the sources are locked first with SKIP LOCKED: a merge never waits
    for a user statement holding one (it yields), so it can neither block nor deadlock a user."""
    ids = [s.id for s in sources]
    free = select(_p.id).where(_p.id.in_(ids), _p.removal_tid.is_(None), _p.removal_csn.is_(None)).order_by(_p.id)
    if catalog.supports_for_update:
        free = free.with_for_update(skip_locked=True)
    if len(conn.execute(free).all()) != len(ids):
        return SwapResult(None, "a source part is locked or was removed by another transaction")
    taken = conn.execute(
        update(schema.parts)
        .where(_p.id.in_(ids), _p.removal_tid.is_(None), _p.removal_csn.is_(None))
        .values(removal_tid=tid, removal_csn=merge_csn, removal_key=None, removal_attempt=None)
    ).rowcount
    if taken != len(ids):
        return SwapResult(None, f"{len(ids) - taken} of {len(ids)} source parts were locked or removed meanwhile")
    now = wall_time()
    result = conn.execute(
        insert(schema.parts).values(
            table_id=table_id, partition_key=partition_key, path=written.path, files=json.dumps(list(written.files)),
            row_count=written.row_count, size_bytes=written.size_bytes, creation_tid=tid, creation_csn=merge_csn,
            removal_tid=None, removal_csn=None, stage_key=None, stage_attempt=None, removal_key=None,
            removal_attempt=None, created_at=now,
            **({"schema_version": schema_version} if schema_version != 1 else {}),
        )
    )
    assert result.inserted_primary_key is not None
    merged_id = int(result.inserted_primary_key[0])
    conn.execute(insert(schema.compactions).values(
        tid=tid, table_id=table_id, partition_key=partition_key, merge_csn=merge_csn, merged_part_id=merged_id,
        source_parts=len(ids), rows=written.row_count, source_bytes=sum(s.size_bytes for s in sources),
        merged_bytes=written.size_bytes, committed_at=now,
    ))
    return SwapResult(merged_id)


def follow_merges(conn: Connection, part_ids: Sequence[int], catalog: Catalog | None = None) -> list[int]:
    """The parts to take removal locks on, for a statement that chose `part_ids`: a chosen part that a
    merge swapped out is replaced by the merged part when the statement chose every source of that
    merge (the same rows); otherwise MergedAwayError (the statement chooses again from the merged part).
    With a catalog whose rows lock, the chosen rows are locked first (in id order): a swap in flight
    is waited for, so its outcome is seen here and not as a lost compare-and-swap later.
    Without merges among them this is one or two queries and returns `part_ids` unchanged."""
    ids = list(part_ids)
    if not ids:
        return ids
    for _ in range(MAX_FOLLOW):
        if catalog is not None and catalog.supports_for_update:
            conn.execute(select(_p.id).where(_p.id.in_(ids)).order_by(_p.id).with_for_update())
        merged = conn.execute(
            select(_p.id, _p.removal_tid).join(schema.compactions, _m.tid == _p.removal_tid).where(_p.id.in_(ids))
        ).all()
        if not merged:
            return ids
        chosen = set(ids)
        for merge_tid in sorted({str(r.removal_tid) for r in merged}):
            sources = {int(i) for i in conn.execute(select(_p.id).where(_p.removal_tid == merge_tid)).scalars()}
            if not sources <= chosen:
                raise MergedAwayError(
                    f"a background merge ({merge_tid}) combined parts this statement chose with others; "
                    "the statement chooses again"
                )
            target = int(conn.execute(select(_m.merged_part_id).where(_m.tid == merge_tid)).scalar_one())
            ids = [i for i in ids if i not in sources] + [target]
            chosen = set(ids)
    raise MergedAwayError(f"parts merged more than {MAX_FOLLOW} times over while a statement ran")


def protect_after(retention_seconds: float, oldest_open_created_at: float | None, clock_margin: float,
                  now: float) -> float:
    """The merge time after which a merge's sources are kept: merges younger than the retention window,
    and merges not older (by `clock_margin`, for clocks of different hosts) than the oldest open transaction."""
    cutoff = now - retention_seconds
    if oldest_open_created_at is not None:
        cutoff = min(cutoff, oldest_open_created_at - clock_margin)
    return cutoff


def garbage(conn: Connection, table_id: int, horizon: int, protected_after: float,
            limit: int | None) -> list[PartRow]:
    """Parts of one table no snapshot >= horizon can see (rolled back, or removed at a CSN <= horizon),
    except sources of merges that swapped after `protected_after` (a reader may still read them) and
    parts a tag holding the table sees (tag_records.pinned_by_a_tag: kept whatever the horizon)."""
    stmt = select(*part_records.columns(conn)).where(*_garbage(table_id, horizon, protected_after))
    return part_records.part_rows(conn.execute(stmt.order_by(_p.id).limit(limit)))


ROLLED_BACK, REMOVED = "rolled back", "removed"
GARBAGE_KINDS = (ROLLED_BACK, REMOVED)
"""The passes of vacuum's batches over one table's garbage, in order (garbage_batch)."""


class GarbagePart(NamedTuple):
    """What vacuum's batches need of a garbage part: its row, its files' place, where the pass resumes."""

    id: int
    path: str
    removal_csn: int | None


def garbage_batch(conn: Connection, table_id: int, horizon: int, protected_after: float, limit: int, kind: str,
                  after: int | None) -> list[GarbagePart]:
    """The next `limit` parts of `garbage`, for deleting batch by batch, each batch along an index range of
    ix_txn_parts_table_removal that holds little but what is still to delete, so a batch reads its own rows, not
    again every one the batches before it deleted (ordered by id, each batch re-read the table's whole garbage: a
    day of 240,000 parts in one table cost 125 us a part, docs/BENCHMARKS.md, B16; and the empty batch that ended
    the loop scanned the whole catalog by id). ROLLED_BACK: parts that rolled back (creation CSN RollbackCSN; never
    removed, so removal_csn is NULL: rollback and a withdrawn retry set the creation CSN of parts nobody could
    remove), by id, from the start each time (the range holds only rolled-back parts not deleted yet, ones rolled
    back during the run included); REMOVED: parts removed at a CSN <= horizon, by removal CSN from `after` (what
    garbage_resume said of the last batch). Together they are `garbage`."""
    where = _garbage(table_id, horizon, protected_after)
    if kind == ROLLED_BACK:
        where += [_p.removal_csn.is_(None), _p.creation_csn == ROLLBACK_CSN]
        order = _p.id
    elif kind == REMOVED:
        where += [_p.removal_csn.is_not(None), _p.removal_csn <= horizon,
                  *([] if after is None else [_p.removal_csn >= after])]
        order = _p.removal_csn
    else:
        raise ValueError(f"unknown garbage kind {kind!r}")
    stmt = select(_p.id, _p.path, _p.removal_csn).where(*where).order_by(order).limit(limit)
    return [GarbagePart(*r) for r in conn.execute(stmt)]


def garbage_resume(kind: str, batch: Sequence[GarbagePart]) -> int | None:
    """Where the pass `kind` goes on after `batch` (deleted by then): REMOVED from its highest removal CSN (parts
    of that CSN not in the batch are still to come), ROLLED_BACK from the start of its range."""
    if kind == REMOVED:
        return max(p.removal_csn or 0 for p in batch)
    return None


def garbage_count(conn: Connection, table_id: int, horizon: int, protected_after: float) -> int:
    """How many parts `garbage` would list now (vacuum's progress total)."""
    stmt = select(func.count()).select_from(schema.parts).where(*_garbage(table_id, horizon, protected_after))
    return int(conn.execute(stmt).scalar_one())


def _garbage(table_id: int, horizon: int, protected_after: float) -> list[Any]:
    protected = select(_m.tid).where(_m.table_id == table_id, _m.committed_at > protected_after)
    return [_p.table_id == table_id,
            or_(_p.creation_csn == ROLLBACK_CSN, and_(_p.removal_csn.is_not(None), _p.removal_csn <= horizon)),
            or_(_p.removal_tid.is_(None), _p.removal_tid.not_in(protected)),
            ~tag_records.pinned_by_a_tag()]


def kept_for_tags(conn: Connection, table_id: int, horizon: int) -> int:
    """How many parts removed at a CSN <= horizon vacuum keeps because a tag holding the table sees them."""
    stmt = select(func.count()).select_from(schema.parts).where(
        _p.table_id == table_id, _p.removal_csn.is_not(None), _p.removal_csn <= horizon, tag_records.pinned_by_a_tag())
    return int(conn.execute(stmt).scalar_one())


def kept_sources(conn: Connection, table_id: int, horizon: int, protected_after: float) -> int:
    """How many merge sources past the horizon vacuum keeps for readers of the pre-merge file lists."""
    protected = select(_m.tid).where(_m.table_id == table_id, _m.committed_at > protected_after)
    stmt = select(_p.id).where(_p.table_id == table_id, _p.removal_csn.is_not(None), _p.removal_csn <= horizon,
                               _p.removal_tid.in_(protected))
    return len(conn.execute(stmt).all())


def last_merge_times(conn: Connection) -> dict[int, float]:
    """{table id: when its last merge swapped} for every table that had one."""
    stmt = select(_m.table_id, func.max(_m.committed_at)).group_by(_m.table_id)
    return {int(r[0]): float(r[1]) for r in conn.execute(stmt)}


def merges_signature(conn: Connection, table_id: int) -> str:
    """The table's background merges as `count:newest swap time`: when it differs from one taken earlier, a merge
    may have changed the files of a snapshot since (any merge, even one whose swap became visible late or whose
    row vacuum purged, changes it). The publishers' (Iceberg, Delta)."""
    c = schema.compactions.c
    count, newest = conn.execute(select(func.count(), func.max(c.committed_at)).where(c.table_id == table_id)).one()
    return f"{int(count)}:{float(newest or 0):.6f}"


def _sources_left(tid: Any) -> Any:
    return exists(select(_p.id).where(_p.removal_tid == tid))


def purgeable(swapped_before: float) -> Select[Any]:
    """Tids of merges no reader needs any more: none of their sources is left in txn_parts (vacuum purged them:
    `follow_merges` has nothing to follow, `garbage` nothing to protect), swapped before `swapped_before`, and
    not their table's newest merge (its time is `last_merge_times`' and `merges_signature`'s: with it kept, the
    newest swap time never goes back, so a purge changes the signature's count and never makes it repeat)."""
    newer = schema.compactions.alias("newer")
    return select(_m.tid).where(
        _m.committed_at < swapped_before,
        ~_sources_left(_m.tid),
        exists(select(newer.c.tid).where(newer.c.table_id == _m.table_id, newer.c.committed_at > _m.committed_at)),
    ).order_by(_m.committed_at, _m.tid)


def purge(conn: Connection, tids: list[str]) -> int:
    """Delete the rows of these merges (`purgeable`'s), each only if still no part carries its tid as removal_tid."""
    stmt = delete(schema.compactions).where(_m.tid.in_(tids), ~_sources_left(_m.tid))
    return int(conn.execute(stmt).rowcount)
