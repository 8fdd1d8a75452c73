"""Transaction.merge (issue 32, item 4): MERGE as one statement of the multi-table transaction, on every catalog
and root of the `wh` fixture. The pure rules (clauses, null keys, refusals) are tests/core/test_merging.py's."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from airflow_txn import Warehouse
from airflow_txn.errors import SchemaMismatchError, SerializationError
from tests.core.test_errors import rejected

DIM = pa.schema([pa.field("id", pa.int64(), nullable=False), ("day", pa.string()), ("qty", pa.int64())])


def rows(*items: tuple[int, str, int]) -> pa.Table:
    return pa.Table.from_pylist([{"id": i, "day": d, "qty": q} for i, d, q in items], DIM)


def content(wh: Warehouse, table: str = "s.dim", **at: Any) -> list[tuple[int, str, int]]:
    return sorted((r["id"], r["day"], r["qty"]) for r in wh.read(table, **at).to_pylist())


@pytest.fixture
def dim(wh: Warehouse) -> int:
    """s.dim partitioned by day, keyed by (id, day); s.flat unpartitioned; both loaded; returns the first CSN."""
    wh.create_table("s.dim", DIM, partition_by=["day"])
    wh.create_table("s.flat", DIM)
    t = wh.begin()
    t.append("s.dim", rows((1, "a", 1), (2, "a", 2), (3, "b", 3)))
    t.append("s.flat", rows((1, "a", 1), (2, "a", 2), (3, "b", 3)))
    return t.commit()


def test_an_upsert_rewrites_only_the_parts_of_the_sources_partitions(wh: Warehouse, dim: int) -> None:
    t = wh.begin()
    counts = t.merge("s.dim", rows((2, "a", 20), (4, "c", 40)), on=["id", "day"])
    assert counts == {"updated": 1, "inserted": 1, "deleted": 0}
    parts = wh.transaction_info(t.tid)["parts"]
    removed = {p["partition"]["day"] for p in parts if p["role"] == "removed"}
    assert removed == {"a"}  # day b's part was never rewritten (nor read)
    csn = t.commit()
    assert content(wh) == [(1, "a", 1), (2, "a", 20), (3, "b", 3), (4, "c", 40)]
    assert content(wh, csn=dim) == [(1, "a", 1), (2, "a", 2), (3, "b", 3)]  # time travel: the old version
    assert csn > dim


def test_merge_joins_the_multi_table_transaction(wh: Warehouse, dim: int) -> None:
    """A dimension and its fact table change together: one CSN, or neither."""
    t = wh.begin()
    t.merge("s.dim", rows((1, "a", 100)), on=["id", "day"], when_not_matched="ignore")
    t.merge("s.flat", rows((3, "b", 0)), on="id", when_matched="delete")
    t.rollback()
    assert content(wh) == [(1, "a", 1), (2, "a", 2), (3, "b", 3)]
    t = wh.begin()
    t.merge("s.dim", rows((1, "a", 100)), on=["id", "day"], when_not_matched="ignore")
    t.merge("s.flat", rows((3, "b", 0)), on="id", when_matched="delete")
    csn = t.commit()
    assert content(wh, csn=csn) == [(1, "a", 100), (2, "a", 2), (3, "b", 3)]
    assert content(wh, "s.flat", csn=csn) == [(1, "a", 1), (2, "a", 2)]


def test_setters_and_not_matched_by_source(wh: Warehouse, dim: int) -> None:
    t = wh.begin()
    assert t.merge("s.flat", rows((1, "a", 5), (9, "z", 9)), on="id",
                   when_matched={"qty": pc.field("qty") + pc.field("source", "qty")},
                   when_not_matched_by_source="delete") == {"updated": 1, "inserted": 1, "deleted": 2}
    t.commit()
    assert content(wh, "s.flat") == [(1, "a", 6), (9, "z", 9)]


def test_a_bad_merge_stages_nothing(wh: Warehouse, dim: int) -> None:
    t = wh.begin()
    rejected(wh, wh.config.root, SchemaMismatchError,
             lambda: t.merge("s.dim", rows((1, "a", 1), (1, "a", 2)), on=["id", "day"]), match="more than once")
    assert t.state == "active" and wh.transaction_info(t.tid)["parts"] == []
    t.rollback()


def test_two_merges_of_one_part_conflict_first_writer_wins(wh: Warehouse, dim: int) -> None:
    first, second = wh.begin(), wh.begin()
    first.merge("s.dim", rows((1, "a", 10)), on=["id", "day"])
    with pytest.raises(SerializationError):
        second.merge("s.dim", rows((2, "a", 20)), on=["id", "day"])
    first.commit()
    assert content(wh) == [(1, "a", 10), (2, "a", 2), (3, "b", 3)]


def test_a_retried_merge_replaces_its_earlier_attempt(wh: Warehouse, dim: int) -> None:
    t = wh.begin()
    wh.attach(t.tid).use_key("upsert", 1).merge("s.dim", rows((2, "a", 20), (5, "a", 50)), on=["id", "day"])
    wh.attach(t.tid).use_key("upsert", 2).merge("s.dim", rows((2, "a", 21)), on=["id", "day"])
    t.commit()
    assert content(wh) == [(1, "a", 1), (2, "a", 21), (3, "b", 3)]


def test_two_merges_inserting_one_key_cannot_both_commit(wh: Warehouse, dim: int) -> None:
    """Neither rewrites a part (no removal lock to collide on), both insert (4, 'c'): the second to commit would
    leave the key twice. A MERGE that inserts is validated at commit whatever the isolation level (D27)."""
    first, second = wh.begin(), wh.begin()
    assert first.merge("s.dim", rows((4, "c", 40)), on=["id", "day"])["inserted"] == 1
    assert second.merge("s.dim", rows((4, "c", 41)), on=["id", "day"])["inserted"] == 1
    first.commit()
    with pytest.raises(SerializationError, match=r"merged into s\.dim"):
        second.commit()
    assert content(wh) == [(1, "a", 1), (2, "a", 2), (3, "b", 3), (4, "c", 40)]


def test_a_merge_is_not_validated_against_commits_to_partitions_it_did_not_scan(wh: Warehouse, dim: int) -> None:
    merging, other = wh.begin(), wh.begin()
    merging.merge("s.dim", rows((4, "c", 40)), on=["id", "day"])
    other.append("s.dim", rows((7, "b", 7)))  # day b: not among the source's partitions
    other.commit()
    merging.commit()
    assert content(wh) == [(1, "a", 1), (2, "a", 2), (3, "b", 3), (4, "c", 40), (7, "b", 7)]
