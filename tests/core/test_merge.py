"""Transaction.merge (issue 32, item 4): MERGE as one statement of the multi-table transaction, on every catalog
and root of the `wh` fixture. The pure rules (clauses, null keys, refusals) are tests/model/test_merging.py's."""

from __future__ import annotations

import datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from airflow_txn import Warehouse
from airflow_txn.errors import SchemaMismatchError, SerializationError
from airflow_txn.model import merging as merge_model
from airflow_txn.storage.root import Storage
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


# -- pruning by the key columns' Parquet statistics (D27 point 6) ------------------------------------------------

@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths of the parts read whole from now on (Storage.read_part, still doing its work)."""
    paths: list[str] = []
    original = Storage.read_part

    def recording(self: Storage, table_directory: str, path: str, *args: Any, **kwargs: Any) -> pa.Table:
        paths.append(path)
        return original(self, table_directory, path, *args, **kwargs)

    monkeypatch.setattr(Storage, "read_part", recording)
    return paths


def load_parts(wh: Warehouse, table: str, pieces: list[pa.Table]) -> list[str]:
    """Each piece appended (and committed) as a part of its own; returns the parts' paths in order."""
    paths = []
    for piece in pieces:
        t = wh.begin()
        t.append(table, piece)
        paths += [p["path"] for p in wh.transaction_info(t.tid)["parts"]]
        t.commit()
    return paths


@pytest.fixture
def day_a(wh: Warehouse) -> list[str]:
    """s.days partitioned by day: day "a" in 5 parts holding ids 0-9, 10-19, ..., 40-49; day "b" in one."""
    wh.create_table("s.days", DIM, partition_by=["day"])
    pieces = [rows(*[(i, "a", i) for i in range(10 * n, 10 * n + 10)]) for n in range(5)]
    return load_parts(wh, "s.days", [*pieces, rows((5, "b", 5))])


def test_a_merge_reads_and_rewrites_only_the_part_whose_key_range_holds_its_keys(
        wh: Warehouse, day_a: list[str], reads: list[str]) -> None:
    t = wh.begin()
    counts = t.merge("s.days", rows((12, "a", 120), (17, "a", 170)), on=["id", "day"])
    assert counts == {"updated": 2, "inserted": 0, "deleted": 0}
    assert reads == [day_a[1]]  # the other 4 parts of day a: pruned by their footers' id ranges, never read
    removed = [p["path"] for p in wh.transaction_info(t.tid)["parts"] if p["role"] == "removed"]
    assert removed == [day_a[1]]
    t.commit()
    assert content(wh, "s.days") == sorted([(i, "a", i * 10 if i in (12, 17) else i) for i in range(50)]
                                           + [(5, "b", 5)])


def test_a_merge_whose_keys_no_part_can_hold_reads_nothing_and_inserts(
        wh: Warehouse, day_a: list[str], reads: list[str]) -> None:
    t = wh.begin()
    assert t.merge("s.days", rows((100, "a", 1), (-1, "a", 2)), on=["id", "day"])["inserted"] == 2
    assert reads == []
    assert [p["role"] for p in wh.transaction_info(t.tid)["parts"]] == ["created"]
    t.commit()
    assert len(content(wh, "s.days")) == 53


def test_a_pruned_part_still_counts_as_scanned(wh: Warehouse, day_a: list[str], reads: list[str]) -> None:
    """Pruning changes which parts are read, not what the MERGE scanned: a commit into day a after its snapshot
    still fails a MERGE that inserted there, though it read no part of day a."""
    merging, other = wh.begin(), wh.begin()
    merging.merge("s.days", rows((100, "a", 1)), on=["id", "day"])
    assert reads == []
    other.append("s.days", rows((100, "a", 2)))
    other.commit()
    with pytest.raises(SerializationError, match=r"merged into s\.days"):
        merging.commit()


def test_not_matched_by_source_delete_reads_every_part(wh: Warehouse, day_a: list[str], reads: list[str]) -> None:
    t = wh.begin()
    counts = t.merge("s.days", rows((12, "a", 120)), on=["id", "day"], when_not_matched_by_source="delete")
    assert counts == {"updated": 1, "inserted": 0, "deleted": 50}
    assert sorted(reads) == sorted(day_a)
    t.commit()
    assert content(wh, "s.days") == [(12, "a", 120)]


def test_merges_of_disjoint_parts_of_one_partition_both_commit(wh: Warehouse, day_a: list[str]) -> None:
    first, second = wh.begin(), wh.begin()
    first.merge("s.days", rows((3, "a", 30)), on=["id", "day"], when_not_matched="ignore")
    second.merge("s.days", rows((33, "a", 330)), on=["id", "day"], when_not_matched="ignore")
    first.commit()
    second.commit()
    assert (3, "a", 30) in content(wh, "s.days") and (33, "a", 330) in content(wh, "s.days")


def test_a_key_that_does_not_cover_the_partition_columns_prunes_every_partitions_parts(
        wh: Warehouse, day_a: list[str], reads: list[str]) -> None:
    """Keyed by id alone, every part of the table is a candidate (a key may sit in any day); the footers still
    leave only the part holding id 44 to read."""
    t = wh.begin()
    assert t.merge("s.days", rows((44, "a", 440)), on="id")["updated"] == 1
    assert reads == [day_a[4]]
    t.commit()


KEYED = pa.schema([("s", pa.string()), ("d", pa.date32()), ("ts", pa.timestamp("us", tz="UTC")),
                   ("n", pa.int32()), ("v", pa.int64())])


def keyed(*items: tuple[Any, ...]) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(KEYED.names, item, strict=True)) for item in items], KEYED)


D = [datetime.date(2026, 1, day) for day in range(1, 29)]
TS = [datetime.datetime(2026, 1, 1, hour, tzinfo=datetime.UTC) for hour in range(24)]
KEYED_PARTS = [
    keyed(("apple", D[0], TS[0], 1, 1), ("avocado", D[1], TS[1], 2, 2), ("azure", D[2], TS[2], None, 3)),
    keyed(("banana", D[5], TS[5], 5, 4), ("berry", D[6], TS[6], 6, 5)),
    keyed(("cherry", D[10], TS[10], 10, 6), (None, D[11], None, 11, 7)),
    keyed((None, None, None, None, 8), (None, None, None, None, 9)),  # null-only keys: no statistics, never pruned
    keyed(("apple", D[20], TS[20], 20, 10), ("date", D[21], TS[21], 21, 11)),
]


@pytest.mark.parametrize(("on", "source", "read"), [
    (["s"], keyed(("berry", D[0], TS[0], 0, 50), ("blue", D[0], TS[0], 0, 51), (None, D[0], TS[0], 0, 52)), {1, 3, 4}),
    (["d"], keyed(("x", D[6], TS[0], 0, 60), ("y", D[15], TS[0], 0, 61)), {1, 3}),
    (["ts"], keyed(("x", D[0], TS[2], 0, 70), ("y", D[0], TS[23], 0, 71)), {0, 3}),
    (["s", "d"], keyed(("apple", D[15], TS[0], 0, 80), ("date", D[0], TS[0], 0, 81)), {3}),
    (["s", "d"], keyed(("apple", D[20], TS[0], 0, 90), ("cherry", D[10], TS[0], 0, 91)), {2, 3, 4}),
    (["n", "s"], keyed(("azure", D[0], TS[0], None, 95), ("banana", D[0], TS[0], 5, 96)), {1, 3}),
])
def test_merges_stay_correct_with_pruning(wh: Warehouse, reads: list[str], on: list[str], source: pa.Table,
                                          read: set[int]) -> None:
    """Each merge's result is the one of the same MERGE on the whole table at once (model/merging.py), and only
    the parts whose key ranges can hold a source key (null keys never match; null-only columns have no range)
    are read."""
    wh.create_table("s.keyed", KEYED)
    paths = load_parts(wh, "s.keyed", KEYED_PARTS)
    everything = wh.read("s.keyed")
    spec = merge_model.check(KEYED, "s.keyed", source, on)
    whole = merge_model.merge_part(everything, spec)
    expected = pa.concat_tables([whole.rows if whole.rows is not None else everything,
                                 merge_model.inserts(spec, [whole.matched])])
    reads.clear()
    t = wh.begin()
    counts = t.merge("s.keyed", source, on=on)
    assert {paths.index(p) for p in reads} == read
    assert counts["updated"] == whole.updated
    t.commit()
    assert sorted(wh.read("s.keyed").to_pylist(), key=repr) == sorted(expected.to_pylist(), key=repr)


def test_a_partition_column_of_the_key_rules_parts_out_by_the_partition_value(
        wh: Warehouse, reads: list[str]) -> None:
    """Partitioned by (day, qty), keyed by (id, day): the key does not cover the partition columns, so every part
    is a candidate; a part's day (its partition value) and its ids (its footer) rule it out."""
    wh.create_table("s.two", DIM, partition_by=["day", "qty"])
    paths = load_parts(wh, "s.two", [rows((1, "a", 1)), rows((2, "a", 2)), rows((2, "b", 2)), rows((1, "b", 9))])
    t = wh.begin()
    assert t.merge("s.two", rows((2, "a", 7)), on=["id", "day"]) == {"updated": 1, "inserted": 0, "deleted": 0}
    assert reads == [paths[1]]
    t.commit()
    assert content(wh, "s.two") == [(1, "a", 1), (1, "b", 9), (2, "a", 7), (2, "b", 2)]


def test_a_partitions_inserts_join_the_part_rewritten_there(wh: Warehouse, day_a: list[str]) -> None:
    """One new part per part rewritten: the rows a MERGE inserts into a partition go into the part it rewrites
    there (a part of their own only in a partition it rewrote nothing in)."""
    t = wh.begin()
    counts = t.merge("s.days", rows((12, "a", 120), (100, "a", 1), (7, "c", 7)), on=["id", "day"])
    assert counts == {"updated": 1, "inserted": 2, "deleted": 0}
    created = sorted((p["partition"]["day"], p["rows"]) for p in wh.transaction_info(t.tid)["parts"]
                     if p["role"] == "created")
    assert created == [("a", 11), ("c", 1)]
    t.commit()
    assert (100, "a", 1) in content(wh, "s.days") and (12, "a", 120) in content(wh, "s.days")
