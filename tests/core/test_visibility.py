"""The visibility rule (invariant 2): each clause of is_visible, and is_visible agreeing with visible_clause."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import delete, insert, select

from airflow_txn.catalog import Catalog, part_records, schema
from airflow_txn.catalog.visibility_sql import visible_branches, visible_clause
from airflow_txn.model.csn import PREHISTORIC_CSN, ROLLBACK_CSN
from airflow_txn.model.visibility import VersionInfo, is_visible

ME = "5-1-00000000000000aa"
OTHER = "5-2-00000000000000bb"
THIRD = "7-1-00000000000000cc"
S = 10  # the reader's snapshot in the explicit cases


@dataclass(frozen=True)
class Case:
    why: str
    part: VersionInfo
    tid: str | None
    snapshot: int
    visible: bool


CASES = [
    # clause 1: the reader's own created part
    Case("own staged part", VersionInfo(ME, None, None, None), ME, S, True),
    Case("own staged part, snapshot 1", VersionInfo(ME, None, None, None), ME, PREHISTORIC_CSN, True),
    Case("own staged part removed by itself", VersionInfo(ME, None, ME, None), ME, S, False),
    Case("own staged part locked by another", VersionInfo(ME, None, OTHER, None), ME, S, True),
    Case("own part compensated (retry)", VersionInfo(ME, ROLLBACK_CSN, ME, None), ME, S, False),
    Case("own staged part, seen by another", VersionInfo(ME, None, None, None), OTHER, S, False),
    Case("own staged part, seen outside txns", VersionInfo(ME, None, None, None), None, S, False),
    # clause 2: committed before / after the snapshot
    Case("committed before snapshot", VersionInfo(OTHER, 4, None, None), ME, S, True),
    Case("committed at snapshot", VersionInfo(OTHER, S, None, None), ME, S, True),
    Case("committed after snapshot", VersionInfo(OTHER, S + 1, None, None), ME, S, False),
    Case("committed before, reader outside txns", VersionInfo(OTHER, 4, None, None), None, S, True),
    Case("committed after, reader outside txns", VersionInfo(OTHER, S + 1, None, None), None, S, False),
    Case("prehistoric part at snapshot 1", VersionInfo(OTHER, PREHISTORIC_CSN, None, None), None, 1, True),
    # removed before / after the snapshot
    Case("removed before snapshot", VersionInfo(OTHER, 3, THIRD, 6), ME, S, False),
    Case("removed at snapshot", VersionInfo(OTHER, 3, THIRD, S), ME, S, False),
    Case("removed after snapshot", VersionInfo(OTHER, 3, THIRD, S + 1), ME, S, True),
    Case("removal lock held by another", VersionInfo(OTHER, 3, THIRD, None), ME, S, True),
    Case("removal lock held by reader", VersionInfo(OTHER, 3, ME, None), ME, S, False),
    Case("removed after snapshot by the reader", VersionInfo(OTHER, 3, ME, S + 1), ME, S, False),
    Case("removed before, reader outside txns", VersionInfo(OTHER, 3, THIRD, 6), None, S, False),
    Case("removed after, reader outside txns", VersionInfo(OTHER, 3, THIRD, S + 1), None, S, True),
    Case("locked, reader outside txns", VersionInfo(OTHER, 3, THIRD, None), None, S, True),
    # RollbackCSN is never visible
    Case("rolled back, other reader", VersionInfo(OTHER, ROLLBACK_CSN, None, None), ME, S, False),
    Case("rolled back, huge snapshot", VersionInfo(OTHER, ROLLBACK_CSN, None, None), None, ROLLBACK_CSN - 1, False),
    Case("own rolled back part", VersionInfo(ME, ROLLBACK_CSN, ME, None), ME, ROLLBACK_CSN - 1, False),
    # never committed, not mine
    Case("staged by another", VersionInfo(OTHER, None, None, None), ME, ROLLBACK_CSN - 1, False),
]


@pytest.mark.parametrize("case", CASES, ids=[c.why for c in CASES])
def test_is_visible_explicit_cases(case: Case) -> None:
    assert is_visible(case.part, case.tid, case.snapshot) is case.visible


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Catalog, int]]:
    """A real SQLite catalog with one table row (the parts' foreign key); yields (catalog, table id)."""
    path: Path = tmp_path_factory.mktemp("visibility") / "catalog.db"
    cat = Catalog(f"sqlite:///{path}")
    cat.initialize()
    with cat.write() as conn:
        result = conn.execute(
            insert(schema.tables).values(
                name="ns.parts", schema_ipc=b"-", partition_by="[]", directory="ns/parts", created_at=time.time()
            )
        )
        assert result.inserted_primary_key is not None
        table_id = int(result.inserted_primary_key[0])
    yield cat, table_id
    cat.dispose()


def _store(cat: Catalog, table_id: int, parts: list[VersionInfo]) -> list[int]:
    """Replace every part row by `parts` (ids 1..n, one statement); return their ids in order."""
    ids = list(range(1, len(parts) + 1))
    with cat.write() as conn:
        conn.execute(delete(schema.parts))
        conn.execute(insert(schema.parts), [
            {"id": i, "table_id": table_id, "partition_key": "{}", "path": f"p-{i:032x}", "files": "[]",
             "row_count": 1, "size_bytes": 1, "creation_tid": p.creation_tid, "creation_csn": p.creation_csn,
             "removal_tid": p.removal_tid, "removal_csn": p.removal_csn, "created_at": 0.0}
            for i, p in zip(ids, parts, strict=True)
        ])
    return ids


def _selected(cat: Catalog, readers: list[tuple[str | None, int]]) -> list[set[int]]:
    """The part ids visible_clause selects for each (tid, snapshot), all in one read transaction."""
    with cat.read() as conn:
        return [
            {int(r.id) for r in conn.execute(select(schema.parts.c.id).where(visible_clause(tid, snapshot)))}
            for tid, snapshot in readers
        ]


def test_visible_clause_explicit_cases(catalog: tuple[Catalog, int]) -> None:
    cat, table_id = catalog
    ids = _store(cat, table_id, [case.part for case in CASES])
    selected = _selected(cat, [(case.tid, case.snapshot) for case in CASES])
    for part_id, case, visible in zip(ids, CASES, selected, strict=True):
        assert (part_id in visible) is case.visible, case.why


def test_removal_lock_of_reader_hides_even_own_part() -> None:
    # A part the reader both created and removed (e.g. an update of its own staged rows) is gone for it.
    part = VersionInfo(ME, None, ME, None)
    assert not is_visible(part, ME, ROLLBACK_CSN - 1)
    assert not is_visible(part, OTHER, ROLLBACK_CSN - 1)


TIDS = [ME, OTHER, THIRD]
_csn = st.one_of(st.none(), st.integers(min_value=1, max_value=12), st.just(ROLLBACK_CSN))
_parts = st.builds(
    VersionInfo,
    creation_tid=st.sampled_from(TIDS),
    creation_csn=_csn,
    removal_tid=st.one_of(st.none(), st.sampled_from(TIDS)),
    removal_csn=st.one_of(st.none(), st.integers(min_value=1, max_value=12)),
)
_readers = st.one_of(st.none(), st.sampled_from([*TIDS, "9-9-00000000000000dd"]))
_snapshots = st.one_of(st.integers(min_value=1, max_value=13), st.just(ROLLBACK_CSN - 1))


@settings(max_examples=120, deadline=None)
@given(parts=st.lists(_parts, min_size=1, max_size=12),
       readers=st.lists(st.tuples(_readers, _snapshots), min_size=1, max_size=6))
def test_is_visible_and_visible_clause_agree(catalog: tuple[Catalog, int], parts: list[VersionInfo],
                                             readers: list[tuple[str | None, int]]) -> None:
    cat, table_id = catalog
    ids = _store(cat, table_id, parts)
    for (tid, snapshot), selected in zip(readers, _selected(cat, readers), strict=True):
        expected = {i for i, p in zip(ids, parts, strict=True) if is_visible(p, tid, snapshot)}
        assert selected == expected, (tid, snapshot)


@settings(max_examples=80, deadline=None)
@given(parts=st.lists(_parts, min_size=1, max_size=12),
       readers=st.lists(st.tuples(_readers, _snapshots), min_size=1, max_size=6))
def test_visible_branches_are_disjoint_and_make_the_rule(catalog: tuple[Catalog, int], parts: list[VersionInfo],
                                                         readers: list[tuple[str | None, int]]) -> None:
    """visible_parts selects the UNION ALL of visible_branches: no part twice, exactly the visible ones."""
    cat, table_id = catalog
    ids = _store(cat, table_id, parts)
    with cat.read() as conn:
        for tid, snapshot in readers:
            per_branch = [[int(r.id) for r in conn.execute(select(schema.parts.c.id).where(clause))]
                          for clause in visible_branches(tid, snapshot)]
            listed = [p.id for p in part_records.visible_parts(conn, table_id, tid, snapshot)]
            expected = [i for i, p in zip(ids, parts, strict=True) if is_visible(p, tid, snapshot)]
            assert sorted(i for branch in per_branch for i in branch) == expected, (tid, snapshot)
            assert listed == expected, (tid, snapshot)
